package listener_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/patchflow/patchflow/actors"
	"github.com/patchflow/patchflow/messages"
	"github.com/patchflow/patchflow/persistence"
	"github.com/patchflow/patchflow/persistence/pgtest"
)

// modelPublisher is the broker: it appends what it acknowledges.
type modelPublisher struct {
	mu  sync.Mutex
	log []messages.OutboxMessage
	// ack is how many of the next batch it acknowledges; the rest it
	// refuses (-1: all).
	ack int
}

func (p *modelPublisher) Publish(msgs []messages.OutboxMessage) []error {
	p.mu.Lock()
	defer p.mu.Unlock()
	errs := make([]error, len(msgs))
	for i, m := range msgs {
		if p.ack >= 0 && i >= p.ack {
			errs[i] = fmt.Errorf("refused")
			continue
		}
		p.log = append(p.log, m)
	}
	return errs
}

// crashingOutbox is the store with a relay that may die between publishing
// and deleting: its finish then ends the claim without deleting.
type crashingOutbox struct {
	*persistence.Outbox
	crash bool
}

func (o *crashingOutbox) Claim(ctx context.Context, max int, exclude []messages.OutboxKind) ([]messages.OutboxMessage, func(context.Context, messages.OutboxOutcome) error, error) {
	msgs, finish, err := o.Outbox.Claim(ctx, max, exclude)
	if err != nil || !o.crash {
		return msgs, finish, err
	}
	return msgs, func(ctx context.Context, _ messages.OutboxOutcome) error {
		_ = finish(ctx, messages.OutboxOutcome{}) // the process died: its transaction ends with its connection
		return fmt.Errorf("crashed before deleting")
	}, nil
}

// failCommits installs a deferred trigger that fails the commit of any
// transaction that wrote to the outbox while outbox_fail holds a row: a
// failure after the outbox write and before the commit.
const failCommits = `
	CREATE TABLE outbox_fail (on_ BOOLEAN);
	CREATE FUNCTION outbox_fail() RETURNS trigger LANGUAGE plpgsql AS $$
	BEGIN
		IF EXISTS (SELECT 1 FROM outbox_fail) THEN RAISE EXCEPTION 'injected failure before commit'; END IF;
		RETURN NULL;
	END $$;
	CREATE CONSTRAINT TRIGGER outbox_fail AFTER INSERT OR UPDATE ON outbox DEFERRABLE INITIALLY DEFERRED
		FOR EACH ROW EXECUTE FUNCTION outbox_fail();`

