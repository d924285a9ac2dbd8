package actors

import (
	"context"
	"testing"
	"time"

	"github.com/IBM/sarama"
)

func aheadRecords(n, size int) chan *sarama.ConsumerMessage {
	in := make(chan *sarama.ConsumerMessage, n)
	for i := range n {
		in <- &sarama.ConsumerMessage{Offset: int64(i), Value: make([]byte, size)}
	}
	return in
}

// waitAhead polls cond (the goroutine runs on its own) for at most 5 s.
func waitAhead(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); !cond(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

func (r *readAhead) isWaiting() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.waiting
}

// Every record comes out once, in order, and ended closes after the last
// once the input has closed.
func TestReadAheadKeepsOrderAndEndsWithItsInput(t *testing.T) {
	in := aheadRecords(5000, 3)
	close(in)
	r := newReadAhead(context.Background(), in, 64, 1<<20)
	for want := int64(0); want < 5000; want++ {
		select {
		case m := <-r.out:
			if m.Offset != want {
				t.Fatalf("offset %d came out where %d should", m.Offset, want)
			}
			r.took(m)
		case <-time.After(5 * time.Second):
			t.Fatalf("offset %d never came out", want)
		}
	}
	r.stop()
	if !r.isEnded() || r.queued() != 0 {
		t.Fatalf("after the input closed: ended %v, %d queued", r.isEnded(), r.queued())
	}
}

// Full (by records or by bytes), it takes nothing from its input until half
// of what it holds has been taken: a bridge taking a record at a time must
// not take its input a record at a time, or sarama never sets the partition
// aside.
func TestReadAheadWaitsForHalfBeforeTakingMore(t *testing.T) {
	for _, c := range []struct {
		name             string
		maxRecords, size int
		maxBytes         int64
		full, resumeAt   int // records held when full; held when it takes again
	}{
		{"records", 10, 1, 1 << 20, 10, 5},
		{"bytes", 100, 30, 100, 4, 1}, // 4 × 30 ≥ 100; 2 × 30 > 50
	} {
		t.Run(c.name, func(t *testing.T) {
			in := aheadRecords(100, c.size)
			ctx, cancel := context.WithCancel(context.Background())
			r := newReadAhead(ctx, in, c.maxRecords, c.maxBytes)
			waitAhead(t, "the read-ahead to fill", func() bool { return r.queued() == c.full && r.isWaiting() })
			left := len(in)
			for r.queued() > c.resumeAt+1 {
				r.took(<-r.out)
			}
			if !r.isWaiting() || len(in) != left {
				t.Fatalf("holding %d of %d: waiting %v, took %d more from its input", r.queued(), c.full, r.isWaiting(), left-len(in))
			}
			r.took(<-r.out)
			waitAhead(t, "the read-ahead to take again", func() bool { return len(in) < left })
			cancel()
			r.stop()
		})
	}
}

// Its goroutine returns when ctx is done, whether it waits for input or for
// room.
func TestReadAheadStopsWithItsContext(t *testing.T) {
	for _, full := range []bool{false, true} {
		in := aheadRecords(10, 1)
		max := 100
		if full {
			max = 5
		}
		ctx, cancel := context.WithCancel(context.Background())
		r := newReadAhead(ctx, in, max, 1<<20)
		waitAhead(t, "the read-ahead to stop taking", func() bool { return len(in) == 0 || r.isWaiting() })
		cancel()
		select {
		case <-r.done:
		case <-time.After(5 * time.Second):
			t.Fatalf("full %v: the goroutine did not return once its context was done", full)
		}
		if r.isEnded() {
			t.Fatalf("full %v: ended closed though its input never did", full)
		}
	}
}

// Asked where its consumer stands, the read-ahead first takes everything
// sarama's channel holds, waiting for room as the bridge takes records,
// and answers one past the last offset taken: the walk past an unreadable
// batch starts there, and must neither read again what sarama delivered
// nor skip what it still held. Before any record: -1.
func TestReadAheadPositionTakesWhatSaramaHolds(t *testing.T) {
	in := make(chan *sarama.ConsumerMessage, 8)
	r := newReadAhead(context.Background(), in, 4, 1<<20)
	if next, ok := r.position(context.Background()); !ok || next != -1 {
		t.Fatalf("position before any record: %d, %v; want -1, true", next, ok)
	}
	for o := int64(10); o < 17; o++ {
		in <- &sarama.ConsumerMessage{Offset: o}
	}
	answer := make(chan int64, 1)
	go func() {
		next, _ := r.position(context.Background())
		answer <- next
	}()
	var took []int64
	for {
		select {
		case m := <-r.out:
			r.took(m)
			took = append(took, m.Offset)
			continue
		case next := <-answer:
			for len(r.out) > 0 { // what it took and the bridge has not yet
				took = append(took, (<-r.out).Offset)
			}
			if next != 17 || len(took) != 7 {
				t.Fatalf("position %d once the read-ahead had given %v; want 17, after all of 10 to 16", next, took)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("the read-ahead gave %v, then nothing for 5 s", took)
		}
		break
	}
	close(in)
	r.stop()
	if _, ok := r.position(context.Background()); ok {
		t.Fatal("a read-ahead whose input closed answered a position")
	}
}
