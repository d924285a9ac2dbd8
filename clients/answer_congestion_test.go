package clients_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/patchflow/patchflow/clients"
	"github.com/patchflow/patchflow/messages"
)

// holdBudget starts a VMaaS call whose answer takes the whole of budget
// and stalls mid-body until the returned function is called; that
// function then waits for the call, which must succeed, and checks that
// the budget is whole again.
func holdBudget(t *testing.T, budget *clients.AnswerBudget) func() {
	t.Helper()
	stalled := make(chan struct{})
	srv, _ := countingServer(t, func(w http.ResponseWriter, r *http.Request, _ int) {
		w.Header().Set("Content-Length", strconv.Itoa(len(sampleBody)))
		_, _ = io.WriteString(w, sampleBody[:10])
		w.(http.Flusher).Flush()
		select {
		case <-stalled:
		case <-r.Context().Done():
			return
		}
		_, _ = io.WriteString(w, sampleBody[10:])
	})
	holder := newVMaaS(t, srv.URL, clients.VMaaSOptions{Answers: budget, Timeout: time.Minute})
	done := make(chan error, 1)
	go func() {
		_, err := holder.Updates(context.Background(), sampleRequest())
		done <- err
	}()
	// Until the stalled answer holds the budget (its length is known: it
	// reserves before it reads, then stalls).
	for budget.Stats().InUse < budget.Stats().Size {
		time.Sleep(time.Millisecond)
	}
	return func() {
		t.Helper()
		close(stalled)
		if err := <-done; err != nil {
			t.Errorf("the call holding the budget: %v", err)
		}
		if n := budget.Stats().InUse; n != 0 {
			t.Errorf("%d bytes of the budget still held", n)
		}
	}
}

// A call that cannot get room for its answer before its attempts end
// fails as congestion: transient and messages.Congested, named after the
// dependency (the pipeline then retries the record and never counts the
// failure as the record's own, actors/blame), and each attempt is
// reported as served, VMaaS having answered. When the caller's context
// ends the wait, the failure is the context's, marked congestion too, and
// the attempt is not reported. The answer holding the budget is not
// disturbed.
func TestNoRoomForTheAnswerIsCongestion(t *testing.T) {
	budget := clients.NewAnswerBudget(1 << 10) // less than the sample's answer needs: it holds it all
	release := holdBudget(t, budget)
	defer release()

	srv, calls := countingServer(t, func(w http.ResponseWriter, r *http.Request, _ int) { writeSample(w) })
	for _, c := range []struct {
		name     string
		timeout  time.Duration
		deadline time.Duration
		attempts int
		reported int
	}{
		{"the attempts' deadlines", 500 * time.Millisecond, time.Minute, 2, 2},
		{"the caller's deadline", time.Minute, 500 * time.Millisecond, 2, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			client := newVMaaS(t, srv.URL, clients.VMaaSOptions{Answers: budget, Timeout: c.timeout, MaxAttempts: c.attempts})
			var mu sync.Mutex
			var reported []error
			client.ReportTo(func(_ context.Context, _ time.Duration, err error) {
				mu.Lock()
				defer mu.Unlock()
				reported = append(reported, err)
			})
			ctx, cancel := context.WithTimeout(context.Background(), c.deadline)
			defer cancel()
			before, congested := calls(), budget.Stats().Congested
			_, err := client.Updates(ctx, sampleRequest())
			wantClass(t, err, messages.ErrorClass_ERROR_CLASS_TRANSIENT)
			if !messages.IsCongestion(err) || messages.DependencyOf(err) != clients.DependencyVMaaS {
				t.Errorf("err = %v: congestion %v, dependency %q; want congestion in vmaas", err, messages.IsCongestion(err), messages.DependencyOf(err))
			}
			if c.reported == 0 && !errors.Is(err, context.DeadlineExceeded) {
				t.Errorf("err = %v, want the caller's deadline", err)
			}
			mu.Lock()
			defer mu.Unlock()
			if len(reported) != c.reported {
				t.Errorf("%d attempts reported, want %d", len(reported), c.reported)
			}
			for i, r := range reported {
				if r != nil {
					t.Errorf("attempt %d reported as %v, want served", i+1, r)
				}
			}
			if n := calls() - before; n < 1 || n > c.attempts {
				t.Errorf("%d requests, want 1 to %d", n, c.attempts)
			}
			if budget.Stats().Congested == congested {
				t.Error("no congested attempt counted")
			}
		})
	}
}

// The inventory's answers are charged to the budget too, given back once
// the profile is copied out, and bounded on the wire at 4 MiB: a larger
// body is the inventory's failure, transient, whatever the budget.
func TestInventoryAnswersAreCharged(t *testing.T) {
	budget := clients.NewAnswerBudget(64 << 20)
	for _, c := range []struct {
		name string
		body string
		fail bool
	}{
		{"a profile", profilePage(hostID, sampleProfile), false},
		{"over 4 MiB", profilePage(hostID, `{"arch":"`+strings.Repeat("x", 4<<20)+`"}`), true},
	} {
		srv, _ := countingServer(t, func(w http.ResponseWriter, r *http.Request, _ int) { _, _ = io.WriteString(w, c.body) })
		client := newInventory(t, srv.URL, clients.InventoryOptions{Answers: budget})
		_, err := client.SystemProfile(context.Background(), hostID)
		if c.fail {
			wantClass(t, err, messages.ErrorClass_ERROR_CLASS_TRANSIENT)
		} else if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		s := budget.Stats()
		if need := clients.InventoryNeed([]byte(c.body), len(c.body)+1); !c.fail && s.Peak < need {
			t.Errorf("%s: the budget peaked at %d, below the answer's need, %d", c.name, s.Peak, need)
		}
		if s.InUse != 0 {
			t.Errorf("%s: %d bytes still held", c.name, s.InUse)
		}
	}
}
