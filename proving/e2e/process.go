package e2e

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sync/atomic"
	"syscall"
	"time"
)

// listenerProc is one listener process the suite started.
type listenerProc struct {
	name    string
	log     string // path of its log (JSON lines)
	cmd     *exec.Cmd
	started time.Time // when the suite started it
	status  string    // its /status.json, when its HTTP address is known
	slot    int       // its fault-proxy slot on the cluster (Env.Cluster)
	// stopped says the suite signalled it to end (kill9, term); exitedAt
	// is when it did, valid after exited closes.
	stopped  atomic.Bool
	exitedAt time.Time
	exited   chan struct{} // closed once the process has exited
	err      error         // its exit status, valid after exited closes
	// samples are its recent /status.json reads (Scenario.SampleStatus),
	// oldest first.
	samples []statusSample
	// limits are its concurrency limits over the whole run
	// (Scenario.WatchLimit).
	limits []limitSample
	// container names its container when it runs from the image
	// (Scenario.Container), engine and engineEnv the engine that runs it;
	// its signals then go through the engine.
	container, engine string
	engineEnv         []string
}

// startListener runs bin/listener with env, logging to <work>/<name>.log;
// bin/listener-proving when env asks for the simulated handler, which the
// production build does not link.
func (e *Env) startListener(name string, env []string) (*listenerProc, error) {
	log, err := os.Create(filepath.Join(e.Work, name+".log"))
	if err != nil {
		return nil, err
	}
	bin := "listener"
	if slices.Contains(env, "LISTENER_HANDLER=simulated") {
		bin = "listener-proving"
	}
	cmd := exec.Command(filepath.Join(e.Bin, bin))
	cmd.Env = append([]string{"PATH=" + os.Getenv("PATH")}, env...)
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		log.Close()
		return nil, err
	}
	p := &listenerProc{name: name, log: log.Name(), cmd: cmd, started: time.Now(), exited: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		p.exitedAt = time.Now()
		log.Close()
		close(p.exited)
	}()
	return p, nil
}

// kill9 ends the process at once, as a crash would.
func (p *listenerProc) kill9() {
	if p.container != "" {
		_ = p.killContainer()
		return
	}
	p.stopped.Store(true)
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.exited
}

// term asks the process to drain and exit, and waits up to limit.
func (p *listenerProc) term(limit time.Duration) error {
	if !p.running() {
		return nil
	}
	if p.container != "" {
		_, err := p.stopContainer(limit)
		return err
	}
	p.stopped.Store(true)
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.exited:
		if p.err != nil {
			return fmt.Errorf("%s exited with %v after SIGTERM", p.name, p.err)
		}
		return nil
	case <-time.After(limit):
		_ = p.cmd.Process.Signal(syscall.SIGKILL)
		<-p.exited
		return fmt.Errorf("%s did not exit within %v of SIGTERM", p.name, limit)
	}
}

// skippedByReason reads the totals the process logged as it stopped
// ("consumer stopped"): the records it skipped, by reason. ok is false when
// it logged none (it was killed, or is still running).
func (p *listenerProc) skippedByReason() (counts map[string]int64, ok bool, err error) {
	f, err := os.Open(p.log)
	if err != nil {
		return nil, false, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var line struct {
			Msg             string           `json:"msg"`
			SkippedByReason map[string]int64 `json:"skipped_by_reason"`
		}
		if json.Unmarshal(sc.Bytes(), &line) == nil && (line.Msg == "consumer stopped" || line.Msg == "listener stopped") { // builds before issue 39 said "listener"
			counts, ok = line.SkippedByReason, true
		}
	}
	return counts, ok, sc.Err()
}

// logEntry is what the suite reads of one line of a listener's JSON log.
type logEntry struct {
	Time   time.Time `json:"time"`
	Level  string    `json:"level"`
	Msg    string    `json:"msg"`
	Reason string    `json:"reason"` // "claim ended": why
	// Drain is how long a claim's drain took ("claim ended").
	Drain     logDuration `json:"drain"`
	Partition *int32      `json:"partition"`
	Error     string      `json:"error"`
}

// logDuration is a duration of a listener's JSON log: a string such as
// "1.5s" (NewLogger writes durations so), or integer nanoseconds (slog's
// JSON handler's own way, which listeners before that wrote). Any other
// value reads as zero, as a field of another type does (logEntries).
type logDuration time.Duration

func (d *logDuration) UnmarshalJSON(b []byte) error {
	var s string
	var ns int64
	switch {
	case json.Unmarshal(b, &s) == nil:
		v, err := time.ParseDuration(s)
		if err == nil {
			*d = logDuration(v)
		}
	case json.Unmarshal(b, &ns) == nil:
		*d = logDuration(ns)
	}
	return nil
}

// logEntries reads the process's log so far. Lines that are not JSON (a
// panic's trace, say) are skipped; a line whose field of one of these names
// has another type is kept with that field left zero.
func (p *listenerProc) logEntries() ([]logEntry, error) {
	f, err := os.Open(p.log)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []logEntry
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var e logEntry
		var typeErr *json.UnmarshalTypeError
		if err := json.Unmarshal(sc.Bytes(), &e); (err == nil || errors.As(err, &typeErr)) && e.Msg != "" {
			out = append(out, e)
		}
	}
	return out, sc.Err()
}

// running reports whether the process is alive.
func (p *listenerProc) running() bool {
	select {
	case <-p.exited:
		return false
	default:
		return true
	}
}

// exitedOnItsOwn reports whether the process ended before the suite
// stopped the run (at stopping) without being signalled to.
func (p *listenerProc) exitedOnItsOwn(stopping time.Time) bool {
	select {
	case <-p.exited:
		return !p.stopped.Load() && (stopping.IsZero() || p.exitedAt.Before(stopping))
	default:
		return false
	}
}

// script runs one of the .ci scripts.
func (e *Env) script(name string, args ...string) error {
	cmd := exec.Command(filepath.Join(e.CI, name), args...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s %v: %v: %s", name, args, err, out)
	}
	return nil
}
