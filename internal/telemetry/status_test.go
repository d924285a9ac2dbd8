package telemetry

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/patchflow/patchflow/actors"
	"github.com/patchflow/patchflow/internal/telemetry/statustest"
)

// fill sets every exported field of v, recursively: pointers allocated,
// one element in each slice and one entry in each map, so that v marshals
// with every key its type can have, the omitempty ones included.
func fill(v reflect.Value) {
	switch v.Kind() {
	case reflect.Pointer:
		v.Set(reflect.New(v.Type().Elem()))
		fill(v.Elem())
	case reflect.Struct:
		if v.Type() == reflect.TypeFor[time.Time]() {
			v.Set(reflect.ValueOf(time.Unix(1, 0)))
			return
		}
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				fill(v.Field(i))
			}
		}
	case reflect.Slice:
		v.Set(reflect.MakeSlice(v.Type(), 1, 1))
		fill(v.Index(0))
	case reflect.Map:
		m := reflect.MakeMap(v.Type())
		k, e := reflect.New(v.Type().Key()).Elem(), reflect.New(v.Type().Elem()).Elem()
		fill(k)
		fill(e)
		m.SetMapIndex(k, e)
		v.Set(m)
	case reflect.String:
		v.SetString("some value")
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		v.SetInt(1)
	case reflect.Float32, reflect.Float64:
		v.SetFloat(1)
	}
}

// /status.json names every field in snake_case, nested ones and those
// absent unless set included: a Status with every field set marshals with
// no other key.
func TestStatusJSONIsSnakeCase(t *testing.T) {
	var st Status
	fill(reflect.ValueOf(&st).Elem())
	raw, err := json.Marshal(st)
	if err != nil {
		t.Fatal(err)
	}
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		t.Fatal(err)
	}
	if bad := statustest.NonSnakeKeys(v); len(bad) > 0 {
		t.Fatalf("keys not in snake_case: %v\n%s", bad, raw)
	}
	// The walk reaches every level: a key of each nested object is seen.
	for _, want := range []string{`"totals":{`, `"panics":1`, `"concurrency":{`, `"per_partition_limit":1`, `"partitions":[{`,
		`"in_flight_limit":1`, `"dead_letter_blocked":{`, `"committed":1`, `"settings":[{`, `"by_topic":{"some value":{"succeeded":1`} {
		if !strings.Contains(string(raw), want) {
			t.Errorf("%s lacks %s", raw, want)
		}
	}
}

// A partition whose next record waits for a credit says for how long; one
// that does not wait has no such field (its zero time is not a wait since
// 1970).
func TestPartitionStatusShowsTheCreditWait(t *testing.T) {
	now := time.Now()
	waiting := partitionStatus(actors.PartitionState{Partition: 3, Committed: 255, Admitted: -1, WaitingForCredit: now.Add(-1500 * time.Millisecond)}, now)
	if w := waiting.CreditWaitSeconds; w == nil || *w != 1.5 {
		t.Errorf("waiting since 1.5 s ago: credit_wait_seconds %v, want 1.5", w)
	}
	raw, _ := json.Marshal(waiting)
	if !strings.Contains(string(raw), `"credit_wait_seconds":1.5`) {
		t.Errorf("status row %s lacks the credit wait", raw)
	}
	if w := partitionStatus(actors.PartitionState{Partition: 3, InFlight: 2}, now).CreditWaitSeconds; w != nil {
		t.Errorf("not waiting: credit_wait_seconds %v, want none", *w)
	}
	later := partitionStatus(actors.PartitionState{Partition: 3, InFlight: 1, WaitingForCredit: now.Add(time.Millisecond),
		SpanBlocked: now.Add(time.Millisecond), PinnedSince: now.Add(time.Millisecond)}, now)
	if *later.CreditWaitSeconds != 0 || *later.SpanBlockedSeconds != 0 || later.PinnedSeconds != 0 {
		t.Errorf("waits begun after the snapshot's time: %v s for a credit, %v s span-blocked, pinned %v s; want 0, not negative",
			*later.CreditWaitSeconds, *later.SpanBlockedSeconds, later.PinnedSeconds)
	}
}

// The page prints the optional seconds as numbers (printf of the pointer
// printed "%!f(*float64=0xc000…)"), and a credit wait under a second, the
// normal state of a pipeline at its limit, not at all.
func TestStatusPagePrintsOptionalSeconds(t *testing.T) {
	sec := func(s float64) *float64 { return &s }
	st := Status{Partitions: []PartitionStatus{
		{Partition: 0, InFlight: 3, InFlightLimit: 64, CreditWaitSeconds: sec(2.4), SpanBlockedSeconds: sec(3.2), SpanLimit: 8192},
		{Partition: 1, InFlight: 4, InFlightLimit: 64, CreditWaitSeconds: sec(0.3)},
	}}
	var b strings.Builder
	if err := statusPage.Execute(&b, st); err != nil {
		t.Fatal(err)
	}
	page := b.String()
	for _, want := range []string{"3 / 64, waiting 2 s for a credit", "span-blocked for 3 s", "<td>4 / 64</td>"} {
		if !strings.Contains(page, want) {
			t.Errorf("the page lacks %q", want)
		}
	}
	if strings.Contains(page, "%!") {
		t.Errorf("the page has a printf error:\n%s", page)
	}
}
