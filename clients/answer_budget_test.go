package clients_test

import (
	"context"
	"fmt"
	"net/http"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/patchflow/patchflow/clients"
	"github.com/patchflow/patchflow/messages"
)

// largeAnswer is a VMaaS answer of the realistic shape (one update a
// package, as the platform mock answers) whose need is more than half of
// budget and at most all of it: no two fit at once.
func largeAnswer(t *testing.T, budget int64) []byte {
	t.Helper()
	entry := func(i int) string {
		return fmt.Sprintf(`"pkg-%06d-0:4.2.0-9.el8.x86_64":{"available_updates":[{"package":"pkg-%06d-0:4.3.0-4.el8.x86_64","package_name":"pkg-%06d","evra":"0:4.3.0-4.el8.x86_64","erratum":"RHSA-2026:%05d","repository":"repo-%03d-rpms","basearch":"x86_64","releasever":"8"}]}`,
			i, i, i, i%100_000, i%150)
	}
	one := []byte(entry(0) + ",")
	perEntry := clients.VMaaSNeed(one, len(one))
	body := repeat(`{"update_list":{`, int(budget/perEntry)*15/16, entry, `},"repository_list":[],"releasever":"8","basearch":"x86_64","last_change":"2026-01-01T00:00:00+00:00"}`)
	if need := clients.VMaaSNeed(body, len(body)+1); need <= budget/2 || need > budget {
		t.Fatalf("an answer of %d bytes needs %d, not within (%d, %d]", len(body), need, budget/2, budget)
	}
	return body
}

// answering serves body to every call, announcing its length or not (the
// transport then reads it chunked, as it reads a gzip body it decodes).
// The first together calls are answered once they have all arrived, so
// that their answers are sent at once; later ones at once.
func answering(t *testing.T, body []byte, announced bool, together int) string {
	all := make(chan struct{})
	srv, _ := countingServer(t, func(w http.ResponseWriter, r *http.Request, n int) {
		if n == together {
			close(all)
		}
		select {
		case <-all:
		case <-r.Context().Done():
			return
		}
		w.Header().Set("Content-Type", "application/json")
		if announced {
			w.Header().Set("Content-Length", strconv.Itoa(len(body)))
		}
		for rest := body; len(rest) > 0; {
			n := min(len(rest), 256<<10)
			if _, err := w.Write(rest[:n]); err != nil {
				return // the client hung up
			}
			rest = rest[n:]
			if !announced {
				w.(http.Flusher).Flush()
			}
		}
	})
	return srv.URL
}

// heapSampler samples the heap's objects (live and not yet collected)
// every millisecond until stopped, and keeps the largest figure.
type heapSampler struct {
	stop chan struct{}
	done chan uint64
}

func sampleHeap() *heapSampler {
	h := &heapSampler{stop: make(chan struct{}), done: make(chan uint64)}
	go func() {
		s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
		peak := uint64(0)
		tick := time.NewTicker(time.Millisecond)
		defer tick.Stop()
		for {
			metrics.Read(s)
			peak = max(peak, s[0].Value.Uint64())
			select {
			case <-h.stop:
				h.done <- peak
				return
			case <-tick.C:
			}
		}
	}()
	return h
}

func (h *heapSampler) peak() uint64 {
	close(h.stop)
	return <-h.done
}

// VMaaS answering eight calls at once with large bodies (the attack: 60
// MiB each, under the old 64 MiB cap, took the heap to 1,839 MiB): the
// answers being read and decoded hold at most the answer budget, so the
// heap stays within it, the bodies the server holds and a few MiB; every
// call succeeds, or fails as congestion (transient: the pipeline retries
// it, and never counts it as the record's), and none waits for ever. A
// body over the cap on the wire (the 60 MiB ones) is refused, at once when
// announced and before it is held whole otherwise: VMaaS's failure,
// transient.
func TestEightLargeAnswersAtOnceStayWithinTheBudget(t *testing.T) {
	const budgetBytes = 64 << 20 // the default, ANSWERS_MB
	const calls = 8
	large := largeAnswer(t, budgetBytes)
	huge := []byte(`{"update_list":{"a":{"available_updates":[],"padding":"` + strings.Repeat("x", 60<<20) + `"}}}`)
	defer debug.SetGCPercent(debug.SetGCPercent(10)) // what is not live goes soon: the heap is mostly what is held
	for _, c := range []struct {
		name      string
		body      []byte
		announced bool
		tooLarge  bool
	}{
		{"large, announced", large, true, false},
		{"large, chunked", large, false, false},
		{"60 MiB, announced", huge, true, true},
		{"60 MiB, chunked", huge, false, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			base := answering(t, c.body, c.announced, calls)
			budget := clients.NewAnswerBudget(budgetBytes)
			client := newVMaaS(t, base, clients.VMaaSOptions{Answers: budget, Timeout: 30 * time.Second, MaxAttempts: 5})

			runtime.GC()
			before := sampleHeap()
			floor := before.peak()
			heap := sampleHeap()
			errs := make([]error, calls)
			var wg sync.WaitGroup
			for i := range calls {
				wg.Go(func() {
					resp, err := client.Updates(context.Background(), sampleRequest())
					if err == nil && len(resp.UpdateList) == 0 {
						err = fmt.Errorf("an answer without its updates")
					}
					errs[i] = err
				})
			}
			wg.Wait()
			peak := heap.peak() - floor

			served := 0
			for i, err := range errs {
				switch {
				case err == nil:
					served++
				case messages.ClassOf(err) != messages.ErrorClass_ERROR_CLASS_TRANSIENT:
					t.Errorf("call %d: %v, class %v; want transient", i, err, messages.ClassOf(err))
				case c.tooLarge != strings.Contains(err.Error(), "too large"):
					t.Errorf("call %d: %v", i, err)
				case !c.tooLarge && !messages.IsCongestion(err):
					t.Errorf("call %d failed, and not for want of room: %v", i, err)
				}
			}
			s := budget.Stats()
			t.Logf("%d of %d served; heap peak %d MiB over the %d MiB before; budget peak %d MiB, %d attempts congested",
				served, calls, peak>>20, floor>>20, s.Peak>>20, s.Congested)
			if c.tooLarge && served > 0 {
				t.Errorf("%d answers over the cap served", served)
			}
			if !c.tooLarge && served == 0 {
				t.Error("no answer served")
			}
			if s.InUse != 0 || s.Peak > budgetBytes {
				t.Errorf("the budget has %d bytes in use after the calls, and peaked at %d of %d", s.InUse, s.Peak, budgetBytes)
			}
			// The answers held at once (the body the server sends is in
			// the floor), and what the collector has yet to reclaim of
			// those read before: with GOGC at 10, a tenth of the heap.
			if bound := uint64(budgetBytes + 8<<20); peak > bound {
				t.Errorf("the heap grew by %d MiB answering %d calls at once, over the %d MiB bound", peak>>20, calls, bound>>20)
			}
		})
	}
}
