package listener

import (
	"bytes"
	"io"
	"log/slog"
	"os"

	"github.com/patchflow/patchflow/internal/safetext"
)

// NewLogger returns the process logger: JSON for machines, text on a
// terminal (format auto), at level. Either way a time.Duration is written
// as its string ("1.5s"), not as slog's JSON integer of nanoseconds, and no
// control character or bidirectional control of what is logged (a
// record's key, an error quoting its input) reaches the log raw: log/slog
// escapes only the C0 controls in JSON (C1 controls such as CSI U+009B, DEL
// and the bidi overrides pass as they are) and in text quotes a value
// holding any control but DEL, so its output goes through internal/safetext.
func NewLogger(w io.Writer, level, format string) *slog.Logger {
	var lv slog.Level
	_ = lv.UnmarshalText([]byte(level))
	opts := &slog.HandlerOptions{Level: lv, ReplaceAttr: durationsAsStrings}
	if format == "auto" {
		format = "json"
		if f, ok := w.(*os.File); ok && isTerminal(f) {
			format = "text"
		}
	}
	if format == "text" {
		return slog.New(slog.NewTextHandler(escapingWriter{w: w}, opts))
	}
	return slog.New(slog.NewJSONHandler(escapingWriter{w: w, json: true}, opts))
}

// escapingWriter writes log records through safetext: JSON ones with
// safetext.JSON, which a JSON reader reads as the same values; text ones
// with safetext.Text, but for the newline that ends each. slog's handlers
// write each record whole, in one Write, so a rune is never split between
// two writes.
type escapingWriter struct {
	w    io.Writer
	json bool
}

func (e escapingWriter) Write(p []byte) (int, error) {
	var out []byte
	switch line, ended := bytes.CutSuffix(p, []byte("\n")); {
	case e.json:
		out = safetext.JSON(p)
	case ended:
		// An escape is longer than what it stands for: the same length
		// is the same line.
		if t := safetext.Text(string(line)); len(t) != len(line) {
			out = append([]byte(t), '\n')
		} else {
			out = p
		}
	default:
		out = []byte(safetext.Text(string(p)))
	}
	if _, err := e.w.Write(out); err != nil {
		return 0, err
	}
	return len(p), nil
}

// durationsAsStrings is NewLogger's slog.HandlerOptions.ReplaceAttr.
func durationsAsStrings(_ []string, a slog.Attr) slog.Attr {
	if a.Value.Kind() == slog.KindDuration {
		a.Value = slog.StringValue(a.Value.Duration().String())
	}
	return a
}

func isTerminal(f *os.File) bool {
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}
