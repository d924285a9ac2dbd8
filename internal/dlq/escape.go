package dlq

import (
	"fmt"
	"strconv"

	"github.com/patchflow/patchflow/internal/safetext"
)

// format is e as Run prints it (no newline): e.JSON or e.Line, with what a
// terminal would act on escaped (internal/safetext). Anyone who can write
// to the dead-letter topic, or to the source topic the envelopes quote,
// chooses these bytes; the person reading them must not have their
// terminal driven or their line reordered by them. In JSON every such rune
// becomes a \u escape, so a JSON reader still reads the original strings.
// A line quotes what a record chooses (strconv.Quote escapes them; a topic
// Kafka could not name, a forged envelope's, is quoted too: shownTopic),
// and safetext.Text writes any left unquoted as Go escapes them.
func format(e Entry, json, value bool) ([]byte, error) {
	if json {
		b, err := e.JSON(value)
		if err != nil {
			return nil, fmt.Errorf("encode dead letter %d/%d: %w", e.Partition, e.Offset, err)
		}
		return safetext.JSON(b), nil
	}
	return []byte(safetext.Text(e.Line(value))), nil
}

// shownTopic is a topic as Line shows it: as it is when Kafka could name a
// topic so (1 to 249 of [a-zA-Z0-9._-], as every envelope the listener
// writes names its source), else quoted, so that a forged envelope's topic
// cannot pass for more fields of the line.
func shownTopic(t string) string {
	if len(t) == 0 || len(t) > 249 {
		return strconv.Quote(t)
	}
	for i := 0; i < len(t); i++ {
		c := t[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '.' || c == '_' || c == '-') {
			return strconv.Quote(t)
		}
	}
	return t
}
