package inventory

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"unicode"

	"github.com/patchflow/patchflow/internal/jsonscan"
	"github.com/patchflow/patchflow/messages"
)

// Hooks for the tests of package messages_test.

// LegacyDecodeInventoryEvent is DecodeInventoryEvent as it was before the
// fast paths: json.Unmarshal decodes every event, and packages are parsed
// by LegacyParseNEVRA. The differential tests and the benchmarks compare
// the two.
func LegacyDecodeInventoryEvent(data []byte, opts ValidationOptions) (*InventoryEvent, error) {
	if opts.MaxMessageBytes > 0 && len(data) > opts.MaxMessageBytes {
		return nil, messages.Invalid(ReasonMessageTooLarge, fmt.Sprintf("%d bytes, limit %d", len(data), opts.MaxMessageBytes))
	}
	var w wireEvent
	if err := json.Unmarshal(data, &w); err != nil {
		return nil, messages.Invalid(ReasonMalformedJSON, describeJSONError(err))
	}
	ev, err := w.event()
	if err != nil {
		return nil, err
	}
	if err := legacyValidate(ev, opts); err != nil {
		return nil, err
	}
	return ev, nil
}

// legacyValidate is validateEvent with the packages parsed as before: a
// package that ParseNEVRA and LegacyParseNEVRA parse differently is refused
// here with a detail of its own, which the differential tests see.
func legacyValidate(ev *InventoryEvent, opts ValidationOptions) error {
	if ev.Host != nil && ev.Host.SystemProfile != nil && ev.Type != EventDelete {
		for i, pkg := range ev.Host.SystemProfile.InstalledPackages {
			got, gotErr := ParseNEVRA(pkg)
			want, wantErr := LegacyParseNEVRA(pkg)
			if got != want || fmt.Sprint(gotErr) != fmt.Sprint(wantErr) {
				return messages.Invalid(ReasonUnparsablePackage, fmt.Sprintf("installed_packages[%d]: parsed otherwise than before", i))
			}
		}
	}
	return validateEvent(ev, opts)
}

// ScanEvent runs the fast path alone on data and json.Unmarshal beside it.
// It reports whether the fast path took the event, and an error if it took
// one json.Unmarshal refuses or decodes to other values.
func ScanEvent(data []byte) (scanned bool, mismatch error) {
	return compareScan(data, scanEvent)
}

// ScanProfile is ScanEvent for DecodeSystemProfile's fast path.
func ScanProfile(data []byte) (scanned bool, mismatch error) {
	return compareScan(data, func(s *jsonscan.Scanner, w *wireSystemProfile) {
		if !s.Null() {
			scanProfileObject(s, w)
		}
	})
}

func compareScan[T any](data []byte, scan func(*jsonscan.Scanner, *T)) (bool, error) {
	var fast, slow T
	s := jsonscan.New(data)
	scan(s, &fast)
	if !s.End() {
		return false, nil
	}
	if err := json.Unmarshal(data, &slow); err != nil {
		return true, fmt.Errorf("the fast path took what json.Unmarshal refuses: %v", err)
	}
	if !reflect.DeepEqual(fast, slow) {
		return true, fmt.Errorf("the fast path decoded\n%s\njson.Unmarshal\n%s", dump(fast), dump(slow))
	}
	return true, nil
}

func dump(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprintf("%#v", v)
	}
	return fmt.Sprintf("%s (%#v)", b, v)
}

// LegacyParseNEVRA is ParseNEVRA as it was, part by part with the strings
// functions, for the differential test of the one-pass version.
func LegacyParseNEVRA(s string) (NEVRA, error) {
	var n NEVRA
	if s == "" {
		return n, nevraError(s, "empty string")
	}
	if strings.IndexFunc(s, unicode.IsSpace) >= 0 {
		return n, nevraError(s, "contains white space")
	}

	dot := strings.LastIndexByte(s, '.')
	if dot < 0 {
		return n, nevraError(s, "missing arch (no '.')")
	}
	rest, arch := s[:dot], s[dot+1:]
	if arch == "" {
		return n, nevraError(s, "empty arch")
	}
	if strings.ContainsAny(arch, "-:") {
		// Without an arch the last dot falls inside version or release.
		return n, nevraError(s, fmt.Sprintf("missing arch (%q after the last '.' is not an arch)", arch))
	}

	dash := strings.LastIndexByte(rest, '-')
	if dash < 0 {
		return n, nevraError(s, "missing release (no '-' before the arch)")
	}
	rest, release := rest[:dash], rest[dash+1:]
	if release == "" {
		return n, nevraError(s, "empty release")
	}

	dash = strings.LastIndexByte(rest, '-')
	if dash < 0 {
		return n, nevraError(s, "missing version (need name-version-release)")
	}
	name, version := rest[:dash], rest[dash+1:]

	epoch, hasEpoch := "", false
	if i := strings.IndexByte(version, ':'); i >= 0 {
		epoch, version, hasEpoch = version[:i], version[i+1:], true
	}
	if i := strings.IndexByte(name, ':'); i >= 0 {
		if hasEpoch {
			return n, nevraError(s, "more than one epoch")
		}
		epoch, name, hasEpoch = name[:i], name[i+1:], true
	}
	switch {
	case name == "":
		return n, nevraError(s, "empty name")
	case version == "":
		return n, nevraError(s, "empty version")
	case strings.ContainsRune(name, ':'), strings.ContainsRune(version, ':'):
		return n, nevraError(s, "more than one epoch")
	case strings.ContainsRune(release, ':'):
		return n, nevraError(s, "':' in release")
	}
	if hasEpoch {
		e, err := parseEpoch(epoch)
		if err != nil {
			return n, nevraError(s, err.Error())
		}
		n.Epoch = e
	}
	n.Name, n.Version, n.Release, n.Arch = name, version, release, arch
	return n, nil
}
