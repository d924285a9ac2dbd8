package persistence

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/patchflow/patchflow/messages"
	"github.com/patchflow/patchflow/persistence/pgtest"
)

// A state by reference reads back as it was written, whatever its ids,
// and never starts as a whole message does.
func TestRemediationIDsRoundTrip(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		adv := rapid.SliceOfDistinct(rapid.Int32Range(1, 1<<31-1), rapid.ID[int32]).Draw(t, "advisories")
		pkg := rapid.SliceOfDistinct(rapid.Int64Range(1, 1<<63-1), rapid.ID[int64]).Draw(t, "packages")
		slices.Sort(adv)
		slices.Sort(pkg)
		s := remediationIDs{advisories: adv, packages: pkg}.encode()
		if strings.HasPrefix(s, "{") {
			t.Fatalf("%q starts as a whole message", s)
		}
		r, err := decodeRemediationIDs(s)
		if err != nil {
			t.Fatalf("%q: %v", s, err)
		}
		if !slices.Equal(r.advisories, adv) && len(r.advisories)+len(adv) > 0 || !slices.Equal(r.packages, pkg) && len(r.packages)+len(pkg) > 0 {
			t.Fatalf("%q read back as %v %v, want %v %v", s, r.advisories, r.packages, adv, pkg)
		}
	})
}

// What is not encode's form is refused, never read as some other state.
func TestRemediationIDsRefuseWhatEncodeDoesNotWrite(t *testing.T) {
	for _, s := range []string{"", "1,2", "1;2;3", "2,0;", "3,-1;", ";5,0", "1,!;", "1,A;", "01;", "+1;", "zzzzzzzzzzzzzz;", ";zzzzzzzzzzzzzz,zzzzzzzzzzzzzz", "1,,2;"} {
		if r, err := decodeRemediationIDs(s); err == nil {
			t.Errorf("%q read as %+v", s, r)
		}
	}
	rapid.Check(t, func(t *rapid.T) {
		s := rapid.String().Draw(t, "payload")
		r, err := decodeRemediationIDs(s)
		if err != nil {
			return
		}
		if again := r.encode(); again != s {
			t.Fatalf("%q read as %+v, which encodes as %q", s, r, again)
		}
	})
}

// remediationStore is a store with a host whose state (two advisories, an
// update) was written by reference, its outbox, and the row's id.
func remediationStore(t *testing.T) (*Store, *Outbox, int64) {
	t.Helper()
	ctx := context.Background()
	s, err := Open(ctx, pgtest.URL(t), DefaultPoolSettings())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	o, err := s.OpenOutbox()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { o.Close() })
	id := storeRemediation(t, s, 1)
	return s, o, id
}

const remediationHost = "8a3f1c2e-0000-4000-8000-%012d"

// storeRemediation stores host n with its state by reference, and returns
// its outbox row's id.
func storeRemediation(t *testing.T, s *Store, n int) int64 {
	t.Helper()
	ctx := context.Background()
	at := time.Date(2026, 12, 6, 8, 0, 0, 0, time.UTC)
	host := fmt.Sprintf(remediationHost, n)
	u := SystemUpload{OrgID: "org-1", InventoryID: host, EventTime: at, LastUpload: at, Packages: []Package{{Name: "bash", EVRA: "0:5.1-1.el9.x86_64"}}}
	e := Evaluation{Advisories: []AdvisoryResult{{Name: "RHSA-2026:0002", Type: "security", Status: Installable}, {Name: "RHBA-2026:0003", Type: "bugfix", Status: Applicable}},
		Effects: &Effects{OrgID: "org-1", InventoryID: host, Remediation: &Remediation{Updates: []Package{{Name: "bash", EVRA: "0:5.1-2.el9.x86_64"}}}}}
	check, err := s.CheckUpload(ctx, u)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.StoreEvaluatedSystem(ctx, u, e, check); err != nil {
		t.Fatal(err)
	}
	var id int64
	var kind string
	if err := s.db.QueryRowContext(ctx, `SELECT id, kind FROM outbox WHERE ordering_key = $1`, host).Scan(&id, &kind); err != nil {
		t.Fatal(err)
	}
	if kind != outboxRemediationIDs {
		t.Fatalf("the state was written as %s, want by reference", kind)
	}
	return id
}

