package inventory_test

import (
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/patchflow/patchflow/inventory"
	"github.com/patchflow/patchflow/messages"
)

// brokenReasons, skipReasons and failureReasons name every constant, so a
// reason left out of ValidationReasons, SkipReasons or DeadLetterReasons,
// or listed twice, fails TestReasonLists.
var (
	brokenReasons = []messages.Reason{
		inventory.ReasonKeyTooLarge,
		inventory.ReasonHeadersTooLarge,
		inventory.ReasonMalformedJSON,
		inventory.ReasonMessageTooLarge,
		inventory.ReasonUnknownEventType,
		inventory.ReasonMissingHostID,
		inventory.ReasonMissingOrgID,
		inventory.ReasonUnparsablePackage,
		inventory.ReasonFutureTimestamp,
	}
	skipReasons = []messages.Reason{
		inventory.ReasonReporterNotAllowed,
		inventory.ReasonExcludedHostType,
		inventory.ReasonNothingToEvaluate,
		inventory.ReasonOlderThanApplied,
		inventory.ReasonAlreadyApplied,
		inventory.ReasonHostDeleted,
	}
	failureReasons = []messages.Reason{
		messages.ReasonPermanent,
		messages.ReasonTransient,
		messages.ReasonReleased,
		messages.ReasonUnknown,
		messages.ReasonPanic,
		messages.ReasonUnreadableBatch,
	}
)

func TestReasonLists(t *testing.T) {
	sorted := func(rs []messages.Reason) []messages.Reason { return slices.Sorted(slices.Values(rs)) }
	if got, want := sorted(inventory.ValidationReasons()), sorted(brokenReasons); !slices.Equal(got, want) {
		t.Errorf("ValidationReasons() = %q, want %q", got, want)
	}
	if got, want := sorted(inventory.SkipReasons()), sorted(skipReasons); !slices.Equal(got, want) {
		t.Errorf("SkipReasons() = %q, want %q", got, want)
	}
	if got, want := sorted(messages.DeadLetterReasons()), sorted(failureReasons); !slices.Equal(got, want) {
		t.Errorf("DeadLetterReasons() = %q, want %q", got, want)
	}
	seen := map[messages.Reason]bool{}
	for _, r := range slices.Concat(brokenReasons, skipReasons, failureReasons) {
		if r == "" || seen[r] {
			t.Errorf("reason %q is empty or named twice", r)
		}
		if r.Clean() != r {
			t.Errorf("reason %q would be counted as %q: keep a named reason printable and within %d bytes", r, r.Clean(), messages.MaxReasonBytes)
		}
		seen[r] = true
	}
}

// requireSkipped asserts the contract of a filtered event: nil event, a
// *Skipped with the exact reason and a detail, and not a broken message.
func requireSkipped(t *testing.T, name string, ev *inventory.InventoryEvent, err error, want messages.Reason) {
	t.Helper()
	if ev != nil {
		t.Errorf("%s: returned an event with the skip", name)
	}
	r, ok := messages.SkipReasonOf(err)
	if !ok {
		t.Errorf("%s: %v is not a skip, want %q", name, err, want)
		return
	}
	if r != want {
		t.Errorf("%s: skip reason %q (%v), want %q", name, r, err, want)
	}
	var ve *messages.ValidationError
	if errors.As(err, &ve) || messages.ClassOf(err) == messages.ErrorClass_ERROR_CLASS_PERMANENT {
		t.Errorf("%s: a filtered event reads as broken: %v", name, err)
	}
	var s *messages.Skipped
	if errors.As(err, &s) && s.Detail == "" {
		t.Errorf("%s: skip without a detail", name)
	}
}

// requireRejected asserts the whole error contract: nil event, permanent
// class, a *ValidationError reachable with errors.As, and the exact reason.
func requireRejected(t *testing.T, name string, ev *inventory.InventoryEvent, err error, want messages.Reason) {
	t.Helper()
	if err == nil {
		t.Errorf("%s: accepted, want %q", name, want)
		return
	}
	if ev != nil {
		t.Errorf("%s: returned an event with the error", name)
	}
	if c := messages.ClassOf(err); c != messages.ErrorClass_ERROR_CLASS_PERMANENT {
		t.Errorf("%s: ClassOf = %v, want permanent", name, c)
	}
	var ve *messages.ValidationError
	if !errors.As(err, &ve) {
		t.Errorf("%s: %v is not a *ValidationError", name, err)
		return
	}
	if ve.Reason != want {
		t.Errorf("%s: Reason = %q (%v), want %q", name, ve.Reason, err, want)
	}
	if ve.Detail == "" || err.Error() != string(ve.Reason)+": "+ve.Detail {
		t.Errorf("%s: Error() = %q, want reason: detail", name, err.Error())
	}
}

