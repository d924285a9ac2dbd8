package evaluation

import "github.com/patchflow/patchflow/consumer"

// What handling one event holds in memory, as multiples of its wire size:
// the record itself, the event decoded, the upload built from it, the VMaaS
// request and its JSON. TestRecordBytesBoundsTheLiveSet measures the live
// set of those stages on the shapes that weigh most per byte (tens of
// thousands of packages of a few bytes each) and holds RecordBytes above it.
// VMaaS's and inventory's answers are not in it: the clients bound each
// answer and charge it to an answer budget of their own (clients.AnswerBudget).
const (
	decodedPerWireByte = 12
	handlingOverhead   = 64 << 10
)

// RecordBytes implements consumer.RecordSizer: the most memory handling r
// holds. An event over the validation's MaxMessageBytes is refused unparsed
// and weighs its bytes and its dead letter's copy of them.
func (h *Handler) RecordBytes(r *consumer.Record) int64 {
	wire := int64(len(r.Key) + len(r.Value))
	for _, hd := range r.Headers {
		wire += consumer.HeaderOverhead + int64(len(hd.Key)+len(hd.Value))
	}
	if max := h.validation.MaxMessageBytes; max > 0 && len(r.Value) > max {
		return 3*wire + handlingOverhead
	}
	return wire + decodedPerWireByte*int64(len(r.Value)) + handlingOverhead
}

var _ consumer.RecordSizer = (*Handler)(nil)
