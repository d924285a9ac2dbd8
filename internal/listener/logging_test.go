package listener_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"strings"
	"testing"
	"time"
	"unicode"
	"unicode/utf8"

	"pgregory.net/rapid"

	"github.com/patchflow/patchflow/actors"
	"github.com/patchflow/patchflow/consumer"
	"github.com/patchflow/patchflow/internal/listener"
	"github.com/patchflow/patchflow/internal/safetext"
	"github.com/patchflow/patchflow/messages"
)

// A duration is written as its string, in a group too, in JSON ("1.5s",
// not slog's integer of nanoseconds) as in text; other numbers stay numbers.
func TestNewLoggerWritesDurationsAsStrings(t *testing.T) {
	log := func(format string) string {
		var buf bytes.Buffer
		listener.NewLogger(&buf, "info", format).Info("drained", "drain", 1500*time.Millisecond,
			slog.Group("attempt", "timeout", 2*time.Second), "records", 3)
		return buf.String()
	}
	var line struct {
		Drain   any `json:"drain"`
		Attempt struct {
			Timeout any `json:"timeout"`
		} `json:"attempt"`
		Records any `json:"records"`
	}
	raw := log("json")
	if err := json.Unmarshal([]byte(raw), &line); err != nil {
		t.Fatal(err)
	}
	if line.Drain != "1.5s" || line.Attempt.Timeout != "2s" || line.Records != 3.0 {
		t.Fatalf("JSON: drain %#v, attempt.timeout %#v, records %#v; want \"1.5s\", \"2s\", 3:\n%s", line.Drain, line.Attempt.Timeout, line.Records, raw)
	}
	if text := log("text"); !strings.Contains(text, " drain=1.5s attempt.timeout=2s records=3") {
		t.Fatalf("text: %s", text)
	}
}

// hostile draws strings made to reach a terminal or a log viewer: C0 and
// C1 controls (ESC, CSI U+009B, OSC U+009D), DEL, bidi controls, the line
// separators and bytes that are not UTF-8, among ordinary text.
func hostile() *rapid.Generator[string] {
	special := []rune{0x1b, 0x07, '\n', 0x7f, 0x9b, 0x9d, 0x9c, 0x85, 0x202e, 0x202a, 0x2066, 0x2069, 0x200e, 0x061c, 0x2028, 0x2029, '"', '=', ' ', '\\'}
	piece := rapid.OneOf(
		rapid.Map(rapid.SampledFrom(special), func(r rune) string { return string(r) }),
		rapid.Map(rapid.RuneFrom(nil, unicode.Cc, unicode.Bidi_Control), func(r rune) string { return string(r) }),
		rapid.StringN(0, 6, -1),
		rapid.Map(rapid.SliceOfN(rapid.Byte(), 1, 3), func(b []byte) string { return string(b) }),
	)
	return rapid.Map(rapid.SliceOfN(piece, 0, 8), func(p []string) string { return strings.Join(p, "") })
}

// asJSON is s as a JSON reader reads it back (a byte that is not UTF-8
// becomes U+FFFD).
func asJSON(s string) string {
	b, _ := json.Marshal(s)
	var back string
	_ = json.Unmarshal(b, &back)
	return back
}

// logHostile logs msg, and key and value in every way an attribute can
// carry them (a key, a value, an error, a group, a value slog marshals),
// in format, and returns the line.
func logHostile(format, msg, key, value string) []byte {
	type detail struct{ Text string }
	var buf bytes.Buffer
	listener.NewLogger(&buf, "info", format).Info(msg, "a_"+key, value, "err", errors.New(value),
		slog.Group("g_"+key, "inner", value), "detail", detail{value})
	return buf.Bytes()
}

// rawControl returns what of line safetext escapes, but the newline that
// ends it, and whether line is one line of UTF-8.
func rawControl(line []byte) ([]rune, bool) {
	var raw []rune
	for _, r := range string(bytes.TrimSuffix(line, []byte("\n"))) {
		if safetext.Escapes(r) {
			raw = append(raw, r)
		}
	}
	return raw, utf8.Valid(line) && bytes.IndexByte(line, '\n') == len(line)-1
}

// Whatever a log record quotes (a record's key, an error with its input),
// in its message, an attribute's key or value, an error, a group or a value
// slog marshals, the log line holds no control character (but the newline
// that ends it), no bidi control and no byte that is not UTF-8, in JSON as
// in text; and the JSON reads back as what was logged. log/slog's JSON
// passes C1 controls and bidi controls raw, its text DEL.
func TestNewLoggerEscapesControls(t *testing.T) {
	for _, format := range []string{"json", "text"} {
		line := logHostile(format, "\u009b2J\u009d0;owned\u009c", "k\x7f", "\u202eevil\u202c")
		if raw, ok := rawControl(line); len(raw) > 0 || !ok {
			t.Errorf("%s: the log holds %q raw (one line of UTF-8: %v): %q", format, raw, ok, line)
		}
	}
	if t.Failed() {
		return
	}
	rapid.Check(t, func(t *rapid.T) {
		msg, key, value := hostile().Draw(t, "msg"), hostile().Draw(t, "key"), hostile().Draw(t, "value")
		for _, format := range []string{"json", "text"} {
			line := logHostile(format, msg, key, value)
			if raw, ok := rawControl(line); len(raw) > 0 || !ok {
				t.Fatalf("%s: the log holds %q raw (one line of UTF-8: %v): %q", format, raw, ok, line)
			}
		}
		line := logHostile("json", msg, key, value)
		var j map[string]any
		if err := json.Unmarshal(line, &j); err != nil {
			t.Fatalf("not JSON: %v: %s", err, line)
		}
		group, _ := j["g_"+asJSON(key)].(map[string]any)
		detailed, _ := j["detail"].(map[string]any)
		if j["msg"] != asJSON(msg) || j["a_"+asJSON(key)] != asJSON(value) || j["err"] != asJSON(value) ||
			group["inner"] != asJSON(value) || detailed["Text"] != asJSON(value) {
			t.Fatalf("the JSON log does not read back as what was logged: %s", line)
		}
	})
}

