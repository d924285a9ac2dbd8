package inventory_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/patchflow/patchflow/inventory"
	"github.com/patchflow/patchflow/messages"
)

// The fast decoding path must be invisible: these tests compare it with
// json.Unmarshal, which decoded every event before it.

// edgeCases are valid and broken events around what the fast path reads:
// each is a seed of the fuzz test, and TestScanMatchesUnmarshal runs them
// all on every test run.
func edgeCases(tb testing.TB) map[string][]byte {
	const id = `"` + testHostID + `"`
	deep := func(n int) string { return strings.Repeat("[", n) + strings.Repeat("]", n) }
	// event is a created event with the fields given added; the profile
	// has one package unless profileFields give the packages.
	event := func(hostFields, profileFields string) []byte {
		packages := `"installed_packages":["kernel-0:4.18.0-305.el8.x86_64"]`
		if strings.Contains(profileFields, `"installed_packages"`) {
			packages = `"arch":"x86_64"`
		}
		return []byte(`{"type":"created","timestamp":"2024-05-01T10:00:00Z","host":{"id":` + id + `,"org_id":"o","reporter":"puptoo"` +
			hostFields + `,"system_profile":{` + packages + profileFields + `}}}`)
	}
	cases := map[string][]byte{
		"created":                  encode(tb, createdEvent()),
		"updated":                  encode(tb, updatedEvent()),
		"delete":                   encode(tb, deleteEvent()),
		"id only":                  encode(tb, idOnlyEvent()),
		"realistic":                realisticEvent(tb),
		"indented":                 indent(tb, encode(tb, createdEvent())),
		"truncated":                encode(tb, createdEvent())[:300],
		"empty":                    nil,
		"white space only":         []byte(" \t\r\n"),
		"null":                     []byte(`null`),
		"null with spaces":         []byte(" null\n"),
		"empty object":             []byte(`{}`),
		"array":                    []byte(`[]`),
		"string":                   []byte(`"created"`),
		"number":                   []byte(`1`),
		"two values":               []byte(`{} {}`),
		"trailing garbage":         []byte(`{"type":"delete"} x`),
		"trailing comma":           []byte(`{"type":"delete",}`),
		"leading comma":            []byte(`{,"type":"delete"}`),
		"missing colon":            []byte(`{"type" "delete"}`),
		"unquoted key":             []byte(`{type:"delete"}`),
		"single quotes":            []byte(`{'type':'delete'}`),
		"byte order mark":          append([]byte("\xef\xbb\xbf"), encode(tb, deleteEvent())...),
		"control in string":        []byte("{\"type\":\"del\x01ete\"}"),
		"bad escape":               []byte(`{"type":"\x"}`),
		"short unicode escape":     []byte(`{"type":"\u12"}`),
		"unterminated string":      []byte(`{"type":"delete`),
		"unknown fields":           event(`,"x":{"deep":[1,"two",null,{"y":1.5e-3}]},"facts":[{"a":true,"b":false}]`, `,"cpu_flags":["a","b"],"z":-0.0E+1`),
		"nulls":                    []byte(`{"type":null,"timestamp":null,"id":null,"org_id":null,"host":null,"platform_metadata":null,"metadata":null}`),
		"null host fields":         event(`,"display_name":null,"stale_timestamp":null,"culled_timestamp":null,"per_reporter_staleness":null,"tags":null,"groups":null`, `,"host_type":null,"yum_repos":null,"dnf_modules":null,"rhsm":null,"operating_system":null`),
		"null elements":            event(`,"groups":[null,{"id":null,"name":"g"}],"per_reporter_staleness":{"puptoo":null,"x":{"last_check_in":null}}`, `,"yum_repos":[null,{"id":"r","enabled":null}],"dnf_modules":[null],"operating_system":{"name":null,"major":null,"minor":null}`),
		"null package":             event(``, `,"installed_packages":[null]`),
		"empty lists":              event(`,"groups":[],"per_reporter_staleness":{},"tags":[]`, `,"installed_packages":[],"yum_repos":[],"dnf_modules":[]`),
		"tags of every kind":       event(`,"tags":{"a": [1, 2.5, "x", true, null], "b" : { }}`, ``),
		"tags with white space":    event(`,"tags" : [ 1 , {"a" : 2} ] , "x":1`, ``),
		"tags a string with space": event(`,"tags":  "x"  `, ``),
		"tags a string":            event(`,"tags":"x"`, ``),
		"tags a number":            event(`,"tags":-12.5e3`, ``),
		"repeated type":            []byte(`{"type":"created","type":"delete","id":` + id + `,"org_id":"o"}`),
		"repeated host":            []byte(`{"type":"created","host":{"id":` + id + `},"host":{"org_id":"o"}}`),
		"repeated packages":        event(``, `,"installed_packages":["a-1-1.x","b-1-1.x"]`),
		"repeated reporter":        event(`,"per_reporter_staleness":{"puptoo":{"last_check_in":"2024-01-01T00:00:00Z"},"puptoo":{}}`, ``),
		"upper case key":           []byte(`{"TYPE":"delete","id":` + id + `,"org_id":"o"}`),
		"mixed case key":           []byte(`{"Type":"delete","Id":` + id + `,"Org_Id":"o"}`),
		"key folding to s":         []byte(`{"type":"created","ho\u017ft":{"id":` + id + `,"org_id":"o"}}`),
		"key folding to k":         event(`,"per_reporter_staleness":{"puptoo":{"last_chec\u212a_in":"2024-01-01T00:00:00Z"}}`, ``),
		"escaped key":              []byte(`{"\u0074ype":"delete","id":` + id + `,"org_id":"o"}`),
		"escaped unknown key":      []byte(`{"type":"delete","\u0078":1,"id":` + id + `,"org_id":"o"}`),
		"escapes in values":        event(`,"display_name":"caf\u00e9 \ud83d\ude00 \ud800 \/\b\f\n\r\t\"\\"`, `,"arch":"\u0078\u0038\u0036_64"`),
		"non-ASCII values":         event(`,"display_name":"café ☕"`, `,"arch":"ẋ86"`),
		"invalid UTF-8 value":      event(",\"display_name\":\"\xff\xfe\xc3\"", ``),
		"invalid UTF-8 skipped":    event(",\"junk\":\"\xff\xfe\"", ``),
		"invalid UTF-8 key":        event(",\"\xffid\":1", ``),
		"invalid UTF-8 map key":    event(",\"per_reporter_staleness\":{\"\xff\":{\"last_check_in\":\"2024-01-01T00:00:00Z\"}}", ``),
		"escaped map key":          event(`,"per_reporter_staleness":{"pup\u0074oo":{"last_check_in":"2024-01-01T00:00:00Z"}}`, ``),
		"surrogate in UTF-8":       event(",\"display_name\":\"\xed\xa0\x80\"", ``),
		"encoded U+FFFD":           event(",\"display_name\":\"\xef\xbf\xbd\"", ``),
		"huge major":               event(``, `,"operating_system":{"major":123456789012345678901234567890}`),
		"max int major":            event(``, `,"operating_system":{"major":9223372036854775807,"minor":-9223372036854775808}`),
		"major past int":           event(``, `,"operating_system":{"major":9223372036854775808}`),
		"negative zero major":      event(``, `,"operating_system":{"major":-0}`),
		"fractional major":         event(``, `,"operating_system":{"major":8.0}`),
		"exponent major":           event(``, `,"operating_system":{"major":8e0}`),
		"major a string":           event(``, `,"operating_system":{"major":"8"}`),
		"leading zero":             event(``, `,"operating_system":{"major":08}`),
		"huge skipped number":      event(`,"x":1e999999`, `,"y":-123456789012345678901234567890.5`),
		"bad skipped numbers":      event(`,"x":1.`, ``),
		"bad exponent":             event(`,"x":1e+`, ``),
		"plus sign":                event(`,"x":+1`, ``),
		"enabled a string":         event(``, `,"yum_repos":[{"id":"r","enabled":"true"}]`),
		"enabled a number":         event(``, `,"yum_repos":[{"id":"r","enabled":1}]`),
		"host a string":            []byte(`{"type":"created","host":"x"}`),
		"packages a string":        event(``, `,"installed_packages":"kernel"`),
		"package a number":         event(``, `,"installed_packages":[1]`),
		"repos an object":          event(``, `,"yum_repos":{}`),
		"repo a string":            event(``, `,"yum_repos":["r"]`),
		"staleness an array":       event(`,"per_reporter_staleness":[]`, ``),
		"staleness entry a list":   event(`,"per_reporter_staleness":{"puptoo":[]}`, ``),
		"profile an array":         []byte(`{"type":"created","host":{"id":` + id + `,"org_id":"o","reporter":"puptoo","system_profile":[]}}`),
		"bad literal":              event(`,"x":nul`, ``),
		"true prefix":              event(`,"x":truex`, ``),
		"deep junk":                event(`,"x":`+deep(500), ``),
		"junk past max depth":      event(`,"x":`+deep(1001), ``),
		"junk past json's depth":   event(`,"x":`+deep(10001), ``),
		"unclosed deep junk":       event(`,"x":`+strings.Repeat("[", 300), ``),
		"mismatched brackets":      event(`,"x":[{]}`, ``),
		"object as array":          event(`,"x":{1,2}`, ``),
		"white space everywhere":   []byte(" {\n\t\"type\" :\r \"delete\" , \"id\"\t:" + id + " ,\"org_id\": \"o\"\n}\n"),
		"bad timestamp":            []byte(`{"type":"delete","id":` + id + `,"org_id":"o","timestamp":"yesterday"}`),
		"several bad check-ins":    event(`,"per_reporter_staleness":{"b":{"last_check_in":"x"},"a":{"last_check_in":"y"},"c":{"last_check_in":"z"}}`, ``),
		"package with white space": event(``, `,"installed_packages":["kernel-0:4.18.0-305.el8.x86_64\u00a0","a\u2003b-1-1.x"]`),
	}
	return cases
}

