package actors_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/patchflow/patchflow/actors"
	"github.com/patchflow/patchflow/actors/ordering"
	"github.com/patchflow/patchflow/messages"
)

// Each record's child used to take a new id from protoactor's registry
// (Spawn), and the registry spreads ids over 32,768 Go maps that keep their
// storage once an id has landed in them: a listener's heap grew for as long
// as its records reached maps no id had reached before (about 5 MB in its
// first 36,000 records). Children must reuse the names of those that have
// stopped, so a partition mints about as many ids as it ever ran children
// at once, not one per record.
func TestChildrenReuseTheNamesOfStoppedOnes(t *testing.T) {
	const records, burst = 2000, 8
	var handled sync.Map
	h := actors.HandlerFunc(func(_ context.Context, r *messages.Record) error {
		handled.Store(r.GetOffset(), true)
		return nil
	})
	dlq := newScriptedDeadLetters(0, false)
	f := buildPartitionFixture(t, testSettings(ordering.Unordered), h,
		func(o int64) bool { _, ok := handled.Load(o); return ok }, dlq, dlq.isWritten)
	minted := func() uint64 { return atomic.LoadUint64(&f.system.ProcessRegistry.SequenceID) }
	before := minted()
	for off := int64(0); off < records; off += burst {
		for i := range int64(burst) {
			f.admit(off+i, fmt.Sprintf("k%d", off+i))
		}
		for got := int64(-1); got < off+burst; {
			got = f.marker.nextMark(t)
		}
	}
	if n := minted() - before; n > 4*burst {
		t.Fatalf("%d records in bursts of %d minted %d actor ids; want at most %d (children's names reused)", records, burst, n, 4*burst)
	}
}

// nextMark returns the offset of the next mark, failing the test after 3 s.
func (m *checkingMarker) nextMark(t *testing.T) int64 {
	t.Helper()
	select {
	case got := <-m.marks:
		return got.offset
	case <-time.After(3 * time.Second):
		t.Fatal("no mark within 3s")
		return 0
	}
}