func TestDecodeInventoryEventRejects(t *testing.T) {
	profile := func(change func(p map[string]any)) []byte {
		return with(t, createdEvent(), func(m map[string]any) { change(profileOf(m)) })
	}
	host := func(change func(h map[string]any)) []byte {
		return with(t, createdEvent(), func(m map[string]any) { change(hostOf(m)) })
	}
	cases := []struct {
		name string
		data []byte
		want messages.Reason
	}{
		{"empty input", nil, inventory.ReasonMalformedJSON},
		{"truncated", encode(t, createdEvent())[:200], inventory.ReasonMalformedJSON},
		{"not JSON", []byte("created"), inventory.ReasonMalformedJSON},
		{"trailing garbage", []byte(`{"type":"delete"} x`), inventory.ReasonMalformedJSON},
		{"array event", []byte(`[]`), inventory.ReasonMalformedJSON},
		{"type is a number", []byte(`{"type": 1}`), inventory.ReasonMalformedJSON},
		{"host is a string", []byte(`{"type":"created","host":"x"}`), inventory.ReasonMalformedJSON},
		{"packages not an array", profile(func(p map[string]any) { p["installed_packages"] = "kernel" }), inventory.ReasonMalformedJSON},
		{"package not a string", profile(func(p map[string]any) { p["installed_packages"] = []any{1} }), inventory.ReasonMalformedJSON},
		{"enabled not a bool", profile(func(p map[string]any) { p["yum_repos"] = []any{map[string]any{"enabled": "yes"}} }), inventory.ReasonMalformedJSON},
		{"os major not an integer", profile(func(p map[string]any) { p["operating_system"] = map[string]any{"major": 8.5} }), inventory.ReasonMalformedJSON},
		{"bad timestamp", with(t, deleteEvent(), func(m map[string]any) { m["timestamp"] = "yesterday" }), inventory.ReasonMalformedJSON},
		{"bad stale timestamp", host(func(h map[string]any) { h["stale_timestamp"] = "2024-13-01T00:00:00Z" }), inventory.ReasonMalformedJSON},
		{"bad check-in", host(func(h map[string]any) {
			h["per_reporter_staleness"] = map[string]any{"puptoo": map[string]any{"last_check_in": 5}}
		}), inventory.ReasonMalformedJSON},

		{"no type", with(t, deleteEvent(), func(m map[string]any) { delete(m, "type") }), inventory.ReasonUnknownEventType},
		{"null event", []byte("null"), inventory.ReasonUnknownEventType},
		{"unknown type", with(t, deleteEvent(), func(m map[string]any) { m["type"] = "deleted" }), inventory.ReasonUnknownEventType},
		{"type is case sensitive", with(t, createdEvent(), func(m map[string]any) { m["type"] = "Created" }), inventory.ReasonUnknownEventType},

		{"created without host", with(t, createdEvent(), func(m map[string]any) { delete(m, "host") }), inventory.ReasonMissingHostID},
		{"host id missing", host(func(h map[string]any) { delete(h, "id") }), inventory.ReasonMissingHostID},
		{"host id not a UUID", host(func(h map[string]any) { h["id"] = "web-01" }), inventory.ReasonMissingHostID},
		{"host id without dashes", host(func(h map[string]any) { h["id"] = strings.ReplaceAll(testHostID, "-", "") }), inventory.ReasonMissingHostID},
		{"host id with braces", host(func(h map[string]any) { h["id"] = "{" + testHostID[1:35] + "}" }), inventory.ReasonMissingHostID},
		{"host id truncated", host(func(h map[string]any) { h["id"] = testHostID[:35] }), inventory.ReasonMissingHostID},
		{"host id with suffix", host(func(h map[string]any) { h["id"] = testHostID + "0" }), inventory.ReasonMissingHostID},
		{"host id non-hex", host(func(h map[string]any) { h["id"] = "g" + testHostID[1:] }), inventory.ReasonMissingHostID},
		{"delete id missing", with(t, deleteEvent(), func(m map[string]any) { delete(m, "id") }), inventory.ReasonMissingHostID},
		{"delete id only in host", with(t, deleteEvent(), func(m map[string]any) {
			delete(m, "id")
			m["host"] = map[string]any{"id": testHostID, "org_id": testOrgID}
		}), inventory.ReasonMissingHostID},

		{"host org id missing", host(func(h map[string]any) { delete(h, "org_id") }), inventory.ReasonMissingOrgID},
		{"host org id blank", host(func(h map[string]any) { h["org_id"] = "  " }), inventory.ReasonMissingOrgID},
		{"delete org id missing", with(t, deleteEvent(), func(m map[string]any) { delete(m, "org_id") }), inventory.ReasonMissingOrgID},
		{"id-only org id missing", with(t, idOnlyEvent(), func(m map[string]any) { delete(hostOf(m), "org_id") }), inventory.ReasonMissingOrgID},

		// broken beats filtered: a foreign reporter does not hide a missing org id
		{"reporter not allowed, org id missing", host(func(h map[string]any) { h["reporter"] = "yupana"; delete(h, "org_id") }), inventory.ReasonMissingOrgID},

		{"package without arch", profile(func(p map[string]any) {
			p["installed_packages"] = []any{"bash-0:4.4.20-1.el8_4.x86_64", "kernel-4.18.0-305"}
		}), inventory.ReasonUnparsablePackage},
		{"package empty", profile(func(p map[string]any) { p["installed_packages"] = []any{""} }), inventory.ReasonUnparsablePackage},
		{"package bad epoch", profile(func(p map[string]any) { p["installed_packages"] = []any{"kernel-x:4.18.0-305.el8.x86_64"} }), inventory.ReasonUnparsablePackage},
	}

	covered := map[messages.Reason]bool{}
	for _, c := range cases {
		ev, err := inventory.DecodeInventoryEvent(c.data, inventory.DefaultValidationOptions())
		requireRejected(t, c.name, ev, err, c.want)
		covered[c.want] = true
	}
	// Too large is tested below with a small limit; a time in the future
	// is CheckEventTime's (TestCheckEventTime), a key or headers too
	// large CheckRecord's (TestCheckRecordBoundsKeyAndHeaders).
	covered[inventory.ReasonMessageTooLarge] = true
	covered[inventory.ReasonKeyTooLarge] = true
	covered[inventory.ReasonHeadersTooLarge] = true
	covered[inventory.ReasonFutureTimestamp] = true
	for _, r := range inventory.ValidationReasons() {
		if !covered[r] {
			t.Errorf("no case produces %q", r)
		}
	}
}

