package actors_test

import (
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/patchflow/patchflow/actors"
	"github.com/patchflow/patchflow/messages"
)

// The fingerprint covers a record's headers: a log rewritten with the same
// key, value and timestamp at an offset but other headers (another trace,
// another tenant, a retry count) holds another record there, and the
// commit metadata must not be resumed from. Headers are length-prefixed and
// counted, so moving bytes between a header's key and value, or between two
// headers, changes the fingerprint too.
func TestFingerprintCoversHeaders(t *testing.T) {
	at := timestamppb.New(time.UnixMilli(1_700_000_000_123))
	record := func(headers ...string) *messages.Record {
		r := &messages.Record{Topic: "events", Offset: 7, Key: []byte("host-7"), Value: []byte("v1"), Timestamp: at}
		for i := 0; i+1 < len(headers); i += 2 {
			r.Headers = append(r.Headers, &messages.Header{Key: []byte(headers[i]), Value: []byte(headers[i+1])})
		}
		return r
	}
	base := record("trace", "abc", "tenant", "x")
	if got, want := actors.Fingerprint(proto.Clone(base).(*messages.Record)), actors.Fingerprint(base); got != want {
		t.Fatalf("a copy of the record fingerprints %08x, the record %08x", got, want)
	}
	seen := map[uint32]string{actors.Fingerprint(base): "the record"}
	for _, tc := range []struct {
		name string
		r    *messages.Record
	}{
		{"no headers", record()},
		{"a header's value differs", record("trace", "abd", "tenant", "x")},
		{"a header's key differs", record("trace", "abc", "tenant2", "x")},
		{"the headers in another order", record("tenant", "x", "trace", "abc")},
		{"a header more", record("trace", "abc", "tenant", "x", "retry", "1")},
		{"a header less", record("trace", "abc")},
		{"an empty header more", record("trace", "abc", "tenant", "x", "", "")},
		{"a byte moved from a header's value to its key", record("tracea", "bc", "tenant", "x")},
		{"a byte moved from one header to the next", record("trace", "ab", "ctenant", "x")},
	} {
		if tc.r.GetTimestamp() != at || string(tc.r.GetKey()) != "host-7" || string(tc.r.GetValue()) != "v1" {
			t.Fatalf("%s: the case differs in more than its headers", tc.name)
		}
		fp := actors.Fingerprint(tc.r)
		if other, ok := seen[fp]; ok {
			t.Errorf("%s: fingerprint %08x, the same as %s", tc.name, fp, other)
		}
		seen[fp] = tc.name
	}
}
