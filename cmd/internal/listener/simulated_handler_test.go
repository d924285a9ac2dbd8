package listener_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/patchflow/patchflow/cmd/internal/downstream"
	"github.com/patchflow/patchflow/cmd/internal/listener"
	"github.com/patchflow/patchflow/cmd/internal/settings"
	"github.com/patchflow/patchflow/messages"
)

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
	if b[len(b)-1] != '\n' {
		t.Fatalf("record log %s ends inside a line: %q", path, b[max(0, len(b)-40):])
	}
	return strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
}

func rec(partition int32, offset int64, value string) *messages.Record {
	return &messages.Record{Topic: "t", Partition: partition, Offset: offset, Value: []byte(value)}
}

// recordLogChild is the process TestRecordLogSurvivesSIGKILL kills: it
// completes records of four partitions concurrently through a record log,
// says so on stdout, and waits to be killed without closing the log.
const recordLogChild = "PATCHFLOW_TEST_RECORD_LOG_CHILD"

// Every line written before a SIGKILL is in the file, whole: the log is not
// buffered in the process (a bufio.Writer left unflushed loses them all).
func TestRecordLogSurvivesSIGKILL(t *testing.T) {
	const partitions, perPartition = 4, 250
	if path := os.Getenv(recordLogChild); path != "" {
		log, err := listener.OpenRecordLog(path)
		if err != nil {
			fmt.Println("open:", err)
			os.Exit(1)
		}
		h := listener.SimulatedHandler{Log: log}
		var wg sync.WaitGroup
		for p := range int32(partitions) {
			wg.Go(func() {
				for o := range int64(perPartition) {
					if err := h.Handle(context.Background(), rec(p, o, "v")); err != nil {
						fmt.Println("handle:", err)
						os.Exit(1)
					}
				}
			})
		}
		wg.Wait()
		fmt.Println("logged")
		select {} // until killed
	}
	path := filepath.Join(t.TempDir(), "records.log")
	cmd := exec.Command(os.Args[0], "-test.run=^TestRecordLogSurvivesSIGKILL$", "-test.count=1")
	cmd.Env = append(os.Environ(), recordLogChild+"="+path)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	said := make(chan string, 1)
	go func() {
		line, _ := bufio.NewReader(out).ReadString('\n')
		said <- line
	}()
	select {
	case line := <-said:
		if line != "logged\n" {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
			t.Fatalf("child said %q", line)
		}
	case <-time.After(30 * time.Second):
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		t.Fatal("the child did not log its records within 30 s")
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	var want []string
	for p := range partitions {
		for o := range perPartition {
			want = append(want, fmt.Sprintf("%d %d", p, o))
		}
	}
	got := readLines(t, path)
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("after SIGKILL the record log has %d lines, want the %d completed records once each (first lines %q)", len(got), len(want), got[:min(5, len(got))])
	}
}

// Only completed records are logged: a poison record (dead-lettered), a
// record cancelled while it waits, and a pinned record are not. A line is in
// the file as soon as Handle returns.
func TestSimulatedHandlerLogsOnlyCompletedRecords(t *testing.T) {
	path := filepath.Join(t.TempDir(), "records.log")
	log, err := listener.OpenRecordLog(path)
	if err != nil {
		t.Fatal(err)
	}
	defer log.Close()
	h := listener.SimulatedHandler{Latency: time.Millisecond, Log: log, Pinned: listener.PinAt(9)}
	if err := h.Handle(context.Background(), rec(2, 41, "ok")); err != nil {
		t.Fatal(err)
	}
	if got := readLines(t, path); !slices.Equal(got, []string{"2 41"}) {
		t.Fatalf("after one completed record the log holds %q", got)
	}
	if err := h.Handle(context.Background(), rec(2, 42, listener.PoisonPrefix+"x")); messages.ClassOf(err) != messages.ErrorClass_ERROR_CLASS_PERMANENT {
		t.Fatalf("poison: %v", err)
	}
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	slow := h
	slow.Latency = time.Hour
	if err := slow.Handle(cancelled, rec(2, 43, "ok")); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled: %v", err)
	}
	if err := h.Handle(cancelled, rec(2, 9, "ok")); !errors.Is(err, context.Canceled) {
		t.Fatalf("pinned and cancelled: %v", err)
	}
	if err := h.Handle(context.Background(), rec(3, 1, "ok")); err != nil {
		t.Fatal(err)
	}
	if got := readLines(t, path); !slices.Equal(got, []string{"2 41", "3 1"}) {
		t.Fatalf("the log holds %q, want only the two completed records", got)
	}
}

