package effects

import (
	"fmt"
	"strings"
	"testing"
)

func status(request, st string) Record {
	return Record{Value: []byte(fmt.Sprintf(`{"request_id":%q,"status":%q}`, request, st)), EventID: request + st}
}

// The payload-status rule: received and one final status per upload, the
// final's last copy after the received's; a duplicate of both is fine.
func TestPayloadStatusRule(t *testing.T) {
	for name, c := range map[string]struct {
		read    []Record
		uploads int
		problem string
	}{
		"complete":               {[]Record{status("a", "received"), status("a", "success")}, 1, ""},
		"an error":               {[]Record{status("a", "received"), status("a", "error")}, 1, ""},
		"redelivered":            {[]Record{status("a", "received"), status("a", "success"), status("a", "received"), status("a", "success")}, 1, ""},
		"no final":               {[]Record{status("a", "received")}, 0, "incomplete"},
		"no received":            {[]Record{status("a", "success")}, 0, "incomplete"},
		"both":                   {[]Record{status("a", "received"), status("a", "success"), status("a", "error")}, 0, "both success and error"},
		"final before":           {[]Record{status("a", "success"), status("a", "received")}, 0, "out of order"},
		"last copy out of order": {[]Record{status("a", "received"), status("a", "success"), status("a", "received")}, 0, "out of order"},
	} {
		var r Report
		checkPayloadStatus(c.read, &r)
		if r.Uploads != c.uploads {
			t.Errorf("%s: %d uploads complete, want %d", name, r.Uploads, c.uploads)
		}
		got := strings.Join(r.Problems, "; ")
		if (c.problem == "") != (got == "") || !strings.Contains(got, c.problem) {
			t.Errorf("%s: problems %q, want one with %q", name, got, c.problem)
		}
	}
}