func indent(tb testing.TB, data []byte) []byte {
	var b bytes.Buffer
	if err := json.Indent(&b, data, "", "\t"); err != nil {
		tb.Fatal(err)
	}
	return b.Bytes()
}

// corpus returns the inputs saved under testdata/fuzz/<target>, written in
// the fuzzing engine's format ("go test fuzz v1" and one []byte("...")).
func corpus(tb testing.TB, target string) map[string][]byte {
	files, err := filepath.Glob(filepath.Join("testdata", "fuzz", target, "*"))
	if err != nil {
		tb.Fatal(err)
	}
	out := map[string][]byte{}
	for _, file := range files {
		b, err := os.ReadFile(file)
		if err != nil {
			tb.Fatal(err)
		}
		lines := strings.SplitN(strings.TrimSpace(string(b)), "\n", 2)
		if len(lines) != 2 || lines[0] != "go test fuzz v1" {
			tb.Fatalf("%s: not a fuzz corpus file", file)
		}
		quoted, ok := strings.CutPrefix(lines[1], "[]byte(")
		quoted, ok2 := strings.CutSuffix(quoted, ")")
		s, err := strconv.Unquote(quoted)
		if !ok || !ok2 || err != nil {
			tb.Fatalf("%s: %q is not a []byte literal", file, lines[1])
		}
		out[target+"/"+filepath.Base(file)] = []byte(s)
	}
	return out
}

