package kfakecontrol_test

import (
	"sync"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/goleak"

	"github.com/patchflow/patchflow/proving/kfakecontrol"
)

// A control asleep while the test ends: its wake-up and the cluster's
// close race as they do in a test's cleanup. Through a Sleeper stopped
// before the close, no run loop is left behind. (Woken by closing a channel
// right before Close instead, kfake's run loop was stranded in about one
// round of 50 to 400: goleak found it waiting for the control lock in
// beginSleptControl or continueSleptControl.)
func TestStopBeforeCloseLeavesNoRunLoopBehind(t *testing.T) {
	ignore := []goleak.Option{goleak.IgnoreCurrent(), goleak.IgnoreTopFunction("github.com/rcrowley/go-metrics.(*meterArbiter).tick")}
	for round := range 400 {
		c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "t"))
		if err != nil {
			t.Fatal(err)
		}
		s := kfakecontrol.New(c)
		asleep := make(chan struct{})
		var once sync.Once
		c.ControlKey(int16(kmsg.Metadata), func(kmsg.Request) (kmsg.Response, error, bool) {
			c.KeepControl()
			once.Do(func() { close(asleep) })
			s.For(time.Hour) // ends at Stop
			return nil, nil, false
		})
		cfg := sarama.NewConfig()
		cfg.Net.ReadTimeout = 2 * time.Second
		b := sarama.NewBroker(c.ListenAddrs()[0])
		if err := b.Open(cfg); err != nil {
			t.Fatal(err)
		}
		asked := make(chan struct{})
		go func() {
			defer close(asked)
			_, _ = b.GetMetadata(&sarama.MetadataRequest{Topics: []string{"t"}})
		}()
		select {
		case <-asleep:
		case <-time.After(10 * time.Second):
			t.Fatalf("round %d: the metadata request never reached its control", round)
		}
		s.Stop()
		c.Close()
		<-asked // answered, or its connection closed: ends within ReadTimeout
		_ = b.Close()
		if err := goleak.Find(ignore...); err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
	}
}

// A control that asks to sleep after Stop runs on at once.
func TestNoSleepAfterStop(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	s := kfakecontrol.New(c)
	s.Stop()
	s.Stop() // idempotent
	slept := make(chan time.Duration, 1)
	c.ControlKey(int16(kmsg.Metadata), func(kmsg.Request) (kmsg.Response, error, bool) {
		start := time.Now()
		s.For(time.Hour)
		slept <- time.Since(start)
		return nil, nil, false
	})
	b := sarama.NewBroker(c.ListenAddrs()[0])
	if err := b.Open(sarama.NewConfig()); err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if _, err := b.GetMetadata(&sarama.MetadataRequest{}); err != nil {
		t.Fatal(err)
	}
	if d := <-slept; d > time.Second {
		t.Fatalf("a control slept %v after Stop", d)
	}
}
