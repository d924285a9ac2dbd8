package inventory_test

import (
	"strings"
	"testing"

	"pgregory.net/rapid"

	"github.com/patchflow/patchflow/inventory"
)

// quotedEvents are events with one field made of fill, each refused with
// an error (or skipped with a detail) that names the field's value.
var quotedEvents = map[string]func(fill string) string{
	"epoch not a number": func(fill string) string {
		return profileEvent(`"installed_packages":["kernel-` + fill + `:4.18.0-305.el8.x86_64"]`)
	},
	"epoch too large": func(fill string) string {
		return profileEvent(`"installed_packages":["kernel-1` + digits(fill) + `:4.18.0-305.el8.x86_64"]`)
	},
	"arch": func(fill string) string {
		return profileEvent(`"installed_packages":["kernel-4.18.0-305.el8.x86-` + fill + `"]`)
	},
	"package": func(fill string) string { return profileEvent(`"installed_packages":["` + fill + `"]`) },
	"number for an int": func(fill string) string {
		return profileEvent(`"operating_system":{"name":"RHEL","major":1.` + digits(fill) + `}`)
	},
	"number for a text": func(fill string) string { return profileEvent(`"arch":1` + digits(fill)) },
	"type": func(fill string) string {
		return `{"type":"` + fill + `","host":{"id":"8f3a1c2e-5b6d-4e7f-9a0b-1c2d3e4f5a6b","org_id":"o"}}`
	},
	"timestamp": func(fill string) string {
		return `{"type":"delete","id":"8f3a1c2e-5b6d-4e7f-9a0b-1c2d3e4f5a6b","org_id":"o","timestamp":"` + fill + `"}`
	},
	"host id":  func(fill string) string { return `{"type":"delete","id":"` + fill + `","org_id":"o"}` },
	"reporter": func(fill string) string { return hostEvent(`"reporter":"` + fill + `","system_profile":{}`) },
}

func hostEvent(fields string) string {
	return `{"type":"created","timestamp":"2024-05-01T10:00:00Z","host":{"id":"8f3a1c2e-5b6d-4e7f-9a0b-1c2d3e4f5a6b","org_id":"o",` + fields + `}}`
}

func profileEvent(fields string) string {
	return hostEvent(`"reporter":"puptoo","system_profile":{` + fields + `}`)
}

// digits maps fill to decimal digits, one for each of its bytes.
func digits(fill string) string {
	b := []byte(fill)
	for i := range b {
		b[i] = '0' + b[i]%10
	}
	return string(b)
}

// An error (or a skip's detail) repeats at most 64 bytes of any one field
// of the input, however long the field: an error travels in logs, the
// status page and the dead-letter envelope (twice: error and history), and
// the field can be nearly as long as the record. A package's epoch, its
// arch, and a number decoded into a typed field were quoted whole.
func TestErrorsQuoteAtMost64BytesOfTheInput(t *testing.T) {
	names := make([]string, 0, len(quotedEvents))
	for name := range quotedEvents {
		names = append(names, name)
	}
	opts := inventory.DefaultValidationOptions()
	opts.MaxMessageBytes = 0
	rapid.Check(t, func(t *rapid.T) {
		name := rapid.SampledFrom(names).Draw(t, "field")
		fill := rapid.StringMatching(`[a-zA-Z]{65,200}`).Draw(t, "fill")
		fill += strings.Repeat(fill, rapid.IntRange(0, 3000).Draw(t, "repeats"))
		_, err := inventory.DecodeInventoryEvent([]byte(quotedEvents[name](fill)), opts)
		if err == nil {
			t.Fatalf("%s of %d bytes: no error", name, len(fill))
		}
		text := err.Error()
		if strings.Contains(text, fill[:65]) || strings.Contains(text, digits(fill)[:65]) {
			t.Fatalf("%s of %d bytes: the error quotes more than 64 bytes of it (%d bytes: %.200q...)", name, len(fill), len(text), text)
		}
		if len(text) > 1024 {
			t.Fatalf("%s of %d bytes: an error of %d bytes", name, len(fill), len(text))
		}
	})
}