// seeds are the edge cases and the corpus of FuzzDecodeInventoryEvent.
func seeds(tb testing.TB) map[string][]byte {
	all := edgeCases(tb)
	for name, data := range corpus(tb, "FuzzDecodeInventoryEvent") {
		all[name] = data
	}
	return all
}

// checkSameDecoding fails the test unless DecodeInventoryEvent and
// DecodeSystemProfile answer on data exactly as they did with
// json.Unmarshal alone, and the fast paths, when they take data, decode
// what json.Unmarshal decodes.
func checkSameDecoding(t *testing.T, name string, data []byte) {
	t.Helper()
	if _, err := inventory.ScanEvent(data); err != nil {
		t.Errorf("%s: event: %v\ninput %q", name, err, data)
	}
	if _, err := inventory.ScanProfile(data); err != nil {
		t.Errorf("%s: profile: %v\ninput %q", name, err, data)
	}
	opts := inventory.DefaultValidationOptions()
	got, gotErr := inventory.DecodeInventoryEvent(data, opts)
	want, wantErr := inventory.LegacyDecodeInventoryEvent(data, opts)
	if !sameError(gotErr, wantErr) || !reflect.DeepEqual(got, want) {
		t.Errorf("%s: DecodeInventoryEvent = %+v, %v\nwith json.Unmarshal alone %+v, %v\ninput %q", name, got, gotErr, want, wantErr, data)
	}
}