// Filtered events are valid: they come back as skips, never as broken
// messages, so the listener commits and counts them instead of
// dead-lettering them.
func TestDecodeInventoryEventSkipsFilteredEvents(t *testing.T) {
	host := func(change func(h map[string]any)) []byte {
		return with(t, createdEvent(), func(m map[string]any) { change(hostOf(m)) })
	}
	cases := []struct {
		name string
		data []byte
		want messages.Reason
	}{
		{"reporter not allowed", host(func(h map[string]any) { h["reporter"] = "yupana" }), inventory.ReasonReporterNotAllowed},
		{"reporter missing with profile", host(func(h map[string]any) { delete(h, "reporter") }), inventory.ReasonReporterNotAllowed},
		{"id-only with bad reporter", with(t, idOnlyEvent(), func(m map[string]any) { hostOf(m)["reporter"] = "satellite" }), inventory.ReasonReporterNotAllowed},
		{"updated from a foreign reporter", with(t, updatedEvent(), func(m map[string]any) { hostOf(m)["reporter"] = "cloud-connector" }), inventory.ReasonReporterNotAllowed},
		{"edge host", host(func(h map[string]any) { h["system_profile"].(map[string]any)["host_type"] = "edge" }), inventory.ReasonExcludedHostType},
		// filters run before the packages are parsed: an ignored host's
		// packages are not this service's business
		{"edge host with a bad package", host(func(h map[string]any) {
			p := h["system_profile"].(map[string]any)
			p["host_type"], p["installed_packages"] = "edge", []any{"nonsense"}
		}), inventory.ReasonExcludedHostType},
		{"foreign reporter with a bad package", host(func(h map[string]any) {
			h["reporter"] = "yupana"
			h["system_profile"].(map[string]any)["installed_packages"] = []any{"nonsense"}
		}), inventory.ReasonReporterNotAllowed},
	}
	for _, c := range cases {
		ev, err := inventory.DecodeInventoryEvent(c.data, inventory.DefaultValidationOptions())
		requireSkipped(t, c.name, ev, err, c.want)
	}
}

