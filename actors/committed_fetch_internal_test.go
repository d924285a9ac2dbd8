package actors

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/patchflow/patchflow/proving/kfakecontrol"
	"github.com/twmb/franz-go/pkg/kversion"
)

// committedFetchBroker is a kfake cluster (opts added) where group committed
// offset 5 on topic's partition 0, and a sarama client of it.
func committedFetchBroker(t *testing.T, readTimeout time.Duration, opts ...kfake.Opt) (*kfake.Cluster, sarama.Client) {
	t.Helper()
	c, err := kfake.NewCluster(append([]kfake.Opt{kfake.NumBrokers(1), kfake.SeedTopics(1, "t")}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	cfg := sarama.NewConfig()
	cfg.Version = sarama.V3_6_0_0
	cfg.Net.ReadTimeout = readTimeout
	client, err := sarama.NewClient(c.ListenAddrs(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = client.Close() })
	co, err := client.Coordinator("g")
	if err != nil {
		t.Fatal(err)
	}
	req := &sarama.OffsetCommitRequest{Version: 2, ConsumerGroup: "g", ConsumerGroupGeneration: -1}
	req.AddBlock("t", 0, 5, 0, "")
	resp, err := co.CommitOffset(req)
	if err == nil && resp.Errors["t"][0] != sarama.ErrNoError {
		err = resp.Errors["t"][0]
	}
	if err != nil {
		t.Fatal(err)
	}
	return c, client
}

func committedOffset(t *testing.T, resp *sarama.OffsetFetchResponse) int64 {
	t.Helper()
	b := resp.GetBlock("t", 0)
	if b == nil || b.Err != sarama.ErrNoError {
		t.Fatalf("block %+v", b)
	}
	return b.Offset
}

// The read asks for stable offsets: a coordinator that has just taken the
// group over answers a plain fetch from before its predecessor's last
// acknowledged commits (make failover-reads).
func TestFetchCommittedAsksForStableOffsets(t *testing.T) {
	c, client := committedFetchBroker(t, 5*time.Second)
	var stable, plain atomic.Int32
	c.ControlKey(int16(kmsg.OffsetFetch), func(r kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		if r.(*kmsg.OffsetFetchRequest).RequireStable {
			stable.Add(1)
		} else {
			plain.Add(1)
		}
		return nil, nil, false
	})
	resp, err := fetchCommitted(context.Background(), client, "g", map[string][]int32{"t": {0}})
	if err != nil {
		t.Fatal(err)
	}
	if got := committedOffset(t, resp); got != 5 {
		t.Fatalf("offset %d, want 5", got)
	}
	if stable.Load() != 1 || plain.Load() != 0 {
		t.Fatalf("%d stable and %d plain fetches, want one stable", stable.Load(), plain.Load())
	}
}

// A broker whose OffsetFetch stops below version 7 (Kafka before 2.5) has
// no room for the flag: the read asks it plainly rather than fail.
func TestFetchCommittedOnABrokerBeforeStableReads(t *testing.T) {
	_, client := committedFetchBroker(t, 5*time.Second, kfake.MaxVersions(kversion.V2_4_0()))
	resp, err := fetchCommitted(context.Background(), client, "g", map[string][]int32{"t": {0}})
	if err != nil {
		t.Fatal(err)
	}
	if got := committedOffset(t, resp); got != 5 {
		t.Fatalf("offset %d, want 5", got)
	}
}

// A coordinator that moved is asked again, within the attempts' bound.
func TestFetchCommittedFollowsAMovedCoordinator(t *testing.T) {
	for _, refusals := range []int32{fetchCommittedAttempts - 1, fetchCommittedAttempts} {
		c, client := committedFetchBroker(t, 5*time.Second)
		var asked atomic.Int32
		c.ControlKey(int16(kmsg.OffsetFetch), func(r kmsg.Request) (kmsg.Response, error, bool) {
			c.KeepControl()
			if asked.Add(1) > refusals {
				return nil, nil, false
			}
			req := r.(*kmsg.OffsetFetchRequest)
			resp := req.ResponseKind().(*kmsg.OffsetFetchResponse)
			g := kmsg.NewOffsetFetchResponseGroup()
			g.Group = "g"
			g.ErrorCode = int16(sarama.ErrNotCoordinatorForConsumer)
			resp.Groups = append(resp.Groups, g)
			return resp, nil, true
		})
		resp, err := fetchCommitted(context.Background(), client, "g", map[string][]int32{"t": {0}})
		switch {
		case refusals < fetchCommittedAttempts && err != nil:
			t.Fatalf("%d refusals: %v, want the offset on attempt %d", refusals, err, refusals+1)
		case refusals < fetchCommittedAttempts:
			if got := committedOffset(t, resp); got != 5 {
				t.Fatalf("offset %d, want 5", got)
			}
		case err == nil:
			t.Fatalf("%d refusals: an answer, want the last refusal", refusals)
		}
		if want := min(refusals+1, fetchCommittedAttempts); asked.Load() != want {
			t.Fatalf("%d refusals: %d fetches, want %d", refusals, asked.Load(), want)
		}
	}
}

// A read that timed out is not asked again (a held read would otherwise
// cost its caller twice the network timeout).
func TestFetchCommittedDoesNotRepeatAHeldRead(t *testing.T) {
	c, client := committedFetchBroker(t, 300*time.Millisecond)
	var asked atomic.Int32
	answered := make(chan struct{}, 8)
	sleeper := kfakecontrol.New(c)
	t.Cleanup(sleeper.Stop) // before the broker's close
	c.ControlKey(int16(kmsg.OffsetFetch), func(kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		asked.Add(1)
		sleeper.For(time.Hour) // until Stop
		answered <- struct{}{}
		return nil, nil, false
	})
	if _, err := fetchCommitted(context.Background(), client, "g", map[string][]int32{"t": {0}}); err == nil {
		t.Fatal("a held read answered")
	}
	if n := asked.Load(); n != 1 {
		t.Fatalf("%d fetches, want 1", n)
	}
	// The broker finishes the held request before it closes (kfake's close
	// does not wait for a slept request).
	sleeper.Stop()
	select {
	case <-answered:
	case <-time.After(10 * time.Second):
		t.Fatal("the broker did not finish the held request")
	}
	if err := client.RefreshMetadata(); err != nil {
		t.Fatal(err)
	}
}

// A moved coordinator is not asked again once the caller's ctx has ended:
// the claim or the watch that asked has gone.
func TestFetchCommittedStopsWithItsContext(t *testing.T) {
	c, client := committedFetchBroker(t, 5*time.Second)
	var asked atomic.Int32
	c.ControlKey(int16(kmsg.OffsetFetch), func(r kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		asked.Add(1)
		resp := r.(*kmsg.OffsetFetchRequest).ResponseKind().(*kmsg.OffsetFetchResponse)
		g := kmsg.NewOffsetFetchResponseGroup()
		g.Group = "g"
		g.ErrorCode = int16(sarama.ErrNotCoordinatorForConsumer)
		resp.Groups = append(resp.Groups, g)
		return resp, nil, true
	})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := fetchCommitted(ctx, client, "g", map[string][]int32{"t": {0}}); err == nil {
		t.Fatal("a refused read answered")
	}
	if n := asked.Load(); n != 1 {
		t.Fatalf("%d fetches after the ctx ended, want 1", n)
	}
}