// sameError: equal messages, classes, reasons and skip reasons.
func sameError(a, b error) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	var va, vb *messages.ValidationError
	ra, sa := messages.SkipReasonOf(a)
	rb, sb := messages.SkipReasonOf(b)
	return a.Error() == b.Error() && messages.ClassOf(a) == messages.ClassOf(b) &&
		errors.As(a, &va) == errors.As(b, &vb) && (va == nil || *va == *vb) && ra == rb && sa == sb
}

func TestScanMatchesUnmarshal(t *testing.T) {
	for name, data := range seeds(t) {
		checkSameDecoding(t, name, data)
	}
}

// FuzzScanMatchesUnmarshal is the differential test of the fast path:
// whatever the input, DecodeInventoryEvent gives the event or the error
// json.Unmarshal alone gave, and the fast path never takes an input
// json.Unmarshal refuses or decodes differently.
func FuzzScanMatchesUnmarshal(f *testing.F) {
	for _, data := range seeds(f) {
		f.Add(data)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		checkSameDecoding(t, "fuzzed", data)
	})
}

// TestScanTakesOrdinaryEvents guards the speed: the fast path must take
// the events producers send, not leave them to json.Unmarshal, and must
// leave the unusual ones to it.
func TestScanTakesOrdinaryEvents(t *testing.T) {
	cases := edgeCases(t)
	for _, name := range []string{"created", "updated", "delete", "id only", "realistic", "indented", "null", "unknown fields",
		"nulls", "null host fields", "null elements", "empty lists", "tags of every kind", "tags with white space", "escapes in values", "non-ASCII values",
		"invalid UTF-8 value", "invalid UTF-8 skipped", "escaped key", "escaped map key", "huge skipped number", "deep junk",
		"white space everywhere", "max int major", "negative zero major", "bad timestamp", "package with white space"} {
		if scanned, _ := inventory.ScanEvent(cases[name]); !scanned {
			t.Errorf("%s: left to json.Unmarshal", name)
		}
	}
	for _, name := range []string{"repeated type", "repeated host", "upper case key", "mixed case key", "key folding to s",
		"key folding to k", "junk past max depth", "huge major", "major past int", "fractional major", "truncated", "byte order mark"} {
		if scanned, _ := inventory.ScanEvent(cases[name]); scanned {
			t.Errorf("%s: taken by the fast path", name)
		}
	}
	profile := encode(t, profileOf(createdEvent()))
	if scanned, _ := inventory.ScanProfile(profile); !scanned {
		t.Error("a system profile was left to json.Unmarshal")
	}
	if scanned, _ := inventory.ScanProfile([]byte("null")); !scanned {
		t.Error("a null system profile was left to json.Unmarshal")
	}
}

// TestDecodedStringsOwnTheirMemory: the event must not change when the
// record's buffer is reused.
func TestDecodedStringsOwnTheirMemory(t *testing.T) {
	data := encode(t, createdEvent())
	ev := decode(t, data)
	want := fmt.Sprintf("%+v %+v %s", *ev.Host, *ev.Host.SystemProfile, ev.Host.Tags)
	for i := range data {
		data[i] = 'x'
	}
	if got := fmt.Sprintf("%+v %+v %s", *ev.Host, *ev.Host.SystemProfile, ev.Host.Tags); got != want {
		t.Errorf("the event changed with its input:\n%s\nwas\n%s", got, want)
	}
}

func BenchmarkDecodeInventoryEventBeside(b *testing.B) {
	data := realisticEvent(b)
	opts := inventory.DefaultValidationOptions()
	for _, c := range []struct {
		name   string
		decode func([]byte, inventory.ValidationOptions) (*inventory.InventoryEvent, error)
	}{{"unmarshal", inventory.LegacyDecodeInventoryEvent}, {"scan", inventory.DecodeInventoryEvent}} {
		b.Run(c.name, func(b *testing.B) {
			b.SetBytes(int64(len(data)))
			b.ReportAllocs()
			defer measureCPU(b)()
			for b.Loop() {
				if _, err := c.decode(data, opts); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// measureCPU reports, beside the wall-clock ns/op that the machine's other
// work inflates, the CPU time the process spent per iteration (garbage
// collection included): call it before the loop and defer what it returns.
func measureCPU(b *testing.B) func() {
	start := processCPU(b)
	return func() { b.ReportMetric(float64(processCPU(b)-start)/float64(b.N), "cpu-ns/op") }
}

func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
