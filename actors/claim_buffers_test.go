package actors_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/IBM/sarama"

	"github.com/patchflow/patchflow/actors"
	"github.com/patchflow/patchflow/actors/ordering"
	"github.com/patchflow/patchflow/messages"
)

// What a claim holds before the byte budget sees it: the record in the
// bridge's hand, the read-ahead (1 MiB) and sarama's channel, which holds
// ChannelBufferSize records (256 by default) whatever their size, one
// fetch response refilling it while the read-ahead is full. Records of
// 512 KB behind one the handler holds: the budget admits one, the
// read-ahead takes two, and sarama's channel takes every other record of
// the partition (here 45: 23 MB for a budget of 1 MiB; with 1 MB records,
// 256 MB per claim).
func TestClaimBuffersAreBoundedInBytes(t *testing.T) {
	const size, records = 512 << 10, 48
	_, k := newKfake(t, "big", "big-group", 1)
	pcfg := sarama.NewConfig()
	pcfg.Version = k.Version
	pcfg.Producer.Return.Successes = true
	pcfg.Producer.MaxMessageBytes = 1 << 20
	producer, err := sarama.NewSyncProducer(k.Brokers, pcfg)
	if err != nil {
		t.Fatal(err)
	}
	for i := range records {
		if _, _, err := producer.SendMessage(&sarama.ProducerMessage{Topic: "big", Key: sarama.StringEncoder(fmt.Sprint(i)),
			Value: sarama.ByteEncoder(make([]byte, size))}); err != nil {
			t.Fatal(err)
		}
	}
	_ = producer.Close()
	s := testSettings(ordering.ByKey)
	s.InFlightBytes = 1 << 20
	h := &gatedHandler{release: make(chan struct{}), honourCtx: true}
	defer close(h.release)
	b, err := actors.NewBridge(actors.BridgeConfig{System: newTestSystem(t), Settings: s, Handler: h,
		DeadLetters: actors.DeadLetterFunc(func(context.Context, *messages.DeadLetter) error { return nil })})
	if err != nil {
		t.Fatal(err)
	}
	stop := runMember(t, k, s, b, nil)
	defer stop()
	waitFor(t, "a record to run", func() bool { return h.running.Load() == 1 })
	var buffered int
	for range 20 { // let sarama fetch what it will
		time.Sleep(100 * time.Millisecond)
		for _, p := range b.Partitions() {
			buffered = max(buffered, p.Buffered)
		}
	}
	t.Logf("the claim buffers at most %d records of %d KB", buffered, size>>10)
	if held := int64(buffered) * size; held > 8<<20 {
		t.Fatalf("the claim buffers %d records of %d KB (%d MiB) beyond the %d MiB byte budget", buffered, size>>10, held>>20, s.InFlightBytes>>20)
	}
}