// The pinned record waits for its context, however short the latency; the
// others do not.
func TestSimulatedPinHoldsItsRecordUntilTheContextEnds(t *testing.T) {
	h := listener.SimulatedHandler{Pinned: listener.PinAt(7)}
	const hold = 200 * time.Millisecond
	ctx, cancel := context.WithTimeout(context.Background(), hold)
	defer cancel()
	began := time.Now()
	if err := h.Handle(ctx, rec(0, 8, "ok")); err != nil {
		t.Fatalf("offset 8: %v", err)
	}
	if err := h.Handle(ctx, rec(5, 7, "ok")); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("pinned offset 7 returned %v, want the context's deadline", err)
	}
	if waited := time.Since(began); waited < hold {
		t.Fatalf("pinned record returned after %v, before its context ended (%v)", waited, hold)
	}
	// A drain cancels it.
	drain, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- h.Handle(drain, rec(1, 7, "ok")) }()
	stop()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("cancelled pinned record: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("a cancelled pinned record did not return within 5 s")
	}
}

// The knobs parse, default to off, and are refused with the real handler.
func TestSimulatedKnobSettings(t *testing.T) {
	cfg, _, err := listener.Parse(nil, lookup(map[string]string{"KAFKA_BROKERS": "embedded"}))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.SimulatedRecordLog != "" || cfg.SimulatedPinOffset != -1 {
		t.Fatalf("defaults: record log %q, pin %d", cfg.SimulatedRecordLog, cfg.SimulatedPinOffset)
	}
	cfg, _, err = listener.Parse([]string{"-simulated-pin-offset", "0"}, lookup(map[string]string{"KAFKA_BROKERS": "embedded",
		"LISTENER_SIMULATED_RECORD_LOG": "/tmp/r.log", "LISTENER_SIMULATED_PIN_OFFSET": "12"}))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.SimulatedRecordLog != "/tmp/r.log" || cfg.SimulatedPinOffset != 0 {
		t.Fatalf("record log %q, pin %d", cfg.SimulatedRecordLog, cfg.SimulatedPinOffset)
	}
	evaluate := map[string]string{"KAFKA_BROKERS": "embedded", "LISTENER_HANDLER": "evaluate", "DATABASE_URL": "postgres://db/x", "VMAAS_URL": "http://v"}
	for env, v := range map[string]string{"LISTENER_SIMULATED_RECORD_LOG": "/tmp/r.log", "LISTENER_SIMULATED_PIN_OFFSET": "3"} {
		kv := map[string]string{env: v}
		for k, v := range evaluate {
			kv[k] = v
		}
		_, _, err := listener.Parse(nil, lookup(kv))
		var se *settings.Error
		if !errors.As(err, &se) || se.Env != env {
			t.Errorf("%s with the evaluate handler: got %v, want an error naming it", env, err)
		}
	}
	_, _, err = listener.Parse(nil, lookup(map[string]string{"KAFKA_BROKERS": "embedded", "LISTENER_SIMULATED_PIN_OFFSET": "-2"}))
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
	knobs, _, err := listener.Parse(nil, lookup(kv))
	if err != nil {
		t.Fatal(err)
	}
	domain, err := listener.NewDomain(context.Background(), knobs, slog.New(slog.DiscardHandler), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(domain.Close) // after the listener's own cleanup: registered first
	cfg, bridge, _ := startEmbeddedListener(t, env, domain.Handler)
	values := make([]string, 20)
	for i := range values {
		values[i] = "ok"
	}
	produceValues(t, cfg, values...)
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

// With a capacity of 2 and a latency of 50 ms, six records at once are
// served two at a time: never more than 2 in service, all six succeed, and
// together they take at least three latencies. A pinned record takes no
// slot, and a record whose context ends while it queues returns its error.
func TestSimulatedCapacity(t *testing.T) {
	const latency = 50 * time.Millisecond
	gate := downstream.NewCapacity(2)
	h := listener.SimulatedHandler{Latency: latency, Capacity: gate, Pinned: listener.PinAt(99)}

	pinCtx, unpin := context.WithCancel(context.Background())
	pinned := make(chan error, 1)
	go func() { pinned <- h.Handle(pinCtx, rec(0, 99, "ok")) }()

	var peak int
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-pinned:
				t.Error("the pinned record returned before its context ended")
				return
			default:
			}
			peak = max(peak, gate.Serving())
			if gate.Serving() == 0 && gate.Queued() == 0 && peak > 0 {
				return
			}
			time.Sleep(100 * time.Microsecond)
		}
	}()
	began := time.Now()
	errs := make(chan error, 6)
	var wg sync.WaitGroup
	for o := range int64(6) {
		wg.Go(func() { errs <- h.Handle(context.Background(), rec(1, o, "ok")) })
	}
	wg.Wait()
	took := time.Since(began)
	<-done
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatalf("a record failed: %v", err)
		}
	}
	if peak > 2 || peak == 0 {
		t.Fatalf("%d records served at once with a capacity of 2", peak)
	}
	if took < 3*latency {
		t.Fatalf("six records at a capacity of 2 took %v, less than three latencies (%v)", took, 3*latency)
	}

	// A record queued behind a full gate gives up with its context.
	gate.SetLimit(1)
	slowCtx, stopSlow := context.WithCancel(context.Background())
	slow := h
	slow.Latency = time.Hour
	slowDone := make(chan error, 1)
	go func() { slowDone <- slow.Handle(slowCtx, rec(2, 0, "ok")) }()
	eventually(t, "the slow record holds the slot", func() bool { return gate.Serving() == 1 })
	waitCtx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if err := h.Handle(waitCtx, rec(2, 1, "ok")); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a record queued past its deadline: %v, want context.DeadlineExceeded", err)
	}
	if gate.Queued() != 0 || gate.Serving() != 1 {
		t.Fatalf("after the queued record gave up: serving %d, queued %d, want 1, 0", gate.Serving(), gate.Queued())
	}
	stopSlow()
	if err := <-slowDone; !errors.Is(err, context.Canceled) {
		t.Fatalf("slow record: %v", err)
	}
	unpin()
	if err := <-pinned; !errors.Is(err, context.Canceled) {
		t.Fatalf("pinned record: %v", err)
	}
	if gate.Serving() != 0 || gate.Queued() != 0 {
		t.Fatalf("at the end: serving %d, queued %d", gate.Serving(), gate.Queued())
	}
}