// logLines decodes JSON log lines by message (the first line of each).
func logLines(t *testing.T, raw string) map[string]map[string]any {
	t.Helper()
	out := map[string]map[string]any{}
	for l := range strings.SplitSeq(strings.TrimSpace(raw), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("not JSON: %s (%v)", l, err)
		}
		if msg, _ := m["msg"].(string); out[msg] == nil {
			out[msg] = m
		}
	}
	return out
}

// placeholders returns, for one decoded JSON value, what a log line must
// not hold: negative numbers (sarama's offset sentinels, "nothing marked"),
// and strings in Go's syntax for maps and slices.
func placeholders(path string, v any) []string {
	switch v := v.(type) {
	case float64:
		if v < 0 {
			return []string{fmt.Sprintf("%s=%v", path, v)}
		}
	case string:
		if strings.HasPrefix(v, "map[") || strings.HasPrefix(v, "[") {
			return []string{fmt.Sprintf("%s=%q", path, v)}
		}
	case []any:
		return []string{fmt.Sprintf("%s is a list", path)}
	case map[string]any:
		var out []string
		for k, e := range v {
			out = append(out, placeholders(path+"."+k, e)...)
		}
		return out
	}
	return nil
}

// A whole run on the embedded broker, logged as JSON and as text at once:
// no duration in nanoseconds, no Go map or slice syntax (claims, brokers,
// skipped records by reason), no offset sentinel or -1 (a claim that began
// with nothing committed says where it began, and ends with what it
// committed).
func TestListenerLogsReadRight(t *testing.T) {
	var js, text lockedBuffer
	logger := slog.New(slog.NewMultiHandler(listener.NewLogger(&js, "info", "json").Handler(), listener.NewLogger(&text, "info", "text").Handler()))
	env := map[string]string{"KAFKA_BROKERS": "embedded", "EMBEDDED_PARTITIONS": "1", "LISTENER_HTTP_ADDR": "", "LISTENER_PROGRESS_INTERVAL": "0"}
	cfg, _, err := parse(nil, lookup(env))
	if err != nil {
		t.Fatal(err)
	}
	handler := consumer.HandlerFunc(func(_ context.Context, r *consumer.Record) error {
		if reason, ok := strings.CutPrefix(string(r.Value), "skip:"); ok {
			return messages.Skip(messages.Reason(reason), "in a test")
		}
		return nil
	})
	bridges := make(chan *actors.Bridge, 1)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		done <- listener.Run(ctx, cfg, handler, logger, listener.Hooks{Started: func(b *actors.Bridge) { bridges <- b }})
	}()
	bridge := <-bridges
	eventually(t, "the partition claimed", func() bool { return len(bridge.Partitions()) == 1 })
	produceValues(t, cfg, "fine", "skip:reporter not allowed")
	eventually(t, "both records committed", func() bool { return bridge.Partitions()[0].Committed == 2 })
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}

	lines := logLines(t, js.String())
	for msg, line := range lines {
		if bad := placeholders(msg, line); len(bad) > 0 {
			t.Errorf("JSON log %q holds %v", msg, bad)
		}
	}
	if b := lines["embedded Kafka broker started (in-process, in-memory)"]["brokers"]; b != strings.Join(cfg.Brokers, ",") {
		t.Errorf("brokers %#v, want %q", b, strings.Join(cfg.Brokers, ","))
	}
	if c := lines["joined consumer group"]["claims"]; c != cfg.Kafka.Topic+":0" {
		t.Errorf("claims %#v, want %q", c, cfg.Kafka.Topic+":0")
	}
	started := lines["claim started"]
	if _, ok := started["committed"]; ok || started["starts_at"] != "oldest" {
		t.Errorf("claim started %v: want starts_at oldest and no committed offset (the group had none)", started)
	}
	ended := lines["claim ended"]
	if d, ok := ended["drain"].(string); !ok || ended["committed"] != 2.0 {
		t.Errorf("claim ended %v: want committed 2 and the drain's duration as a string", ended)
	} else if _, err := time.ParseDuration(d); err != nil {
		t.Errorf("claim ended: drain %q: %v", d, err)
	}
	if by, _ := lines["consumer stopped"]["skipped_by_reason"].(map[string]any); !maps.Equal(by, map[string]any{"reporter not allowed": 1.0}) {
		t.Errorf("consumer stopped: skipped_by_reason %#v", lines["consumer stopped"]["skipped_by_reason"])
	}

	logged := text.String()
	for _, want := range []string{" claims=" + cfg.Kafka.Topic + ":0", " brokers=" + cfg.Brokers[0], ` "skipped_by_reason.reporter not allowed"=1 `} {
		if !strings.Contains(logged, want) {
			t.Errorf("text log lacks %s", want)
		}
	}
	if strings.Contains(logged, "map[") || strings.Contains(logged, "=[") || strings.Contains(logged, "=-") {
		t.Errorf("text log in Go syntax, or with a negative value:\n%s", logged)
	}
	if t.Failed() {
		t.Logf("JSON log:\n%s", js.String())
	}
}
