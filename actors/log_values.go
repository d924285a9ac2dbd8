package actors

import (
	"maps"
	"slices"
	"strconv"
	"strings"
)

// formatClaims renders a session's claims for a log line, topics and
// partitions in order: "events:0,1,2" ("a:0 b:3" for several topics;
// "none" when empty), not Go's map syntax.
func formatClaims(claims map[string][]int32) string {
	if len(claims) == 0 {
		return "none"
	}
	var b strings.Builder
	for i, topic := range slices.Sorted(maps.Keys(claims)) {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(topic)
		b.WriteByte(':')
		for j, p := range slices.Sorted(slices.Values(claims[topic])) {
			if j > 0 {
				b.WriteByte(',')
			}
			b.WriteString(strconv.Itoa(int(p)))
		}
	}
	return b.String()
}

// claimStartAttrs are the "claim started" line's offsets: the group's
// committed offset, where the group has one; where consumption begins
// ("oldest" or "newest") when sarama did not begin at it; the high
// watermark. A value a key cannot have (sarama's negative sentinels) is
// never logged in its place.
func claimStartAttrs(committed, initial, highWatermark int64) []any {
	var out []any
	if committed >= 0 {
		out = append(out, "committed", committed)
	}
	if initial < 0 {
		out = append(out, "starts_at", startPolicy(initial))
	}
	return append(out, "high_watermark", highWatermark)
}