// LISTENER_SIMULATED_CAPACITY defaults to 0 (no bound), refuses a negative
// value, and reaches the simulated handler's gate.
func TestSimulatedCapacitySetting(t *testing.T) {
	cfg, _, err := listener.Parse(nil, lookup(map[string]string{"KAFKA_BROKERS": "embedded"}))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.SimulatedCapacity != 0 {
		t.Fatalf("default capacity %d, want 0", cfg.SimulatedCapacity)
	}
	_, _, err = listener.Parse(nil, lookup(map[string]string{"KAFKA_BROKERS": "embedded", "LISTENER_SIMULATED_CAPACITY": "-1"}))
	var se *settings.Error
	if !errors.As(err, &se) || se.Env != "LISTENER_SIMULATED_CAPACITY" {
		t.Fatalf("capacity -1: %v", err)
	}
	cfg, _, err = listener.Parse([]string{"-simulated-capacity", "7"}, lookup(map[string]string{"KAFKA_BROKERS": "embedded", "LISTENER_SIMULATED_CAPACITY": "3"}))
	if err != nil {
		t.Fatal(err)
	}
	domain, err := listener.NewDomain(context.Background(), cfg, slog.New(slog.DiscardHandler), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer domain.Close()
	h, ok := domain.Handler.(listener.SimulatedHandler)
	if !ok || h.Capacity != domain.Capacity || domain.Capacity.Limit() != 7 {
		t.Fatalf("handler %T, capacity limit %d, want the simulated handler with the domain's gate of 7", domain.Handler, domain.Capacity.Limit())
	}
}
