package consumer

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/goleak"

	"github.com/IBM/sarama"

	"github.com/patchflow/patchflow/proving/kfakecontrol"
)

// stallLagReads makes the broker hold every OffsetFetch that asks for two
// partitions or more of group (the lag read's ListConsumerGroupOffsets; the
// members' offset manager and the committed reader ask for one) until
// release is called, which the test must do before it closes the broker.
// stalled is closed at the first.
func stallLagReads(c *kfake.Cluster, group string) (stalled chan struct{}, release func()) {
	stalled = make(chan struct{})
	sleeper := kfakecontrol.New(c)
	var once sync.Once
	c.ControlKey(int16(kmsg.OffsetFetch), func(r kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		req := r.(*kmsg.OffsetFetchRequest)
		n := 0
		if req.Group == group {
			for _, t := range req.Topics {
				n += len(t.Partitions)
			}
		}
		for _, g := range req.Groups {
			if g.Group == group {
				for _, t := range g.Topics {
					n += len(t.Partitions)
				}
			}
		}
		if n < 2 {
			return nil, nil, false
		}
		once.Do(func() { close(stalled) })
		sleeper.For(time.Hour) // until release
		return nil, nil, false
	})
	return stalled, sleeper.Stop
}

type lagBroker struct{ c *kfake.Cluster }

func lagTestBroker(t *testing.T, topic string) *lagBroker {
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(2, topic))
	if err != nil {
		t.Fatal(err)
	}
	return &lagBroker{c}
}
func (b *lagBroker) Close()                  { b.c.Close() }
func (b *lagBroker) Addrs() []string         { return b.c.ListenAddrs() }
func (b *lagBroker) Cluster() *kfake.Cluster { return b.c }
func (b *lagBroker) Produce(topic, k, v string) error {
	cfg := sarama.NewConfig()
	cfg.Producer.Return.Successes = true
	p, err := sarama.NewSyncProducer(b.Addrs(), cfg)
	if err != nil {
		return err
	}
	defer p.Close()
	_, _, err = p.SendMessage(&sarama.ProducerMessage{Topic: topic, Key: sarama.StringEncoder(k), Value: sarama.StringEncoder(v)})
	return err
}

var lagLeakIgnores = []goleak.Option{
	goleak.IgnoreCurrent(),
	goleak.IgnoreTopFunction("github.com/asynkron/protoactor-go/actor.NewDeadLetter.NewThrottle.func4.1"),
	goleak.IgnoreTopFunction("github.com/rcrowley/go-metrics.(*meterArbiter).tick"),
}

// A lag read the brokers hold ends with Run: Run waits for it at most its
// request's timeout (lagTimeout), and leaves no goroutine behind.
func TestAHeldLagReadEndsWithRun(t *testing.T) {
	broker := lagTestBroker(t, "stuck")
	defer broker.Close()
	opts := append([]goleak.Option(nil), lagLeakIgnores...)
	stalled, release := stallLagReads(broker.Cluster(), "stuck")
	defer release()
	h := HandlerFunc(func(context.Context, *Record) error { return nil })
	r := start(t, testConfig(broker.Addrs(), "3.6.0", "stuck", "stuck"), h)
	select {
	case <-stalled:
	case <-time.After(30 * time.Second):
		_ = r.Stop()
		t.Fatal("no lag read reached the broker")
	}
	time.Sleep(time.Second)
	began := time.Now()
	if err := r.Stop(); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(began); took > lagTimeout+2*time.Second {
		t.Fatalf("Run returned %v after its context was cancelled; a held read should cost it at most %v", took, lagTimeout)
	}
	if err := goleak.Find(opts...); err != nil {
		var ours []string
		for _, g := range strings.Split(err.Error(), " Goroutine ")[1:] {
			if !strings.Contains(g, "kfake") { // the broker's own are not Run's
				ours = append(ours, g)
			}
		}
		if len(ours) > 0 {
			t.Fatalf("%d goroutines left once Run returned:\n%s", len(ours), strings.Join(ours, "\n ---- "))
		}
	}
}

// A lag read the brokers hold does not stop consumption: it runs on a
// client of its own, so the checks that keep the claims confirmed (which
// share the probe client's connection) do not wait behind it. Held past
// the session timeout, the claims stay confirmed and new records are
// handled.
func TestAHeldLagReadDoesNotStopConsumption(t *testing.T) {
	broker := lagTestBroker(t, "stuck2")
	defer broker.Close()
	var handled atomic.Int64
	h := HandlerFunc(func(context.Context, *Record) error { handled.Add(1); return nil })
	r := start(t, testConfig(broker.Addrs(), "3.6.0", "stuck2", "stuck2"), h)
	defer r.Stop()
	deadline := time.Now().Add(30 * time.Second)
	for len(r.Bridge.Partitions()) != 2 {
		if time.Now().After(deadline) {
			t.Fatal("not claimed")
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err := broker.Produce("stuck2", "k1", "before"); err != nil {
		t.Fatal(err)
	}
	for handled.Load() != 1 {
		if time.Now().After(deadline) {
			t.Fatal("first record not handled")
		}
		time.Sleep(50 * time.Millisecond)
	}
	stalled, release := stallLagReads(broker.Cluster(), "stuck2")
	defer release()
	select {
	case <-stalled:
	case <-time.After(30 * time.Second):
		t.Fatal("no lag read reached the broker")
	}
	stalledAt := time.Now()
	time.Sleep(8 * time.Second) // the condition under test: held past the 6 s session timeout
	for i := range 10 {
		if err := broker.Produce("stuck2", fmt.Sprint("k", i), "after"); err != nil {
			t.Fatal(err)
		}
	}
	limit := time.Now().Add(20 * time.Second)
	for handled.Load() < 11 && time.Now().Before(limit) {
		time.Sleep(100 * time.Millisecond)
	}
	var unconfirmed int
	for _, p := range r.Bridge.Partitions() {
		if !p.Unconfirmed.IsZero() {
			unconfirmed++
		}
	}
	if n := handled.Load() - 1; n < 10 {
		t.Fatalf("with one lag read held by the broker for %v, %d of 10 new records were handled in 20 s; %d partitions unconfirmed", time.Since(stalledAt).Round(time.Second), n, unconfirmed)
	}
}
