package evaluation

import (
	"encoding/json"
	"fmt"
	"runtime"
	"strings"
	"testing"

	"github.com/patchflow/patchflow/consumer"
	"github.com/patchflow/patchflow/inventory"
)

// withPackages is the realistic event with its package list replaced by n
// packages named after pattern (%d: the package's number), as JSON.
func withPackages(t *testing.T, event []byte, n int, pattern string) []byte {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(event, &m); err != nil {
		t.Fatal(err)
	}
	pk := make([]any, n)
	for i := range pk {
		pk[i] = fmt.Sprintf(pattern, i)
	}
	m["host"].(map[string]any)["system_profile"].(map[string]any)["installed_packages"] = pk
	out, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// RecordBytes holds above what handling an event keeps alive at once, on
// the shapes that weigh most per byte: the record, the event decoded, the
// upload, the VMaaS request and its JSON, all held together (the answer is
// the client's to bound). It is what makes Config.InFlightBytes a bound on
// memory and not a guess: a weight below the live set would let the budget
// admit more than it can hold.
func TestRecordBytesBoundsTheLiveSet(t *testing.T) {
	r := newRealistic(t)
	opts := inventory.DefaultValidationOptions()
	h := &Handler{validation: opts}
	shapes := []struct {
		name  string
		event []byte
	}{
		{"realistic", r.event},
		{"tiny packages", withPackages(t, r.event, 60_000, "a%d-1-1.x")},
		{"shortest packages", withPackages(t, r.event, 64_000, "a-1-%d.x")},
		{"typical packages", withPackages(t, r.event, 20_000, "python3-libs%d-0:3.6.8-37.el8.x86_64")},
		{"long names", withPackages(t, r.event, 800, strings.Repeat("n", 1000)+"%d-1-1.x86_64")},
	}
	for _, s := range shapes {
		if len(s.event) > opts.MaxMessageBytes {
			t.Fatalf("%s: %d bytes, over the %d a record may have to be parsed", s.name, len(s.event), opts.MaxMessageBytes)
		}
		live := liveSetOf(t, s.event, opts)
		weight := h.RecordBytes(&consumer.Record{Value: s.event})
		t.Logf("%s: %d bytes on the wire, %d live while handled (%.1f×), weighs %d", s.name, len(s.event), live, float64(live)/float64(len(s.event)), weight)
		if live > weight {
			t.Errorf("%s: handling keeps %d bytes alive, RecordBytes says %d", s.name, live, weight)
		}
	}
}

// liveSetOf is the heap held after the handler's stages ran on event, with
// everything they made still referenced, the event's own bytes included.
func liveSetOf(t *testing.T, event []byte, opts inventory.ValidationOptions) int64 {
	t.Helper()
	record := append([]byte(nil), event...) // the record's value, as sarama hands it over
	var before, after runtime.MemStats
	runtime.GC()
	runtime.GC() // twice: sync.Pool's victims go in the second
	runtime.ReadMemStats(&before)
	record2 := append([]byte(nil), record...)
	ev, err := inventory.DecodeInventoryEvent(record2, opts)
	if err != nil {
		t.Fatal(err)
	}
	u, err := newUpload(ev, ev.Host.SystemProfile, ev.Timestamp)
	if err != nil {
		t.Fatal(err)
	}
	req := updatesRequest(t, evaluationTarget{packages: u.Packages, repos: u.Repos, modules: u.Modules, arch: u.Arch, releasever: u.Releasever})
	body, err := json.Marshal(req)
	if err != nil {
		t.Fatal(err)
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	runtime.KeepAlive(record)
	runtime.KeepAlive(record2)
	runtime.KeepAlive(ev)
	runtime.KeepAlive(u)
	runtime.KeepAlive(req)
	runtime.KeepAlive(body)
	return int64(after.HeapAlloc) - int64(before.HeapAlloc)
}
