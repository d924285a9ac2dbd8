package ordering_test

import (
	"slices"
	"testing"

	"pgregory.net/rapid"

	"github.com/patchflow/patchflow/actors/ordering"
)

// TestGateProperties admits records with random keys, finishes running ones
// in random order, and checks the mode's guarantee at every step: which
// records run at once, and in what order records of one key start. The
// "colliding" case hashes every key alike: a collision may only make keys
// wait for each other, never break a guarantee.
func TestGateProperties(t *testing.T) {
	type gateCase struct {
		name string
		mode ordering.Mode
		new  func(ordering.Mode) *ordering.Gate
	}
	cases := []gateCase{{"colliding-key", ordering.ByKey, ordering.NewCollidingGate}}
	for _, mode := range []ordering.Mode{ordering.ByKey, ordering.ByPartition, ordering.Unordered} {
		cases = append(cases, gateCase{mode.String(), mode, ordering.NewGate})
	}
	for _, c := range cases {
		mode := c.mode
		t.Run(c.name, func(t *testing.T) {
			rapid.Check(t, func(t *rapid.T) {
				g := c.new(mode)
				keyOf := map[int64]string{}
				var running []int64
				started := map[string][]int64{} // key -> offsets in start order
				admitted := map[string][]int64{}
				var next int64
				var startOrder, admitOrder []int64
				heldModel := 0

				start := func(o int64) {
					k := keyOf[o]
					running = append(running, o)
					startOrder = append(startOrder, o)
					started[k] = append(started[k], o)
					for _, r := range running[:len(running)-1] {
						switch mode {
						case ordering.ByPartition:
							t.Fatalf("offset %d started while %d runs", o, r)
						case ordering.ByKey:
							if k != "" && keyOf[r] == k {
								t.Fatalf("key %q: offset %d started while %d runs", k, o, r)
							}
						}
					}
				}

				steps := rapid.IntRange(1, 200).Draw(t, "steps")
				for s := 0; s < steps; s++ {
					if len(running) == 0 || rapid.Bool().Draw(t, "admit") {
						k := rapid.SampledFrom([]string{"", "a", "b", "c"}).Draw(t, "key")
						next += rapid.Int64Range(1, 3).Draw(t, "gap")
						keyOf[next] = k
						admitted[k] = append(admitted[k], next)
						admitOrder = append(admitOrder, next)
						if g.Admit([]byte(k), next) {
							start(next)
						} else {
							heldModel++
							if mode == ordering.Unordered {
								t.Fatalf("unordered gate held offset %d", next)
							}
						}
					} else {
						i := rapid.IntRange(0, len(running)-1).Draw(t, "finish")
						o := running[i]
						running = slices.Delete(running, i, i+1)
						if n, ok := g.Release([]byte(keyOf[o])); ok {
							heldModel--
							start(n)
						}
					}
					if g.Held() != heldModel {
						t.Fatalf("Held = %d, want %d", g.Held(), heldModel)
					}
					// Waiting names the records held behind a key, in the
					// order they will start: those of the key (of every key,
					// when keys collide or in partition order) admitted and
					// not started.
					startedSet := map[int64]bool{}
					for _, o := range startOrder {
						startedSet[o] = true
					}
					for _, k := range []string{"a", "b", "c"} {
						var want, got []int64
						for _, o := range admitOrder {
							if startedSet[o] || mode == ordering.Unordered {
								continue
							}
							if mode == ordering.ByKey && c.name != "colliding-key" && keyOf[o] != k {
								continue
							}
							want = append(want, o)
						}
						g.Waiting([]byte(k), func(o int64) { got = append(got, o) })
						if !slices.Equal(got, want) {
							t.Fatalf("Waiting(%q) = %v, want %v", k, got, want)
						}
					}
					// No deadlock: if nothing runs, nothing may be held.
					if len(running) == 0 && g.Held() != 0 {
						t.Fatalf("%d records held with nothing running", g.Held())
					}
				}
				if mode == ordering.Unordered {
					return
				}
				for k, offs := range started {
					if mode == ordering.ByKey && k == "" {
						continue
					}
					want := admitted[k][:len(offs)]
					if !slices.Equal(offs, want) {
						t.Fatalf("key %q started %v, admitted %v", k, offs, admitted[k])
					}
				}
				if mode == ordering.ByPartition && !slices.Equal(startOrder, admitOrder[:len(startOrder)]) {
					t.Fatalf("partition started %v, admitted %v", startOrder, admitOrder)
				}
			})
		})
	}
}

// A queue that never empties keeps room for the records waiting in it, not
// for every record that ever passed through it: in partition order under a
// backlog, or behind a key that always has records waiting, the queue
// kept each popped offset's slot until it emptied, and grew by 8 bytes per
// record for as long as the claim lasted (here 110,592 slots for 3 waiting
// after 100,000 records).
func TestBusyQueueKeepsRoomOnlyForWaitingRecords(t *testing.T) {
	for _, mode := range []ordering.Mode{ordering.ByKey, ordering.ByPartition} {
		t.Run(mode.String(), func(t *testing.T) {
			g := ordering.NewGate(mode)
			key := []byte("hot")
			const waiting = 3
			var next int64
			for range waiting + 1 {
				g.Admit(key, next)
				next++
			}
			for range 100_000 {
				if _, ok := g.Release(key); !ok {
					t.Fatal("no record waiting behind the running one")
				}
				g.Admit(key, next)
				next++
			}
			if g.Held() != waiting {
				t.Fatalf("held %d, want %d", g.Held(), waiting)
			}
			if slots := ordering.Slots(g); slots > 4*waiting {
				t.Fatalf("the queues have room for %d offsets after 100,000 records, %d waiting", slots, waiting)
			}
		})
	}
}

func TestParseMode(t *testing.T) {
	for _, m := range []ordering.Mode{ordering.ByKey, ordering.ByPartition, ordering.Unordered} {
		got, err := ordering.ParseMode(m.String())
		if err != nil || got != m {
			t.Fatalf("ParseMode(%q) = %v, %v", m.String(), got, err)
		}
	}
	if _, err := ordering.ParseMode("fifo"); err == nil {
		t.Fatal("ParseMode accepted an unknown mode")
	}
}

func BenchmarkGateByKey(b *testing.B) {
	g := ordering.NewGate(ordering.ByKey)
	keys := make([][]byte, 64)
	for i := range keys {
		keys[i] = []byte{byte(i), 'k'}
	}
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		k := keys[i%len(keys)]
		if g.Admit(k, int64(i)) {
			g.Release(k)
		}
	}
}