// The outbox and the relay as a state machine against PostgreSQL: random
// evaluations of three hosts (some failing after the outbox write, before
// commit) and relay runs (some refusing part of a batch, some dying between
// publish and delete). After a last clean run:
//   - every committed message was published (each upload's statuses, each
//     host's last remediation, each (org, advisory) notified, once);
//   - nothing was published for a rolled-back transaction;
//   - each host's messages' last copies come in commit order;
//   - each host's last remediation message is its last committed state;
//   - the outbox is empty.
func TestOutboxAndRelayModel(t *testing.T) {
	ctx := context.Background()
	url := pgtest.URL(t)
	store, err := persistence.Open(ctx, url, persistence.DefaultPoolSettings())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := store.DB().Exec(failCommits); err != nil {
		t.Fatal(err)
	}
	store.Close()
	hosts := []string{"8a3f1c2e-0000-4000-8000-000000000001", "8a3f1c2e-0000-4000-8000-000000000002", "8a3f1c2e-0000-4000-8000-000000000003"}
	advisories := []string{"RHSA-2026:1", "RHSA-2026:2", "RHBA-2026:3", "RHEA-2026:4"}
	// updates stored by reference, and one named without its epoch, which
	// makes its state written whole
	updatePool := []string{"bash-0:5.1-2.el9.x86_64", "kernel-0:5.14.0-70.el9.x86_64", "zlib-0:1.2.11-40.el9.x86_64", "curl-7.76.1-29.el9.x86_64"}
	rapid.Check(t, func(rt *rapid.T) {
		// A store of its own each time: its caches know the rows the
		// truncation removes.
		store, err := persistence.Open(ctx, url, persistence.DefaultPoolSettings())
		if err != nil {
			rt.Fatal(err)
		}
		defer store.Close()
		if _, err := store.DB().Exec(`TRUNCATE outbox, remediation_state, advisory_notified, system, deleted_system, outbox_fail`); err != nil {
			rt.Fatal(err)
		}
		pub := &modelPublisher{}
		var (
			request   int
			committed []string            // payload statuses committed, in commit order
			rolled    = map[string]bool{} // payload statuses of rolled-back writes
			lastState = map[string]string{}
			states    = map[string]bool{} // every remediation committed
			notified  = map[string]bool{} // every advisory a committed evaluation made installable
			clock     = time.Date(2026, 12, 5, 0, 0, 0, 0, time.UTC)
		)
		rt.Repeat(map[string]func(*rapid.T){
			"evaluate": func(rt *rapid.T) {
				host := rapid.SampledFrom(hosts).Draw(rt, "host")
				picked := rapid.SliceOfDistinct(rapid.SampledFrom(advisories), rapid.ID[string]).Draw(rt, "advisories")
				updates := rapid.SliceOfDistinct(rapid.SampledFrom(updatePool), rapid.ID[string]).Draw(rt, "updates")
				fail := rapid.Float64Range(0, 1).Draw(rt, "p") < 0.25
				slices.Sort(picked)
				var e persistence.Evaluation
				for i, a := range picked {
					st := persistence.Installable
					if i%2 == 1 {
						st = persistence.Applicable
					}
					e.Advisories = append(e.Advisories, persistence.AdvisoryResult{Name: a, Type: "security", Status: st})
				}
				request++
				clock = clock.Add(time.Second)
				rem := &persistence.Remediation{}
				issues := []string{}
				for _, a := range picked {
					issues = append(issues, persistence.RemediationIssuePrefix+a)
				}
				for _, u := range updates {
					issues = append(issues, persistence.RemediationIssuePrefix+u)
					if name, evra, ok := strings.Cut(u, "-0:"); ok {
						rem.Updates = append(rem.Updates, persistence.Package{Name: name, EVRA: "0:" + evra})
					} else {
						rem.Verbatim = append(rem.Verbatim, u)
					}
				}
				slices.Sort(issues)
				b, _ := json.Marshal(persistence.RemediationMessage{HostID: host, Issues: issues})
				state := string(b)
				received := fmt.Sprintf(`{"host":%q,"request":%d,"status":"received"}`, host, request)
				success := fmt.Sprintf(`{"host":%q,"request":%d,"status":"success"}`, host, request)
				e.Effects = &persistence.Effects{OrgID: "org-1", InventoryID: host, Remediation: rem,
					Notify:        &persistence.NotifyContext{InventoryID: host},
					PayloadStatus: []persistence.Message{{EventID: uuidOf(request, 1), Value: []byte(received)}, {EventID: uuidOf(request, 2), Value: []byte(success)}}}
				if fail {
					if _, err := store.DB().Exec(`INSERT INTO outbox_fail VALUES (true)`); err != nil {
						rt.Fatal(err)
					}
					defer store.DB().Exec(`DELETE FROM outbox_fail`) //nolint:errcheck // the next step's Exec reports trouble
				}
				u := persistence.SystemUpload{OrgID: "org-1", InventoryID: host, EventTime: clock, LastUpload: clock, Reporter: "puptoo",
					Arch: "x86_64", Packages: []persistence.Package{{Name: "bash", EVRA: "0:5.1-1.el9.x86_64"}}}
				check, err := store.CheckUpload(ctx, u)
				if err != nil {
					rt.Fatal(err)
				}
				res, err := store.StoreEvaluatedSystem(ctx, u, e, check)
				if fail {
					if err == nil {
						rt.Fatalf("the injected failure did not fail the write")
					}
					rolled[received], rolled[success] = true, true
					return
				}
				if err != nil || !res.Applied {
					rt.Fatalf("store: %+v %v", res, err)
				}
				committed = append(committed, received, success)
				lastState[host] = state
				states[state] = true
				for _, a := range e.Advisories {
					if a.Status == persistence.Installable {
						notified[a.Name] = true
					}
				}
			},
			"relay": func(rt *rapid.T) {
				pub.ack = rapid.IntRange(-1, 3).Draw(rt, "ack")
				o, err := store.OpenOutbox()
				if err != nil {
					rt.Fatal(err)
				}
				defer o.Close()
				runRelay(rt, &crashingOutbox{Outbox: o, crash: rapid.Bool().Draw(rt, "crash")}, pub, rapid.IntRange(1, 5).Draw(rt, "batch"))
			},
		})
		pub.ack = -1
		o, err := store.OpenOutbox()
		if err != nil {
			rt.Fatal(err)
		}
		defer o.Close()
		runRelay(rt, o, pub, 1000)
		checkModel(rt, store, pub.log, committed, rolled, lastState, states)
		checkNotifications(rt, pub.log, notified)
	})
}