// A host without packages is valid: it is stored, and has nothing to
// evaluate.
func TestEmptyPackageListIsValid(t *testing.T) {
	profile := func(change func(p map[string]any)) []byte {
		return with(t, createdEvent(), func(m map[string]any) { change(profileOf(m)) })
	}
	for name, data := range map[string][]byte{
		"packages missing": profile(func(p map[string]any) { delete(p, "installed_packages") }),
		"packages empty":   profile(func(p map[string]any) { p["installed_packages"] = []any{} }),
		"packages null":    profile(func(p map[string]any) { p["installed_packages"] = nil }),
		"empty profile":    with(t, createdEvent(), func(m map[string]any) { hostOf(m)["system_profile"] = map[string]any{} }),
	} {
		ev, err := inventory.DecodeInventoryEvent(data, inventory.DefaultValidationOptions())
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		if p := ev.Host.SystemProfile; p == nil || len(p.InstalledPackages) != 0 {
			t.Errorf("%s: profile %+v, want one without packages", name, p)
		}
	}
}

func TestMessageTooLargeIsCheckedBeforeParsing(t *testing.T) {
	opts := inventory.DefaultValidationOptions()
	opts.MaxMessageBytes = 64
	// Malformed on purpose: a size check after parsing would say malformed.
	data := []byte(`{"type": "created", "host": {` + strings.Repeat(" ", 100))
	ev, err := inventory.DecodeInventoryEvent(data, opts)
	requireRejected(t, "over the limit", ev, err, inventory.ReasonMessageTooLarge)

	good := encode(t, deleteEvent())
	opts.MaxMessageBytes = len(good)
	if _, err := inventory.DecodeInventoryEvent(good, opts); err != nil {
		t.Errorf("a message of exactly the limit was rejected: %v", err)
	}
	opts.MaxMessageBytes = len(good) - 1
	ev, err = inventory.DecodeInventoryEvent(good, opts)
	requireRejected(t, "one byte over", ev, err, inventory.ReasonMessageTooLarge)

	opts.MaxMessageBytes = 0
	if _, err := inventory.DecodeInventoryEvent(good, opts); err != nil {
		t.Errorf("MaxMessageBytes 0 should mean no bound: %v", err)
	}
}

func TestDefaultValidationOptions(t *testing.T) {
	got := inventory.DefaultValidationOptions()
	want := inventory.ValidationOptions{
		MaxMessageBytes:   1_000_000,
		MaxKeyBytes:       1024,
		MaxHeaders:        64,
		MaxHeaderBytes:    64 << 10,
		AllowedReporters:  []string{"puptoo", "rhsm-system-profile-bridge"},
		ExcludedHostTypes: []string{"edge"},
		MaxFutureSkew:     10 * time.Minute,
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("DefaultValidationOptions = %+v, want %+v", got, want)
	}
	got.AllowedReporters[0] = "changed"
	if inventory.DefaultValidationOptions().AllowedReporters[0] != "puptoo" {
		t.Error("callers changing their options changed the defaults")
	}
}

func TestReporterPolicy(t *testing.T) {
	defaults := inventory.DefaultValidationOptions()
	cases := []struct {
		name string
		data []byte
		opts inventory.ValidationOptions
		ok   bool
	}{
		{"puptoo", encode(t, createdEvent()), defaults, true},
		{"bridge", with(t, createdEvent(), func(m map[string]any) { hostOf(m)["reporter"] = "rhsm-system-profile-bridge" }), defaults, true},
		{"id-only without reporter", encode(t, idOnlyEvent()), defaults, true},
		{"id-only with allowed reporter", with(t, idOnlyEvent(), func(m map[string]any) { hostOf(m)["reporter"] = "puptoo" }), defaults, true},
		{"custom allow list", with(t, createdEvent(), func(m map[string]any) { hostOf(m)["reporter"] = "yupana" }),
			inventory.ValidationOptions{AllowedReporters: []string{"yupana"}}, true},
		{"zero options fail closed", encode(t, createdEvent()), inventory.ValidationOptions{}, false},
		{"reporter is case sensitive", with(t, createdEvent(), func(m map[string]any) { hostOf(m)["reporter"] = "Puptoo" }), defaults, false},
		{"edge allowed when not excluded", with(t, createdEvent(), func(m map[string]any) { profileOf(m)["host_type"] = "edge" }),
			inventory.ValidationOptions{AllowedReporters: []string{"puptoo"}}, true},
	}
	for _, c := range cases {
		ev, err := inventory.DecodeInventoryEvent(c.data, c.opts)
		if c.ok && err != nil {
			t.Errorf("%s: %v", c.name, err)
		}
		if !c.ok {
			requireSkipped(t, c.name, ev, err, inventory.ReasonReporterNotAllowed)
		}
	}
}

