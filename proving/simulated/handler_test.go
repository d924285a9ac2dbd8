package simulated_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/patchflow/patchflow/consumer"
	"github.com/patchflow/patchflow/messages"
	"github.com/patchflow/patchflow/proving/downstream"
	"github.com/patchflow/patchflow/proving/simulated"
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

func rec(partition int32, offset int64, value string) *consumer.Record {
	return &consumer.Record{Topic: "t", Partition: partition, Offset: offset, Value: []byte(value)}
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
		log, err := simulated.OpenRecordLog(path)
		if err != nil {
			fmt.Println("open:", err)
			os.Exit(1)
		}
		h := simulated.Handler{Log: log}
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
	log, err := simulated.OpenRecordLog(path)
	if err != nil {
		t.Fatal(err)
	}
	defer log.Close()
	h := simulated.Handler{Latency: time.Millisecond, Log: log, Pinned: simulated.PinAt(9)}
	if err := h.Handle(context.Background(), rec(2, 41, "ok")); err != nil {
		t.Fatal(err)
	}
	if got := readLines(t, path); !slices.Equal(got, []string{"2 41"}) {
		t.Fatalf("after one completed record the log holds %q", got)
	}
	if err := h.Handle(context.Background(), rec(2, 42, simulated.PoisonPrefix+"x")); messages.ClassOf(err) != messages.ErrorClass_ERROR_CLASS_PERMANENT {
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
	h := simulated.Handler{Pinned: simulated.PinAt(7)}
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

// With a capacity of 2 and a latency of 50 ms, six records at once are
// served two at a time: never more than 2 in service, all six succeed, and
// together they take at least three latencies. A pinned record takes no
// slot, and a record whose context ends while it queues returns its error.
func TestSimulatedCapacity(t *testing.T) {
	const latency = 50 * time.Millisecond
	gate := downstream.NewCapacity(2)
	h := simulated.Handler{Latency: latency, Capacity: gate, Pinned: simulated.PinAt(99)}

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

// eventually waits up to 20 s for cond.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
