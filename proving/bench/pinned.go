package bench

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/patchflow/patchflow/internal/telemetry"
)

// PinnedResult is a listener's memory and admission while one record in
// every partition never finishes (the simulated handler's pin) with a
// backlog behind it.
type PinnedResult struct {
	Listener     string  `json:"listener"` // before or after
	Backlog      int     `json:"backlog_records"`
	RecordBytes  int     `json:"record_bytes"`
	Concurrency  int     `json:"concurrency"`
	PerPartition int     `json:"per_partition"`
	Partitions   int     `json:"partitions"`
	PinOffset    int64   `json:"pin_offset"`
	LatencyMS    float64 `json:"handler_latency_ms"`
	// SpanLimit is the offsets a partition may admit past its watermark (0:
	// no limit, as before this issue).
	SpanLimit int64 `json:"span_limit"`
	// Seconds is the run's length; WindowSeconds the longest it may take
	// (the length of one without a span limit).
	Seconds       float64 `json:"seconds"`
	WindowSeconds float64 `json:"window_seconds"`
	// HoldSeconds is the end of the window over which AdmittedInHold is
	// counted: 0 when admission has stopped.
	HoldSeconds    float64 `json:"hold_seconds"`
	AdmittedInHold int64   `json:"admitted_in_hold"`
	PeakRSSMiB     float64 `json:"peak_rss_mib"`
	FinalRSSMiB    float64 `json:"final_rss_mib"`
	// Admitted is the records admitted (every partition from offset 0);
	// MaxPastPin the largest admitted offset past the pin in any partition.
	Admitted   int64 `json:"admitted"`
	MaxPastPin int64 `json:"max_admitted_past_pin"`
	InFlight   int64 `json:"in_flight"`
	// Committed is the committed offsets, added up (the pin holds each).
	Committed int64 `json:"committed"`
	// SpanBlocked is the partitions span-blocked at the end and
	// BlockedAfter when all of them first were, from the start; -1 when the
	// listener reports no such metric (before this issue).
	SpanBlocked  int     `json:"span_blocked"`
	BlockedAfter float64 `json:"blocked_after_seconds"`
	// MetadataMaxBytes is the largest partition's last commit metadata (-1:
	// not reported).
	MetadataMaxBytes int `json:"metadata_max_bytes"`
}

// Pinned is the memory scenario's case of a record that never finishes.
type Pinned struct {
	Brokers                          []string
	Topic                            string // holds Backlog records of RecordBytes
	Backlog, RecordBytes, Partitions int
	Concurrency, PerPartition        int
	PinOffset                        int64
	Latency, Window, Hold            time.Duration
	Work                             string
	Log                              io.Writer
	SpanFactor                       int      // the listener's default span, in multiples of PerPartition
	Env                              []string // extra settings of the listener process
}

// pinnedStatus is one read of the listener's /status.json.
type pinnedStatus struct {
	rows []telemetry.PartitionStatus
}

func readStatus(url string) (pinnedStatus, error) {
	c := http.Client{Timeout: 5 * time.Second}
	resp, err := c.Get(url)
	if err != nil {
		return pinnedStatus{}, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return pinnedStatus{}, fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	var st telemetry.Status
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		return pinnedStatus{}, fmt.Errorf("GET %s: %w", url, err)
	}
	return pinnedStatus{rows: st.Partitions}, nil
}

// spans reports whether the listener shows the span limit (it did not
// before this issue: its rows carry no span_limit, read as 0).
func (s pinnedStatus) spans() bool {
	return len(s.rows) > 0 && s.rows[0].SpanLimit > 0
}

// spanBlocked counts the partitions shown span-blocked.
func (s pinnedStatus) spanBlocked() int {
	n := 0
	for _, r := range s.rows {
		if r.SpanBlockedSeconds != nil {
			n++
		}
	}
	return n
}

// admitted counts the records admitted in every partition from offset 0.
func (s pinnedStatus) admitted() int64 {
	var n int64
	for _, r := range s.rows {
		n += offsetOf(r.Admitted) + 1
	}
	return n
}

// offsetOf reads an offset of a status row: -1 when there is none (absent
// from this listener's rows; -1 in those of earlier builds).
func offsetOf(off *int64) int64 {
	if off == nil {
		return -1
	}
	return max(*off, -1)
}