func uuidOf(request, n int) string {
	return fmt.Sprintf("00000000-0000-4000-8000-%06d%06d", request, n)
}

// runRelay runs a relay until it stops finding work (or crashes), then stops it.
func runRelay(rt *rapid.T, store actors.OutboxStore, pub actors.OutboxPublisher, batch int) {
	system := actors.NewActorSystem(slog.New(slog.DiscardHandler))
	defer system.Shutdown()
	r, err := actors.StartRelay(system, actors.RelayConfig{Store: store, Publisher: pub, Interval: time.Hour, Batch: batch, KindBackoff: time.Millisecond})
	if err != nil {
		rt.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := r.Stop(ctx); err != nil && batch == 1000 {
		rt.Logf("last run: %v", err)
	}
}

func checkModel(rt *rapid.T, store *persistence.Store, log []messages.OutboxMessage, committed []string, rolled map[string]bool,
	lastState map[string]string, states map[string]bool) {
	var n int
	if err := store.DB().QueryRow(`SELECT count(*) FROM outbox`).Scan(&n); err != nil || n != 0 {
		rt.Fatalf("outbox holds %d messages after the last run (%v)", n, err)
	}
	last := map[int64]int{}
	for i, m := range log {
		last[m.ID] = i
	}
	published := map[string]bool{}
	var statusOrder []string
	lastRemediation := map[string]string{}
	for i, m := range log {
		v := string(m.Value)
		published[v] = true
		if rolled[v] {
			rt.Fatalf("published %s, whose transaction rolled back", v)
		}
		switch m.Kind {
		case messages.OutboxPayloadStatus:
			if last[m.ID] == i {
				statusOrder = append(statusOrder, v)
			}
		case messages.OutboxRemediation:
			if !states[v] {
				rt.Fatalf("published remediation %s, never committed", v)
			}
			lastRemediation[m.OrderingKey] = v
		}
	}
	for _, v := range committed {
		if !published[v] {
			rt.Fatalf("committed %s, never published", v)
		}
	}
	// Each host's statuses' last copies come in commit order.
	pos := map[string]int{}
	for i, v := range committed {
		pos[v] = i
	}
	prev := map[string]string{}
	for _, v := range statusOrder {
		var st struct {
			Host string `json:"host"`
		}
		if err := json.Unmarshal([]byte(v), &st); err != nil {
			rt.Fatal(err)
		}
		if p, ok := prev[st.Host]; ok && pos[p] > pos[v] {
			rt.Fatalf("host %s: %s's last copy after %s's", st.Host, p, v)
		}
		prev[st.Host] = v
	}
	for host, want := range lastState {
		if got := lastRemediation[host]; got != want {
			rt.Fatalf("host %s: last remediation published %s, last committed %s", host, got, want)
		}
	}
}

// checkNotifications: the org heard of each advisory a committed evaluation
// made installable, once (a duplicate only with the same event id), and of
// no other.
func checkNotifications(rt *rapid.T, log []messages.OutboxMessage, want map[string]bool) {
	idOf := map[string]string{}
	for _, m := range log {
		if m.Kind != messages.OutboxNotification {
			continue
		}
		var n struct {
			Events []struct {
				Payload struct {
					AdvisoryName string `json:"advisory_name"`
				} `json:"payload"`
			} `json:"events"`
		}
		if err := json.Unmarshal(m.Value, &n); err != nil {
			rt.Fatal(err)
		}
		for _, e := range n.Events {
			name := e.Payload.AdvisoryName
			if prev, ok := idOf[name]; ok && prev != m.EventID {
				rt.Fatalf("%s notified twice, under %s and %s", name, prev, m.EventID)
			}
			idOf[name] = m.EventID
			if !want[name] {
				rt.Fatalf("%s notified, never installable in a committed evaluation", name)
			}
		}
	}
	for name := range want {
		if _, ok := idOf[name]; !ok {
			rt.Fatalf("%s became installable in a committed evaluation, never notified", name)
		}
	}
}
