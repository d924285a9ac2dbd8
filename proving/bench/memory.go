package bench

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/patchflow/patchflow/proving/offsets"
)

// MemoryResult is the listener's memory with a backlog on the topic.
type MemoryResult struct {
	Backlog      int     `json:"backlog_records"`
	RecordBytes  int     `json:"record_bytes"`
	Concurrency  int     `json:"concurrency"`
	Seconds      float64 `json:"seconds"`
	Consumed     int64   `json:"records_consumed"`
	PeakRSSMiB   float64 `json:"peak_rss_mib"`
	FinalRSSMiB  float64 `json:"final_rss_mib"`
	BacklogMiB   float64 `json:"backlog_mib"`
	LatencyMS    float64 `json:"handler_latency_ms"`
	StillWaiting int64   `json:"records_still_waiting"`
	Topic        string  `json:"topic"`
}

// Memory runs the listener binary (its own process; the broker in its
// own) with the simulated handler on a topic holding backlog records of
// recordBytes each, for window, and reports its peak resident memory. The
// handler's latency keeps the backlog from draining within the window, so
// the listener always has more to fetch than it may hold.
func Memory(listenerBin string, brokers []string, backlog, recordBytes, concurrency, partitions int, latency, window time.Duration, log io.Writer) (MemoryResult, error) {
	res := MemoryResult{Backlog: backlog, RecordBytes: recordBytes, Concurrency: concurrency, LatencyMS: float64(latency.Milliseconds()),
		BacklogMiB: float64(backlog*recordBytes) / (1 << 20)}
	topic, err := MemoryTopic(brokers, backlog, recordBytes, partitions)
	if err != nil {
		return res, err
	}
	res.Topic = topic
	cmd := exec.Command(listenerBin)
	cmd.Env = append(os.Environ(),
		"KAFKA_BROKERS="+strings.Join(brokers, ","), "KAFKA_TOPIC="+topic, "KAFKA_GROUP="+topic,
		"LISTENER_HANDLER=simulated", "LISTENER_SIMULATED_LATENCY="+latency.String(),
		"LISTENER_INFLIGHT_PER_PARTITION="+strconv.Itoa(concurrency/partitions), "LISTENER_INFLIGHT_TOTAL="+strconv.Itoa(concurrency), "LISTENER_CONCURRENCY=fixed",
		"LISTENER_HTTP_ADDR=", "LOG_LEVEL=warn", "LOG_FORMAT=json")
	var stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = io.Discard, &stderr
	if err := cmd.Start(); err != nil {
		return res, fmt.Errorf("start %s: %w", listenerBin, err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	stop := func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
	}
	start := time.Now()
	for time.Since(start) < window {
		select {
		case err := <-exited:
			return res, fmt.Errorf("listener exited early: %v; stderr: %s", err, tail(stderr.String()))
		case <-time.After(200 * time.Millisecond):
		}
	}
	status, err := procStatus(cmd.Process.Pid)
	if err != nil {
		stop()
		return res, err
	}
	res.Seconds = time.Since(start).Seconds()
	res.PeakRSSMiB, res.FinalRSSMiB = status["VmHWM"]/1024, status["VmRSS"]/1024
	// Progress as committed while the listener still runs (the last second
	// of marks may not have landed yet, so this undercounts slightly).
	p, err := offsets.Read(brokers, topic, topic)
	stop()
	if err != nil {
		return res, fmt.Errorf("read the group's progress: %w", err)
	}
	res.Consumed = p.Done()
	res.StillWaiting = p.Total() - res.Consumed
	if res.StillWaiting <= 0 {
		return res, fmt.Errorf("the backlog of %d records drained within the window: the figure would be of an idle listener; lengthen the handler latency or shorten the window", backlog)
	}
	if log != nil {
		fmt.Fprintf(log, "kafka  memory         backlog %7d x %d B (%6.0f MiB)  G=%d: peak RSS %.0f MiB, %d consumed in %.0fs, %d still waiting\n",
			backlog, recordBytes, res.BacklogMiB, concurrency, res.PeakRSSMiB, res.Consumed, res.Seconds, res.StillWaiting)
	}
	return res, nil
}

// MemoryTopic creates a topic holding backlog records of recordBytes each.
func MemoryTopic(brokers []string, backlog, recordBytes, partitions int) (string, error) {
	topic := fmt.Sprintf("bench-memory-%d-%d", time.Now().Unix(), backlog)
	if err := createTopic(brokers, topic, partitions); err != nil {
		return "", err
	}
	return topic, produce(brokers, topic, 0, backlog, recordBytes)
}

// procStatus reads the kB fields of /proc/<pid>/status.
func procStatus(pid int) (map[string]float64, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	out := map[string]float64{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		fields := strings.Fields(v)
		if len(fields) == 2 && fields[1] == "kB" {
			n, _ := strconv.ParseFloat(fields[0], 64)
			out[k] = n
		}
	}
	return out, sc.Err()
}

func tail(s string) string {
	if len(s) > 2000 {
		return s[len(s)-2000:]
	}
	return s
}