func wantRemediation(n int) string {
	return fmt.Sprintf(`{"host_id":"`+remediationHost+`","issues":["patch:RHBA-2026:0003","patch:RHSA-2026:0002","patch:bash-0:5.1-2.el9.x86_64"]}`, n)
}

// claimAll claims what waits, and ends the claim publishing nothing.
func claimAll(t *testing.T, o *Outbox) []messages.OutboxMessage {
	t.Helper()
	ctx := context.Background()
	msgs, finish, err := o.Claim(ctx, 100, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := finish(ctx, messages.OutboxOutcome{}); err != nil {
		t.Fatal(err)
	}
	return msgs
}

// A relay with none of the names in its cache (another replica's, or this
// one restarted) reads them from the dictionaries, and learns them; the
// writer's process renders from what its writes taught the cache.
func TestARelayRendersNamesItsCacheLacks(t *testing.T) {
	s, o, _ := remediationStore(t)
	if s.ids.advisoryNames.Len() != 2 || s.ids.packageNames.Len() != 2 {
		t.Fatalf("the writer's cache learnt %d advisory and %d package names, want 2 and 2 (the upload's package and the update)",
			s.ids.advisoryNames.Len(), s.ids.packageNames.Len())
	}
	if msgs := claimAll(t, o); len(msgs) != 1 || string(msgs[0].Value) != wantRemediation(1) || msgs[0].Kind != messages.OutboxRemediation {
		t.Fatalf("the writer's relay claimed %+v, want %s", msgs, wantRemediation(1))
	}
	cold, err := Open(context.Background(), s.url, DefaultPoolSettings())
	if err != nil {
		t.Fatal(err)
	}
	defer cold.Close()
	co, err := cold.OpenOutbox()
	if err != nil {
		t.Fatal(err)
	}
	defer co.Close()
	if msgs := claimAll(t, co); len(msgs) != 1 || string(msgs[0].Value) != wantRemediation(1) {
		t.Fatalf("another process's relay claimed %+v, want %s", msgs, wantRemediation(1))
	}
	if cold.ids.advisoryNames.Len() != 2 || cold.ids.packageNames.Len() != 1 {
		t.Fatalf("the other relay learnt %d advisory and %d package names, want 2 and 1", cold.ids.advisoryNames.Len(), cold.ids.packageNames.Len())
	}
}

// Names cached from another server are not used: a relay whose claim runs
// on a server other than the cache's empties the cache and reads them.
func TestARelayRendersNoNameOfAnotherServer(t *testing.T) {
	s, o, _ := remediationStore(t)
	c := s.ids
	c.mu.Lock()
	c.server = c.server.Add(-time.Hour) // the cache's names came from a server before this one
	for _, id := range c.advisoryNames.Keys() {
		c.advisoryNames.Add(id, "RHSA-OF-ANOTHER-SERVER")
	}
	c.mu.Unlock()
	if msgs := claimAll(t, o); len(msgs) != 1 || string(msgs[0].Value) != wantRemediation(1) {
		t.Fatalf("claimed %+v, want %s", msgs, wantRemediation(1))
	}
}

// A row the relay cannot render (its payload unreadable, or naming an id
// the dictionaries lack) is kept aside for a person, as refused; its
// host's later messages and other hosts' go on.
func TestAnUnrenderableRemediationIsKeptAside(t *testing.T) {
	s, o, bad := remediationStore(t)
	ctx := context.Background()
	lacking := storeRemediation(t, s, 2)
	good := storeRemediation(t, s, 3)
	if _, err := s.db.ExecContext(ctx, `UPDATE outbox SET payload = 'not ids' WHERE id = $1`, bad); err != nil {
		t.Fatal(err)
	}
	if _, err := s.db.ExecContext(ctx, `UPDATE outbox SET payload = payload || ',zzzz' WHERE id = $1`, lacking); err != nil {
		t.Fatal(err)
	}
	if err := s.WritePayloadStatus(ctx, fmt.Sprintf(remediationHost, 1), Message{EventID: "00000000-0000-4000-8000-000000000001", Value: []byte(`{"status":"success"}`)}); err != nil {
		t.Fatal(err)
	}
	msgs := claimAll(t, o)
	var ids []int64
	for _, m := range msgs {
		ids = append(ids, m.ID)
	}
	if len(msgs) != 2 || msgs[0].ID != good || msgs[1].Kind != messages.OutboxPayloadStatus || string(msgs[0].Value) != wantRemediation(3) {
		t.Fatalf("claimed %v (%+v), want the good remediation %d and host 1's later status", ids, msgs, good)
	}
	rows, err := s.db.QueryContext(ctx, `SELECT id, refused FROM outbox WHERE refused IS NOT NULL ORDER BY id`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var aside []string
	for rows.Next() {
		var id int64
		var why sql.NullString
		if err := rows.Scan(&id, &why); err != nil {
			t.Fatal(err)
		}
		aside = append(aside, fmt.Sprintf("%d: %s", id, why.String))
	}
	if len(aside) != 2 || !strings.HasPrefix(aside[0], fmt.Sprintf("%d: unreadable remediation state", bad)) ||
		!strings.HasPrefix(aside[1], fmt.Sprintf("%d: %v", lacking, errUnrenderable)) {
		t.Fatalf("kept aside %q, want %d unreadable and %d lacking a name", aside, bad, lacking)
	}
	b, err := o.Backlog(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if b.Refused != 2 || b.Pending != 2 {
		t.Fatalf("backlog %+v, want 2 pending and 2 refused", b)
	}
}

// The rendered message is what encoding/json makes of the sorted, prefixed
// issues, whatever the names hold (quotes, controls, HTML, non-ASCII,
// invalid UTF-8).
func TestRenderRemediationIsEncodingJSONs(t *testing.T) {
	name := rapid.OneOf(rapid.String(), rapid.StringMatching(`[A-Za-z0-9:._+-]{1,12}`), rapid.SampledFrom([]string{"a\"b", `c\d`, "<&>", "\u2028", "\xff", "é"}))
	rapid.Check(t, func(t *rapid.T) {
		host := name.Draw(t, "host")
		adv := rapid.SliceOf(name).Draw(t, "advisories")
		upd := rapid.SliceOf(name).Draw(t, "updates")
		issues := []string{}
		for _, n := range append(slices.Clone(adv), upd...) {
			issues = append(issues, RemediationIssuePrefix+n)
		}
		slices.Sort(issues)
		want, err := json.Marshal(RemediationMessage{HostID: host, Issues: slices.Compact(issues)})
		if err != nil {
			t.Fatal(err)
		}
		if got := renderRemediation(host, adv, upd); string(got) != string(want) {
			t.Fatalf("rendered\n%s\nencoding/json\n%s", got, want)
		}
	})
}

// go test ./persistence -run '^$' -bench RenderRemediation: the relay's
// rendering of a host's state (150 advisories, 300 updates), against
// encoding/json's of the same message, in one run.
func BenchmarkRenderRemediation(b *testing.B) {
	rng := rand.New(rand.NewPCG(1, 2))
	var adv, upd []string
	for i := range 150 {
		adv = append(adv, fmt.Sprintf("RHSA-2026:%05d", i))
	}
	for _, p := range benchRemediation(rng).Updates {
		upd = append(upd, p.Name+"-"+p.EVRA)
	}
	rng.Shuffle(len(upd), func(i, j int) { upd[i], upd[j] = upd[j], upd[i] })
	b.Run("render", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_ = renderRemediation(remediationHost, adv, upd)
		}
	})
	b.Run("encoding-json", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			issues := make([]string, 0, len(adv)+len(upd))
			for _, n := range adv {
				issues = append(issues, RemediationIssuePrefix+n)
			}
			for _, n := range upd {
				issues = append(issues, RemediationIssuePrefix+n)
			}
			slices.Sort(issues)
			_, _ = json.Marshal(RemediationMessage{HostID: remediationHost, Issues: slices.Compact(issues)})
		}
	})
}

