package actors

import (
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/IBM/sarama"
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
// committed offset, when sarama began the claim at it (initial); otherwise
// where consumption begins ("oldest" or "newest": the group has no commit
// in the log's range); the high watermark. sarama's negative sentinels are
// never logged as offsets.
func claimStartAttrs(initial, highWatermark int64) []any {
	if initial >= 0 {
		return []any{"committed", initial, "high_watermark", highWatermark}
	}
	policy := "oldest"
	if initial == sarama.OffsetNewest {
		policy = "newest"
	}
	return []any{"starts_at", policy, "high_watermark", highWatermark}
}