func TestValidationErrorMessages(t *testing.T) {
	long := strings.Repeat("x", 10_000)
	data := with(t, createdEvent(), func(m map[string]any) {
		profileOf(m)["installed_packages"] = []any{"bash-0:4.4.20-1.el8_4.x86_64", long}
	})
	_, err := inventory.DecodeInventoryEvent(data, inventory.DefaultValidationOptions())
	var ve *messages.ValidationError
	if !errors.As(err, &ve) {
		t.Fatalf("err = %v", err)
	}
	if !strings.Contains(ve.Detail, "installed_packages[1]") {
		t.Errorf("Detail %q does not name the first bad package", ve.Detail)
	}
	if len(ve.Detail) > 300 {
		t.Errorf("Detail repeats %d bytes of input; it should be bounded", len(ve.Detail))
	}

	_, err = inventory.DecodeInventoryEvent([]byte(`{"type":"created","host":{"system_profile":{"installed_packages":[1]}}}`), inventory.DefaultValidationOptions())
	if got := fmt.Sprint(err); !strings.Contains(got, "host.system_profile.installed_packages") || strings.Contains(got, "wire") {
		t.Errorf("type error %q should name the JSON path, not Go types", got)
	}
}

func TestParsedPackages(t *testing.T) {
	p := &inventory.SystemProfile{InstalledPackages: []string{"kernel-0:4.18.0-305.el8.x86_64", "bash-4.4.20-1.el8_4.x86_64"}}
	got, err := inventory.ParsedPackages(p)
	want := []inventory.NEVRA{
		{Name: "kernel", Epoch: 0, Version: "4.18.0", Release: "305.el8", Arch: "x86_64"},
		{Name: "bash", Epoch: 0, Version: "4.4.20", Release: "1.el8_4", Arch: "x86_64"},
	}
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Errorf("ParsedPackages = %+v, %v", got, err)
	}

	p.InstalledPackages = append(p.InstalledPackages, "nonsense")
	got, err = inventory.ParsedPackages(p)
	var ve *messages.ValidationError
	if got != nil || !errors.As(err, &ve) || ve.Reason != inventory.ReasonUnparsablePackage || messages.ClassOf(err) != messages.ErrorClass_ERROR_CLASS_PERMANENT {
		t.Errorf("ParsedPackages with a bad package = %+v, %v", got, err)
	}
}

func TestValidateSystemProfile(t *testing.T) {
	opts := inventory.DefaultValidationOptions()
	requireSkipped(t, "edge", nil, inventory.ValidateSystemProfile(&inventory.SystemProfile{HostType: "edge", InstalledPackages: []string{"a-1-1.noarch"}}, opts),
		inventory.ReasonExcludedHostType)
	requireRejected(t, "bad package", nil, inventory.ValidateSystemProfile(&inventory.SystemProfile{InstalledPackages: []string{"a-1.noarch"}}, opts),
		inventory.ReasonUnparsablePackage)
	for name, p := range map[string]*inventory.SystemProfile{
		"valid": {InstalledPackages: []string{"a-1-1.noarch"}},
		"empty": {}, // stored, nothing to evaluate
		"nil":   nil,
	} {
		if err := inventory.ValidateSystemProfile(p, opts); err != nil {
			t.Errorf("%s profile: %v", name, err)
		}
	}
}

// An upload's time may be up to MaxFutureSkew ahead of the clock, not a
// nanosecond more; any time behind the clock passes, and without a bound
// (0) any time does.
func TestCheckEventTime(t *testing.T) {
	now := time.Date(2026, 12, 4, 12, 0, 0, 0, time.UTC)
	opts := inventory.DefaultValidationOptions()
	if opts.MaxFutureSkew <= 0 {
		t.Fatal("the default options bound no future skew")
	}
	for _, at := range []time.Time{now.AddDate(-5, 0, 0), now, now.Add(opts.MaxFutureSkew)} {
		if err := inventory.CheckEventTime(at, now, opts); err != nil {
			t.Errorf("%v, %v after the clock: %v", at, at.Sub(now), err)
		}
	}
	for _, at := range []time.Time{now.Add(opts.MaxFutureSkew + time.Nanosecond), now.AddDate(100, 0, 0)} {
		requireRejected(t, fmt.Sprintf("%v after the clock", at.Sub(now)), nil, inventory.CheckEventTime(at, now, opts), inventory.ReasonFutureTimestamp)
	}
	unbounded := opts
	unbounded.MaxFutureSkew = 0
	if err := inventory.CheckEventTime(now.AddDate(100, 0, 0), now, unbounded); err != nil {
		t.Errorf("no bound, a century ahead: %v", err)
	}
}