// A host's remediation kept aside (the relay could not render it, or the
// broker refused it for good) does not keep the host's next state from
// being published: the next state replaces it, as it replaces a pending
// one. (Before, the replacement kept the row's refused mark, and every
// later state of the host was written into a row no relay claims.)
func TestTheNextStateReplacesARemediationKeptAside(t *testing.T) {
	for _, how := range []string{"unrenderable", "refused by the broker"} {
		t.Run(how, func(t *testing.T) {
			s, o, id := remediationStore(t)
			ctx := context.Background()
			if how == "unrenderable" {
				if _, err := s.db.ExecContext(ctx, `UPDATE outbox SET payload = 'not ids' WHERE id = $1`, id); err != nil {
					t.Fatal(err)
				}
				if msgs := claimAll(t, o); len(msgs) != 0 {
					t.Fatalf("claimed %+v, want nothing", msgs)
				}
			} else {
				msgs, finish, err := o.Claim(ctx, 10, nil)
				if err != nil || len(msgs) != 1 {
					t.Fatalf("claim: %d %v", len(msgs), err)
				}
				if err := finish(ctx, messages.OutboxOutcome{Refused: map[int64]string{msgs[0].ID: "too large"}}); err != nil {
					t.Fatal(err)
				}
			}
			ctx2 := context.Background()
			at := time.Date(2026, 12, 6, 8, 5, 0, 0, time.UTC)
			host := fmt.Sprintf(remediationHost, 1)
			u := SystemUpload{OrgID: "org-1", InventoryID: host, EventTime: at, LastUpload: at, Packages: []Package{{Name: "bash", EVRA: "0:5.1-1.el9.x86_64"}}}
			e := Evaluation{Advisories: []AdvisoryResult{{Name: "RHSA-2026:0999", Type: "security", Status: Installable}},
				Effects: &Effects{OrgID: "org-1", InventoryID: host, Remediation: &Remediation{Updates: []Package{{Name: "bash", EVRA: "0:5.1-9.el9.x86_64"}}}}}
			check, err := s.CheckUpload(ctx2, u)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := s.StoreEvaluatedSystem(ctx2, u, e, check); err != nil {
				t.Fatal(err)
			}
			want := fmt.Sprintf(`{"host_id":"`+remediationHost+`","issues":["patch:RHSA-2026:0999","patch:bash-0:5.1-9.el9.x86_64"]}`, 1)
			if msgs := claimAll(t, o); len(msgs) != 1 || string(msgs[0].Value) != want {
				t.Fatalf("after a remediation %s, the host's next state: claimed %+v, want %s", how, msgs, want)
			}
		})
	}
}