// Run runs the listener binary bin (named listener in the report) on the
// topic with a group of its own and reports what its /status.json and the
// kernel say over a Hold: from the moment every partition is span-blocked
// (at most Window after the start), or for a listener without a span
// limit, the last Hold of Window.
func (c *Pinned) Run(listener, bin string) (PinnedResult, error) {
	res := PinnedResult{Listener: listener, Backlog: c.Backlog, RecordBytes: c.RecordBytes, Concurrency: c.Concurrency, PerPartition: c.PerPartition,
		Partitions: c.Partitions, PinOffset: c.PinOffset, LatencyMS: float64(c.Latency) / float64(time.Millisecond), SpanBlocked: -1, BlockedAfter: -1,
		MetadataMaxBytes: -1, HoldSeconds: c.Hold.Seconds(), WindowSeconds: c.Window.Seconds()}
	if listener == ListenerAfter {
		res.SpanLimit = int64(c.SpanFactor * c.PerPartition)
	}
	fail := func(err error) (PinnedResult, error) {
		return res, fmt.Errorf("pinned memory, %s listener: %w", listener, err)
	}
	addr, err := freeAddr()
	if err != nil {
		return fail(err)
	}
	group := c.Topic + "-pinned-" + listener
	env := append([]string{"KAFKA_BROKERS=" + strings.Join(c.Brokers, ","), "KAFKA_TOPIC=" + c.Topic, "KAFKA_GROUP=" + group,
		"LISTENER_HANDLER=simulated", "LISTENER_SIMULATED_LATENCY=" + c.Latency.String(), "LISTENER_SIMULATED_RECORD_LOG=",
		"LISTENER_SIMULATED_PIN_OFFSET=" + strconv.FormatInt(c.PinOffset, 10),
		"LISTENER_INFLIGHT_PER_PARTITION=" + strconv.Itoa(c.PerPartition), "LISTENER_INFLIGHT_TOTAL=" + strconv.Itoa(c.Concurrency), "LISTENER_CONCURRENCY=fixed",
		"LISTENER_ORDERING=key", "LISTENER_HTTP_ADDR=" + addr, "LISTENER_PROGRESS_INTERVAL=0", "LOG_LEVEL=warn", "LOG_FORMAT=json"}, c.Env...)
	p, err := startListener(listener+" listener (pinned)", bin, filepath.Join(c.Work, group+".log"), env...)
	if err != nil {
		return fail(err)
	}
	// The pinned records would hold a drain until its deadline; the figures
	// are taken by then, so the process is killed.
	defer p.kill9()
	url := "http://" + addr + "/status.json"
	started := time.Now()
	// The hold begins once every partition is span-blocked, for a listener
	// with a span limit (none passes Window), and after Window - Hold for one
	// without (before this issue), whose admission never stops.
	var holdFrom time.Time
	if res.SpanLimit > 0 {
		blocked := func() (bool, error) {
			if err := p.alive(); err != nil {
				return false, err
			}
			s, err := readStatus(url)
			return err == nil && len(s.rows) == c.Partitions && s.spanBlocked() == c.Partitions, nil
		}
		if err := poll("every partition span-blocked", 100*time.Millisecond, c.Window, blocked); err != nil {
			return fail(withLog(err, p))
		}
		holdFrom = time.Now()
		res.BlockedAfter = holdFrom.Sub(started).Seconds()
	} else {
		holdFrom = started.Add(c.Window - c.Hold)
		if err := poll("the start of the hold", 100*time.Millisecond, c.Window, func() (bool, error) {
			return !time.Now().Before(holdFrom), p.alive()
		}); err != nil {
			return fail(err)
		}
	}
	before, err := readStatus(url)
	if err != nil {
		return fail(err)
	}
	if n := len(before.rows); n != c.Partitions {
		return fail(withLog(fmt.Errorf("%d of %d partitions claimed %v after the start", n, c.Partitions, holdFrom.Sub(started).Round(time.Second)), p))
	}
	end := holdFrom.Add(c.Hold)
	if err := poll("the end of the window", 100*time.Millisecond, c.Hold+time.Second, func() (bool, error) {
		return !time.Now().Before(end), p.alive()
	}); err != nil {
		return fail(err)
	}
	after, err := readStatus(url)
	if err != nil {
		return fail(err)
	}
	status, err := procStatus(p.cmd.Process.Pid)
	if err != nil {
		return fail(err)
	}
	res.Seconds = time.Since(started).Seconds()
	res.PeakRSSMiB, res.FinalRSSMiB = status["VmHWM"]/1024, status["VmRSS"]/1024
	res.Admitted = after.admitted()
	res.AdmittedInHold = res.Admitted - before.admitted()
	res.MaxPastPin = -1
	for _, r := range after.rows {
		res.MaxPastPin = max(res.MaxPastPin, offsetOf(r.Admitted)-c.PinOffset)
		res.InFlight += int64(r.InFlight)
		res.Committed += max(offsetOf(r.Committed), 0)
	}
	if after.spans() {
		res.SpanBlocked = after.spanBlocked()
		for _, r := range after.rows {
			res.MetadataMaxBytes = max(res.MetadataMaxBytes, r.MetadataBytes)
			if r.SpanLimit != res.SpanLimit {
				return fail(fmt.Errorf("partition %d shows a span limit of %d, want %d", r.Partition, r.SpanLimit, res.SpanLimit))
			}
		}
	}
	if c.Log != nil {
		fmt.Fprintf(c.Log, "kafka  memory-pinned  %-6s backlog %d, pin at %d: peak RSS %.0f MiB; admitted %d (at most %d past the pin; %d in the last %v); in flight %d; span-blocked %d of %d (all after %.1fs); largest metadata %d B\n",
			listener, c.Backlog, c.PinOffset, res.PeakRSSMiB, res.Admitted, res.MaxPastPin, res.AdmittedInHold, c.Hold, res.InFlight, res.SpanBlocked, c.Partitions, res.BlockedAfter, res.MetadataMaxBytes)
	}
	return res, nil
}
