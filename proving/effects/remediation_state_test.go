package effects

import (
	"context"
	"crypto/sha256"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/patchflow/patchflow/messages"
	"github.com/patchflow/patchflow/persistence"
	"github.com/patchflow/patchflow/persistence/pgtest"
)

// The checker's own reading of a state by reference agrees with the
// listener's store: for each host, the message its relay renders has among
// its sums the checksum the store recorded; a message one issue off, or
// another host's, has not.
func TestStateSumsAgreeWithTheStore(t *testing.T) {
	ctx := context.Background()
	store, err := persistence.Open(ctx, pgtest.URL(t), persistence.DefaultPoolSettings())
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	at := time.Date(2026, 12, 6, 8, 0, 0, 0, time.UTC)
	updates := [][]persistence.Package{
		{{Name: "bash", EVRA: "0:5.1-2.el9.x86_64"}, {Name: "kernel-core", EVRA: "0:5.14.0-70.el9.x86_64"}},
		{{Name: "zlib", EVRA: "1:1.2.11-40.el9.x86_64"}},
		nil,
	}
	for i, upd := range updates {
		host := fmt.Sprintf("8a3f1c2e-0000-4000-8000-%012d", i)
		u := persistence.SystemUpload{OrgID: "org-1", InventoryID: host, EventTime: at, LastUpload: at,
			Packages: []persistence.Package{{Name: "bash", EVRA: "0:5.1-1.el9.x86_64"}}}
		e := persistence.Evaluation{Advisories: []persistence.AdvisoryResult{{Name: fmt.Sprintf("RHSA-2026:%04d", i), Type: "security", Status: persistence.Installable},
			{Name: "RHBA-2026:0100", Type: "bugfix", Status: persistence.Applicable}},
			Effects: &persistence.Effects{OrgID: "org-1", InventoryID: host, Remediation: &persistence.Remediation{Updates: upd}}}
		check, err := store.CheckUpload(ctx, u)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := store.StoreEvaluatedSystem(ctx, u, e, check); err != nil {
			t.Fatal(err)
		}
	}
	o, err := store.OpenOutbox()
	if err != nil {
		t.Fatal(err)
	}
	defer o.Close()
	msgs, finish, err := o.Claim(ctx, 10, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := finish(ctx, messages.OutboxOutcome{}); err != nil {
		t.Fatal(err)
	}
	if len(msgs) != len(updates) {
		t.Fatalf("claimed %d messages, want %d", len(msgs), len(updates))
	}
	dict, err := readDictionary(ctx, store.DB())
	if err != nil {
		t.Fatal(err)
	}
	sums := map[string][]byte{}
	for _, m := range msgs {
		var sum []byte
		if err := store.DB().QueryRow(`SELECT checksum FROM remediation_state r JOIN system s ON s.id = r.system_id WHERE s.inventory_id = $1`, m.OrderingKey).Scan(&sum); err != nil {
			t.Fatal(err)
		}
		sums[m.OrderingKey] = sum
	}
	for i, m := range msgs {
		if !containsSum(dict.stateSums(m.Value), sums[m.OrderingKey]) {
			t.Fatalf("%s: the checker's sums of %s miss the stored checksum", m.OrderingKey, m.Value)
		}
		other := msgs[(i+1)%len(msgs)]
		if containsSum(dict.stateSums(other.Value), sums[m.OrderingKey]) {
			t.Fatalf("%s's checksum matches %s's message %s", m.OrderingKey, other.OrderingKey, other.Value)
		}
		short := slices.Clone(m.Value)
		short = []byte(string(short[:len(short)-2]) + `,"patch:RHBA-2026:0100"]}`)
		if containsSum(dict.stateSums(short), sums[m.OrderingKey]) {
			t.Fatalf("%s: a message with an issue more, %s, passes for the stored state", m.OrderingKey, short)
		}
	}
}

// Only the bytes the relay renders pass for a state by reference: the
// same issues unsorted, repeated, spaced or with a field more do not.
func TestStateSumsTakeOnlyTheRenderedBytes(t *testing.T) {
	d := &dictionary{advisories: map[string]int64{"RHSA-2026:0001": 3}, packages: map[string]int64{"bash-0:5.1-2.el9.x86_64": 12, "zlib-0:1.2.11-40.el9.x86_64": 40}}
	host := "8a3f1c2e-0000-4000-8000-000000000001"
	ref := sha256.Sum256([]byte("3;c,s"))
	right := `{"host_id":"` + host + `","issues":["patch:RHSA-2026:0001","patch:bash-0:5.1-2.el9.x86_64","patch:zlib-0:1.2.11-40.el9.x86_64"]}`
	if !containsSum(d.stateSums([]byte(right)), ref[:]) {
		t.Fatalf("%s does not pass for its reference", right)
	}
	for _, wrong := range []string{
		`{"host_id":"` + host + `","issues":["patch:zlib-0:1.2.11-40.el9.x86_64","patch:RHSA-2026:0001","patch:bash-0:5.1-2.el9.x86_64"]}`,
		`{"host_id":"` + host + `","issues":["patch:RHSA-2026:0001","patch:RHSA-2026:0001","patch:bash-0:5.1-2.el9.x86_64","patch:zlib-0:1.2.11-40.el9.x86_64"]}`,
		`{ "host_id" : "` + host + `", "issues" : [ "patch:RHSA-2026:0001", "patch:bash-0:5.1-2.el9.x86_64", "patch:zlib-0:1.2.11-40.el9.x86_64" ] }`,
		`{"host_id":"` + host + `","issues":["patch:RHSA-2026:0001","patch:bash-0:5.1-2.el9.x86_64","patch:zlib-0:1.2.11-40.el9.x86_64"],"extra":true}`,
		`{"issues":["patch:RHSA-2026:0001","patch:bash-0:5.1-2.el9.x86_64","patch:zlib-0:1.2.11-40.el9.x86_64"],"host_id":"` + host + `"}`,
	} {
		if containsSum(d.stateSums([]byte(wrong)), ref[:]) {
			t.Errorf("%s passes for the reference of %s", wrong, right)
		}
	}
}
