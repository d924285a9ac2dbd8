package listener_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/patchflow/patchflow/internal/listener"
	"github.com/patchflow/patchflow/internal/settings"
	"github.com/patchflow/patchflow/proving/downstream"
	"github.com/patchflow/patchflow/proving/embedded"
	"github.com/patchflow/patchflow/proving/simulated"
)

// parseSimulated parses the listener's settings as the proving ground's
// build does: with the simulated handler and the embedded broker.
func parseSimulated(k *simulated.Knobs, args []string, lookup func(string) (string, bool)) (*listener.Config, *settings.Set, error) {
	return listener.Parse(args, lookup, simulated.Extension(k), embedded.Extension())
}

// readLines returns the record log's lines as they are in the file now.
func readLines(t *testing.T, path string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	if len(b) == 0 {
		return nil
	}
	return strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
}

// The knobs parse, default to off, and are refused with the real handler.
func TestSimulatedKnobSettings(t *testing.T) {
	var knobs simulated.Knobs
	_, _, err := parseSimulated(&knobs, nil, lookup(map[string]string{"KAFKA_BROKERS": "embedded"}))
	if err != nil {
		t.Fatal(err)
	}
	if knobs.RecordLog != "" || knobs.PinOffset != -1 {
		t.Fatalf("defaults: record log %q, pin %d", knobs.RecordLog, knobs.PinOffset)
	}
	_, _, err = parseSimulated(&knobs, []string{"-simulated-pin-offset", "0"}, lookup(map[string]string{"KAFKA_BROKERS": "embedded",
		"LISTENER_SIMULATED_RECORD_LOG": "/tmp/r.log", "LISTENER_SIMULATED_PIN_OFFSET": "12"}))
	if err != nil {
		t.Fatal(err)
	}
	if knobs.RecordLog != "/tmp/r.log" || knobs.PinOffset != 0 {
		t.Fatalf("record log %q, pin %d", knobs.RecordLog, knobs.PinOffset)
	}
	evaluate := map[string]string{"KAFKA_BROKERS": "embedded", "LISTENER_HANDLER": "evaluate", "DATABASE_URL": "postgres://db/x", "VMAAS_URL": "http://v"}
	for env, v := range map[string]string{"LISTENER_SIMULATED_RECORD_LOG": "/tmp/r.log", "LISTENER_SIMULATED_PIN_OFFSET": "3"} {
		kv := map[string]string{env: v}
		for k, v := range evaluate {
			kv[k] = v
		}
		_, _, err := parseSimulated(&knobs, nil, lookup(kv))
		var se *settings.Error
		if !errors.As(err, &se) || se.Env != env {
			t.Errorf("%s with the evaluate handler: got %v, want an error naming it", env, err)
		}
	}
	_, _, err = parseSimulated(&knobs, nil, lookup(map[string]string{"KAFKA_BROKERS": "embedded", "LISTENER_SIMULATED_PIN_OFFSET": "-2"}))
	var se *settings.Error
	if !errors.As(err, &se) || se.Env != "LISTENER_SIMULATED_PIN_OFFSET" {
		t.Errorf("pin offset -2: %v", err)
	}
}

// Through the listener: the pinned record holds the committed offset at the
// pin while every other record completes and is logged once; the drain at
// shutdown cancels it, and it is never logged.
func TestSimulatedKnobsThroughTheListener(t *testing.T) {
	path := filepath.Join(t.TempDir(), "records.log")
	env := map[string]string{"LISTENER_SIMULATED_RECORD_LOG": path, "LISTENER_SIMULATED_PIN_OFFSET": "3",
		"LISTENER_SIMULATED_LATENCY": "1ms", "LISTENER_DRAIN_TIMEOUT": "1s"}
	kv := map[string]string{"KAFKA_BROKERS": "embedded"}
	for k, v := range env {
		kv[k] = v
	}
	var knobs simulated.Knobs
	cfg, _, err := parseSimulated(&knobs, nil, lookup(kv))
	if err != nil {
		t.Fatal(err)
	}
	domain, err := listener.NewDomain(context.Background(), cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(domain.Close) // after the listener's own cleanup: registered first
	lcfg, bridge, _ := startEmbeddedListener(t, env, domain.Handler)
	values := make([]string, 20)
	for i := range values {
		values[i] = "ok"
	}
	produceValues(t, lcfg, values...)
	eventually(t, "19 records logged", func() bool { return len(readLines(t, path)) == 19 })
	eventually(t, "the watermark marked at the pin", func() bool {
		ps := bridge.Partitions()
		return len(ps) == 1 && ps[0].Committed == 3 && ps[0].InFlight == 1 && ps[0].PinnedOffset == 3
	})
	got := readLines(t, path)
	want := []string{}
	for o := range 20 {
		if o != 3 {
			want = append(want, fmt.Sprintf("0 %d", o))
		}
	}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("record log %q, want every offset but the pinned 3, once", got)
	}
}

// LISTENER_SIMULATED_CAPACITY defaults to 0 (no bound), refuses a negative
// value, and reaches the simulated handler's gate.
func TestSimulatedCapacitySetting(t *testing.T) {
	var knobs simulated.Knobs
	_, _, err := parseSimulated(&knobs, nil, lookup(map[string]string{"KAFKA_BROKERS": "embedded"}))
	if err != nil {
		t.Fatal(err)
	}
	if knobs.Capacity != 0 {
		t.Fatalf("default capacity %d, want 0", knobs.Capacity)
	}
	_, _, err = parseSimulated(&knobs, nil, lookup(map[string]string{"KAFKA_BROKERS": "embedded", "LISTENER_SIMULATED_CAPACITY": "-1"}))
	var se *settings.Error
	if !errors.As(err, &se) || se.Env != "LISTENER_SIMULATED_CAPACITY" {
		t.Fatalf("capacity -1: %v", err)
	}
	cfg, _, err := parseSimulated(&knobs, []string{"-simulated-capacity", "7"}, lookup(map[string]string{"KAFKA_BROKERS": "embedded", "LISTENER_SIMULATED_CAPACITY": "3"}))
	if err != nil {
		t.Fatal(err)
	}
	domain, err := listener.NewDomain(context.Background(), cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer domain.Close()
	h, ok := domain.Handler.(simulated.Handler)
	gate, _ := domain.Extra.(*downstream.Capacity)
	if !ok || gate == nil || h.Capacity != gate || gate.Limit() != 7 {
		t.Fatalf("handler %T, extra %T, want the simulated handler with the domain's gate of 7", domain.Handler, domain.Extra)
	}
}

// parse parses the listener's settings as the proving ground's build does.
func parse(args []string, lookup func(string) (string, bool)) (*listener.Config, *settings.Set, error) {
	return parseSimulated(&simulated.Knobs{}, args, lookup)
}
