package consumer_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/patchflow/patchflow/consumer"
	"github.com/patchflow/patchflow/proving/embedded"
	"github.com/patchflow/patchflow/proving/offsets"
)

// batchRecorder is a BatchHandler that records its batches.
type batchRecorder struct {
	mu      sync.Mutex
	batches [][]string // key/value of each record, per batch
	single  int        // Handle calls
	seen    map[string][]string
	running map[string]bool
	overlap int
	failed  bool
}

func (h *batchRecorder) Handle(ctx context.Context, r *consumer.Record) error {
	h.mu.Lock()
	h.single++
	h.mu.Unlock()
	return h.HandleBatch(ctx, []*consumer.Record{r})[0]
}

func (h *batchRecorder) HandleBatch(_ context.Context, rs []*consumer.Record) []error {
	h.mu.Lock()
	var batch []string
	for _, r := range rs {
		k := string(r.Key)
		if h.running[k] {
			h.overlap++
		}
		h.running[k] = true
		batch = append(batch, k+"/"+string(r.Value))
	}
	h.batches = append(h.batches, batch)
	h.mu.Unlock()
	time.Sleep(2 * time.Millisecond) // a bulk write
	h.mu.Lock()
	defer h.mu.Unlock()
	errs := make([]error, len(rs))
	for i, r := range rs {
		k := string(r.Key)
		h.running[k] = false
		switch {
		case string(r.Value) == "poison":
			errs[i] = consumer.Permanent(errors.New("poison"))
		case k == "k2" && string(r.Value) == "3" && !h.failed:
			h.failed = true
			errs[i] = consumer.FailedIn("db", errors.New("deadlock")) // retried by itself
		default:
			h.seen[k] = append(h.seen[k], string(r.Value))
		}
	}
	return errs
}

// A BatchHandler gets several records of different keys per call, never
// two of one key at once; each record's outcome is its own: the poison one
// dead-lettered, the failed one retried, its batchmates finished; every
// key in order, all committed.
func TestBatchesHandOutcomesPerRecord(t *testing.T) {
	broker, err := embedded.Start(4, "bulk")
	if err != nil {
		t.Fatal(err)
	}
	defer broker.Close()
	const keys, perKey = 16, 20
	var ks, vs []string
	for i := range perKey {
		for k := range keys {
			v := fmt.Sprint(i)
			if k == 5 && i == 7 {
				v = "poison"
			}
			ks, vs = append(ks, fmt.Sprint("k", k)), append(vs, v)
		}
	}
	produce(t, broker.Addrs(), "bulk", ks, vs)
	h := &batchRecorder{seen: map[string][]string{}, running: map[string]bool{}}
	c, err := consumer.New(consumer.Config{Brokers: broker.Addrs(), Topic: "bulk", Group: "bulk", BatchSize: 8,
		BatchLinger: 20 * time.Millisecond, BackoffMin: 10 * time.Millisecond}, h)
	if err != nil {
		t.Fatal(err)
	}
	stop := run(c)
	waitFor(t, "every record finished", 30*time.Second, func() bool {
		s := c.Stats()
		return s.Succeeded == keys*perKey-1 && s.DeadLettered == 1
	})
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	p, err := offsets.Read(broker.Addrs(), "bulk", "bulk")
	if err != nil {
		t.Fatal(err)
	}
	for part, end := range p.Ends {
		if p.Committed[part] != end {
			t.Errorf("partition %d committed %d of %d", part, p.Committed[part], end)
		}
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.overlap != 0 {
		t.Errorf("%d records ran beside another of their key", h.overlap)
	}
	largest := 0
	for _, b := range h.batches {
		largest = max(largest, len(b))
		if len(b) > 8 {
			t.Errorf("a batch of %d records, over BatchSize 8: %v", len(b), b)
		}
		keysIn := map[string]bool{}
		for _, kv := range b {
			k := strings.SplitN(kv, "/", 2)[0]
			if keysIn[k] {
				t.Errorf("a batch holds two records of %s: %v", k, b)
			}
			keysIn[k] = true
		}
	}
	if largest < 2 {
		t.Errorf("no batch held more than %d record: batches never formed", largest)
	}
	for k := range keys {
		var want []string
		for i := range perKey {
			if !(k == 5 && i == 7) {
				want = append(want, fmt.Sprint(i))
			}
		}
		key := fmt.Sprint("k", k)
		if strings.Join(h.seen[key], ",") != strings.Join(want, ",") {
			t.Errorf("%s handled %v, want %v in order once each", key, h.seen[key], want)
		}
	}
	t.Logf("%d calls for %d records (largest batch %d, %d single)", len(h.batches), keys*perKey+1, largest, h.single)
}