// A purge and a refill from another server between the relay's view of
// the cache and its reads of it: the names it read may be the other
// server's, so the claim fails transiently rather than publish them, and
// the next claim renders from this server's.
func TestARelayRendersNothingFromACacheRefilledMeanwhile(t *testing.T) {
	s, o, _ := remediationStore(t)
	c := s.ids
	afterRenderView = func() {
		c.seeServer(c.view().started.Add(time.Hour)) // another server's start
		c.mu.Lock()
		for _, id := range []int32{1, 2, 3} {
			c.advisoryNames.Add(id, "RHSA-OF-ANOTHER-SERVER")
		}
		c.mu.Unlock()
	}
	t.Cleanup(func() { afterRenderView = nil })
	ctx := context.Background()
	msgs, finish, err := o.Claim(ctx, 10, nil)
	if err == nil {
		_ = finish(ctx, messages.OutboxOutcome{})
		t.Fatalf("claimed %+v from a cache refilled by another server meanwhile, want a transient failure", msgs)
	}
	if messages.ClassOf(err) != messages.ErrorClass_ERROR_CLASS_TRANSIENT {
		t.Fatalf("claim: %v, want a transient failure", err)
	}
	afterRenderView = nil
	if msgs := claimAll(t, o); len(msgs) != 1 || string(msgs[0].Value) != wantRemediation(1) {
		t.Fatalf("the next claim: %+v, want %s", msgs, wantRemediation(1))
	}
}
