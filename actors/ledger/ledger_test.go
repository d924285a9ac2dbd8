package ledger_test

import (
	"errors"
	"testing"

	"pgregory.net/rapid"

	"github.com/patchflow/patchflow/actors/ledger"
)

// model is the obviously-correct ledger: a set of admitted offsets and a set
// of finished ones, with the watermark computed by scanning.
type model struct {
	admitted []int64
	finished map[int64]bool
}

func (m *model) watermark() (int64, bool) {
	if len(m.admitted) == 0 {
		return 0, false
	}
	for _, o := range m.admitted {
		if !m.finished[o] {
			return o, true
		}
	}
	return m.admitted[len(m.admitted)-1] + 1, true
}

func (m *model) unfinished() []int64 {
	var out []int64
	for _, o := range m.admitted {
		if !m.finished[o] {
			out = append(out, o)
		}
	}
	return out
}

// TestLedgerMatchesModel drives the ledger with random admissions (with gaps)
// and finishes in random order and checks every step against the model.
func TestLedgerMatchesModel(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		capacity := rapid.IntRange(1, 4).Draw(t, "capacity")
		l := ledger.New(capacity)
		m := &model{finished: map[int64]bool{}}
		next := rapid.Int64Range(0, 1<<40).Draw(t, "start")
		var prevWM int64 = -1
		peak := 0 // most offsets in flight at once

		steps := rapid.IntRange(1, 300).Draw(t, "steps")
		for s := 0; s < steps; s++ {
			open := m.unfinished()
			if len(open) == 0 || rapid.Bool().Draw(t, "admit") {
				next += rapid.Int64Range(1, 5).Draw(t, "gap") // gaps of up to 4 offsets
				if err := l.Admit(next); err != nil {
					t.Fatalf("admit %d: %v", next, err)
				}
				m.admitted = append(m.admitted, next)
			} else {
				o := rapid.SampledFrom(open).Draw(t, "finish")
				wantAdvance := o == open[0]
				advanced, err := l.Finish(o)
				if err != nil {
					t.Fatalf("finish %d: %v", o, err)
				}
				m.finished[o] = true
				if advanced != wantAdvance {
					t.Fatalf("finish %d: advanced=%v, want %v", o, advanced, wantAdvance)
				}
			}

			wm, ok := l.Watermark()
			mwm, mok := m.watermark()
			if ok != mok || wm != mwm {
				t.Fatalf("watermark = %d,%v; model says %d,%v", wm, ok, mwm, mok)
			}
			if ok && wm < prevWM {
				t.Fatalf("watermark moved backwards: %d -> %d", prevWM, wm)
			}
			for _, o := range m.unfinished() {
				if wm > o {
					t.Fatalf("watermark %d passed unfinished offset %d", wm, o)
				}
			}
			if got, want := l.InFlight(), len(m.unfinished()); got != want {
				t.Fatalf("InFlight = %d, want %d", got, want)
			}
			peak = max(peak, l.InFlight())
			if bound := max(capacity, 4*peak); l.Slots() > bound {
				t.Fatalf("ledger holds %d slots with at most %d in flight: bound %d", l.Slots(), peak, bound)
			}
			if ok {
				prevWM = wm
			}
		}
	})
}

// TestLedgerRejectsMisuse checks the errors that protect the caller from
// counting a record twice or admitting a redelivery.
func TestLedgerRejectsMisuse(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		l := ledger.New(2)
		base := rapid.Int64Range(0, 1000).Draw(t, "base")
		for i := int64(0); i < 5; i++ {
			if err := l.Admit(base + 2*i); err != nil {
				t.Fatal(err)
			}
		}
		back := base + 2*rapid.Int64Range(0, 4).Draw(t, "back")
		if err := l.Admit(back); !errors.Is(err, ledger.ErrOutOfOrder) {
			t.Fatalf("Admit(%d) after %d = %v, want ErrOutOfOrder", back, base+8, err)
		}
		if _, err := l.Finish(base + 1); !errors.Is(err, ledger.ErrUnknownOffset) {
			t.Fatalf("Finish of a gap = %v, want ErrUnknownOffset", err)
		}
		target := base + 2*rapid.Int64Range(1, 4).Draw(t, "target")
		if _, err := l.Finish(target); err != nil {
			t.Fatal(err)
		}
		if _, err := l.Finish(target); !errors.Is(err, ledger.ErrAlreadyFinished) {
			t.Fatalf("second Finish = %v, want ErrAlreadyFinished", err)
		}
		if _, err := l.Finish(base); err != nil {
			t.Fatal(err)
		}
		if _, err := l.Finish(base); !errors.Is(err, ledger.ErrUnknownOffset) {
			t.Fatalf("Finish below the watermark = %v, want ErrUnknownOffset", err)
		}
	})
}

// TestLedgerMemoryIsBoundedByInFlight pins one record while a million
// after it finish, as when one slow record holds its partition: the ledger
// must not keep the finished ones (the first ledger held a 1,048,576-slot
// ring here).
func TestLedgerMemoryIsBoundedByInFlight(t *testing.T) {
	const inFlight = 64
	l := ledger.New(inFlight)
	if err := l.Admit(0); err != nil { // pinned: never finished
		t.Fatal(err)
	}
	next := int64(1)
	for ; next < inFlight; next++ {
		if err := l.Admit(next); err != nil {
			t.Fatal(err)
		}
	}
	for done := int64(1); done <= 1_000_000; done++ {
		if _, err := l.Finish(done); err != nil {
			t.Fatalf("finish %d: %v", done, err)
		}
		if err := l.Admit(next); err != nil {
			t.Fatal(err)
		}
		next++
	}
	if wm, _ := l.Watermark(); wm != 0 {
		t.Fatalf("watermark %d passed the pinned record 0", wm)
	}
	if got := l.InFlight(); got != inFlight {
		t.Fatalf("InFlight = %d, want %d", got, inFlight)
	}
	if l.Slots() > 4*inFlight {
		t.Fatalf("ledger holds %d slots for %d records in flight behind a pinned one", l.Slots(), inFlight)
	}
}

func TestWatermarkBeforeAdmit(t *testing.T) {
	l := ledger.New(4)
	if _, ok := l.Watermark(); ok {
		t.Fatal("watermark reported before any admission")
	}
}

// BenchmarkLedger measures ns per record with inFlight offsets outstanding,
// finished in a scrambled order, the steady state of a busy partition.
func BenchmarkLedger(b *testing.B) {
	for _, inFlight := range []int{1, 64, 1024} {
		b.Run(itoa(inFlight), func(b *testing.B) {
			l := ledger.New(inFlight)
			var next int64
			window := make([]int64, 0, inFlight)
			for ; next < int64(inFlight); next++ {
				_ = l.Admit(next)
				window = append(window, next)
			}
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				// finish a pseudo-random in-flight offset, admit the next one
				j := int(uint32(i)*2654435761) % len(window)
				if _, err := l.Finish(window[j]); err != nil {
					b.Fatal(err)
				}
				_ = l.Admit(next)
				window[j] = next
				next++
			}
		})
	}
}

func itoa(n int) string {
	if n == 0 {
		return "0"
	}
	var buf [20]byte
	i := len(buf)
	for n > 0 {
		i--
		buf[i] = byte('0' + n%10)
		n /= 10
	}
	return "inflight=" + string(buf[i:])
}
