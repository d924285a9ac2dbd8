package persistence_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/patchflow/patchflow/messages"
	"github.com/patchflow/patchflow/persistence"
)

// outboxRows reads the outbox as the relay would publish it, remediations
// written by reference rendered: a claim of everything waiting, ended
// without publishing.
func outboxRows(t *testing.T, s *persistence.Store) []messages.OutboxMessage {
	t.Helper()
	o, err := s.OpenOutbox()
	if err != nil {
		t.Fatal(err)
	}
	defer o.Close()
	ctx := context.Background()
	msgs, finish, err := o.Claim(ctx, 100_000, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := finish(ctx, messages.OutboxOutcome{}); err != nil {
		t.Fatal(err)
	}
	return msgs
}

func ofKind(ms []messages.OutboxMessage, k messages.OutboxKind) []messages.OutboxMessage {
	var out []messages.OutboxMessage
	for _, m := range ms {
		if m.Kind == k {
			out = append(out, m)
		}
	}
	return out
}

// rem is a remediation state with these updates (NEVRAs), each stored
// by reference when canonical (name-E:V-R.A), else verbatim.
func rem(updates ...string) *persistence.Remediation {
	r := &persistence.Remediation{}
	for _, u := range updates {
		name, evra, ok := strings.Cut(u, "-0:")
		if ok {
			r.Updates = append(r.Updates, persistence.Package{Name: name, EVRA: "0:" + evra})
		} else {
			r.Verbatim = append(r.Verbatim, u)
		}
	}
	return r
}

func withEffects(e persistence.Evaluation, host string, remediation *persistence.Remediation, statuses ...string) persistence.Evaluation {
	e.Effects = &persistence.Effects{OrgID: "org-1", InventoryID: host, Notify: &persistence.NotifyContext{InventoryID: host}, Remediation: remediation}
	for i, st := range statuses {
		e.Effects.PayloadStatus = append(e.Effects.PayloadStatus, persistence.Message{EventID: fmt.Sprintf("00000000-0000-4000-8000-%012d", i), Value: []byte(st)})
	}
	return e
}

func storeWithEffects(t *testing.T, s *persistence.Store, u persistence.SystemUpload, e persistence.Evaluation) persistence.UploadResult {
	t.Helper()
	ctx := context.Background()
	check, err := s.CheckUpload(ctx, u)
	if err != nil {
		t.Fatal(err)
	}
	res, err := s.StoreEvaluatedSystem(ctx, u, e, check)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// A remediation message is written when the evaluation changes it, and the
// newest replaces the unpublished older one under a new id; an unchanged
// evaluation writes none.
func TestRemediationIsWrittenWhenItChangesAndReplacesTheUnpublished(t *testing.T) {
	s := openStore(t)
	e := evaluation("RHSA-1", "installable")
	storeWithEffects(t, s, upload(hostA, t0, "bash"), withEffects(e, hostA, rem("bash-0:5.1-2.el9.x86_64")))
	first := ofKind(outboxRows(t, s), messages.OutboxRemediation)
	if want := remediationJSON(hostA, "RHSA-1", "bash-0:5.1-2.el9.x86_64"); len(first) != 1 || string(first[0].Value) != want {
		t.Fatalf("after the first evaluation: %+v, want %s", first, want)
	}
	storeWithEffects(t, s, upload(hostA, t0.Add(time.Minute), "bash"), withEffects(e, hostA, rem("bash-0:5.1-2.el9.x86_64")))
	if again := ofKind(outboxRows(t, s), messages.OutboxRemediation); len(again) != 1 || again[0].ID != first[0].ID {
		t.Fatalf("an unchanged evaluation wrote a message: %+v (was %+v)", again, first)
	}
	e2 := evaluation("RHSA-1", "installable", "RHSA-2", "applicable")
	storeWithEffects(t, s, upload(hostA, t0.Add(2*time.Minute), "bash"), withEffects(e2, hostA, rem("bash-0:5.1-2.el9.x86_64")))
	after := ofKind(outboxRows(t, s), messages.OutboxRemediation)
	if want := remediationJSON(hostA, "RHSA-1", "RHSA-2", "bash-0:5.1-2.el9.x86_64"); len(after) != 1 || after[0].ID <= first[0].ID || string(after[0].Value) != want {
		t.Fatalf("the change did not replace the pending message under a new id: %+v (was %+v), want %s", after, first, want)
	}
}

// remediationJSON is the remediation message of host with these issues
// (advisories and update NEVRAs), prefixed and sorted.
func remediationJSON(host string, issues ...string) string {
	for i := range issues {
		issues[i] = persistence.RemediationIssuePrefix + issues[i]
	}
	slices.Sort(issues)
	b, _ := json.Marshal(persistence.RemediationMessage{HostID: host, Issues: issues})
	return string(b)
}

// An org hears of an advisory once: when it first becomes installable on
// one of its hosts; an applicable one is not news.
func TestNotificationOncePerOrgAndAdvisory(t *testing.T) {
	s := openStore(t)
	const hostB = "8a3f1c2e-0000-4000-8000-000000000002"
	storeWithEffects(t, s, upload(hostA, t0, "bash"), withEffects(evaluation("RHSA-1", "installable", "RHSA-2", "applicable"), hostA, nil))
	storeWithEffects(t, s, upload(hostB, t0, "bash"), withEffects(evaluation("RHSA-1", "installable", "RHSA-2", "installable"), hostB, nil))
	storeWithEffects(t, s, upload(hostA, t0.Add(time.Minute), "bash"), withEffects(evaluation("RHSA-1", "installable", "RHSA-2", "installable"), hostA, nil))
	var names [][]string
	for _, m := range ofKind(outboxRows(t, s), messages.OutboxNotification) {
		var n struct {
			ID     string `json:"id"`
			OrgID  string `json:"org_id"`
			Events []struct {
				Payload struct {
					AdvisoryName string `json:"advisory_name"`
				} `json:"payload"`
			} `json:"events"`
		}
		if err := json.Unmarshal(m.Value, &n); err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, ev := range n.Events {
			got = append(got, ev.Payload.AdvisoryName)
		}
		names = append(names, got)
		if n.OrgID != "org-1" || m.OrderingKey != "org-1" || n.ID == "" {
			t.Errorf("notification %s: org %q, ordering key %q, id %q", m.Value, n.OrgID, m.OrderingKey, n.ID)
		}
	}
	if len(names) != 2 || len(names[0]) != 1 || names[0][0] != "RHSA-1" || len(names[1]) != 1 || names[1][0] != "RHSA-2" {
		t.Fatalf("notifications %v, want [[RHSA-1] [RHSA-2]]", names)
	}
}

// A write whose transaction rolls back after the outbox write leaves no
// message, and no trace that would stop the retry from writing it.
func TestOutboxMessagesExistOnlyForCommittedWrites(t *testing.T) {
	s := openStore(t)
	boom := errors.New("injected after the outbox write")
	e := withEffects(evaluation("RHSA-1", "installable"), hostA, rem(), `{"status":"received"}`, `{"status":"success"}`)
	persistence.SetAfterEffects(func() error { return boom })
	t.Cleanup(func() { persistence.SetAfterEffects(nil) })
	ctx := context.Background()
	u := upload(hostA, t0, "bash")
	check, err := s.CheckUpload(ctx, u)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.StoreEvaluatedSystem(ctx, u, e, check); !errors.Is(err, boom) {
		t.Fatalf("store: %v, want the injected failure", err)
	}
	if rows := outboxRows(t, s); len(rows) != 0 {
		t.Fatalf("a rolled-back write left %d outbox messages: %+v", len(rows), rows)
	}
	persistence.SetAfterEffects(nil)
	storeWithEffects(t, s, u, e)
	rows := outboxRows(t, s)
	if len(ofKind(rows, messages.OutboxRemediation)) != 1 || len(ofKind(rows, messages.OutboxNotification)) != 1 || len(ofKind(rows, messages.OutboxPayloadStatus)) != 2 {
		t.Fatalf("the retry after the rollback wrote %+v", rows)
	}
	if ps := ofKind(rows, messages.OutboxPayloadStatus); string(ps[0].Value) != `{"status":"received"}` || ps[0].ID > ps[1].ID {
		t.Fatalf("payload statuses out of order: %+v", ps)
	}
}

// Two relays never hold one key at once: the second claim skips the keys
// the first holds, and sees them once the first ended.
func TestClaimHoldsItsKeysFromOtherRelays(t *testing.T) {
	s := openStore(t)
	const hostB = "8a3f1c2e-0000-4000-8000-000000000002"
	ctx := context.Background()
	for _, h := range []string{hostA, hostB} {
		if err := s.WritePayloadStatus(ctx, h, persistence.Message{EventID: "00000000-0000-4000-8000-000000000001", Value: []byte(`{"n":1}`)},
			persistence.Message{EventID: "00000000-0000-4000-8000-000000000002", Value: []byte(`{"n":2}`)}); err != nil {
			t.Fatal(err)
		}
	}
	a, err := s.OpenOutbox()
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := s.OpenOutbox()
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	first, finishA, err := a.Claim(ctx, 2, nil) // hostA's two
	if err != nil {
		t.Fatal(err)
	}
	if len(first) != 2 || first[0].OrderingKey != hostA || first[1].OrderingKey != hostA || first[0].ID > first[1].ID {
		t.Fatalf("first claim %+v, want host A's two in order", first)
	}
	second, finishB, err := b.Claim(ctx, 10, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range second {
		if m.OrderingKey == hostA {
			t.Fatalf("the second relay took host A's message %d while the first held it", m.ID)
		}
	}
	if len(second) != 2 {
		t.Fatalf("second claim %+v, want host B's two", second)
	}
	if err := finishB(ctx, messages.OutboxOutcome{}); err != nil {
		t.Fatal(err)
	}
	if err := finishA(ctx, messages.OutboxOutcome{Published: []int64{first[0].ID}}); err != nil {
		t.Fatal(err)
	}
	third, finish, err := b.Claim(ctx, 10, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer finish(ctx, messages.OutboxOutcome{})
	if len(third) != 3 || third[0].ID != first[1].ID {
		t.Fatalf("after the first relay deleted one: %+v", third)
	}
}

// A relay that published a remediation message the host's next
// evaluation replaced deletes only the message it published.
func TestPublishedRemediationDeletesOnlyItself(t *testing.T) {
	s := openStore(t)
	ctx := context.Background()
	storeWithEffects(t, s, upload(hostA, t0, "bash"), withEffects(evaluation("RHSA-1", "installable"), hostA, rem()))
	o, err := s.OpenOutbox()
	if err != nil {
		t.Fatal(err)
	}
	defer o.Close()
	msgs, finish, err := o.Claim(ctx, 10, []messages.OutboxKind{messages.OutboxNotification})
	if err != nil || len(msgs) != 1 {
		t.Fatalf("claim: %v %+v", err, msgs)
	}
	storeWithEffects(t, s, upload(hostA, t0.Add(time.Minute), "bash"), withEffects(evaluation("RHSA-2", "installable"), hostA, rem()))
	if err := finish(ctx, messages.OutboxOutcome{Published: []int64{msgs[0].ID}}); err != nil {
		t.Fatal(err)
	}
	rem := ofKind(outboxRows(t, s), messages.OutboxRemediation)
	if len(rem) != 1 || string(rem[0].Value) != remediationJSON(hostA, "RHSA-2") {
		t.Fatalf("after publishing v1 while v2 replaced it: %+v", rem)
	}
}
