package bench

import (
	"fmt"
	"io"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/IBM/sarama"

	"github.com/patchflow/patchflow/proving/offsets"
)

// Listeners of the side-by-side scenarios.
const (
	// ListenerBefore is the listener at the commit before issue 11
	// (BeforeCommit): its commits carry only the watermark, so a new owner
	// runs again everything above it.
	ListenerBefore = "before"
	// ListenerAfter is this listener: its commits name the finished offsets
	// above the watermark, and a new owner does not run them.
	ListenerAfter = "after"
)

// BeforeCommit is the commit ListenerBefore is built from (with the
// simulated handler's measurement knobs applied: .ci/listener-before).
const BeforeCommit = "b42bd18"

// CrashResult is one listener binary through one kill -9 and a restart.
type CrashResult struct {
	Listener     string  `json:"listener"` // before or after
	Round        int     `json:"round"`
	Records      int     `json:"records"`
	RecordBytes  int     `json:"record_bytes"`
	Keys         int     `json:"keys"`
	Partitions   int     `json:"partitions"`
	LatencyMS    float64 `json:"handler_latency_ms"`
	Concurrency  int     `json:"concurrency"`
	PerPartition int     `json:"per_partition"`
	// HandledBeforeKill is the lines of the first process's record log.
	HandledBeforeKill int64 `json:"handled_before_kill"`
	// FirstRate is the first process's records/s, from its first completed
	// record to the kill.
	FirstRate float64 `json:"first_records_per_second"`
	// Kill is when the kill came: KillAfterCommit or KillAnywhere.
	Kill string `json:"kill"`
	// SinceCommitMS is from the group's last commit to the kill, and
	// SinceCommit the records the first process completed meanwhile: no
	// commit can cover them. The commit is seen by polling the group's
	// committed offsets every CommitPoll, so both undercount by up to that.
	SinceCommitMS float64 `json:"ms_since_commit"`
	SinceCommit   int64   `json:"completed_since_commit"`
	// The group's commit right after the kill: records below the committed
	// offsets, offsets above them that the metadata names finished, and the
	// metadata's size (all partitions; the largest partition's).
	CommittedBelow   int64 `json:"committed_below"`
	NamedFinished    int64 `json:"named_finished"`
	MetadataBytes    int   `json:"metadata_bytes"`
	MetadataMaxBytes int   `json:"metadata_max_bytes_per_partition"`
	// NotCovered is what the first process completed that the commit does
	// not cover: the records the second one runs again.
	NotCovered int64 `json:"completed_not_covered"`
	// HandledTwice counts records in the record logs more than once; Extra
	// the completions beyond one per record; RanCovered the records the
	// second process ran although the commit covered them (a resume that
	// did not happen); Never the records no process completed (must be 0).
	HandledTwice int64 `json:"handled_twice"`
	Extra        int64 `json:"extra_completions"`
	RanCovered   int64 `json:"ran_though_covered"`
	Never        int64 `json:"never_handled"`
	// RestartSeconds is from the second process's start to its first
	// completed record (the group waits out the killed member's session);
	// FinishSeconds to the committed offsets reaching the end offsets.
	RestartSeconds float64 `json:"restart_seconds"`
	FinishSeconds  float64 `json:"finish_seconds"`
	SecondRate     float64 `json:"second_records_per_second"`
}

// When the crash-replay scenario kills the first process, once half the
// records are handled.
const (
	// KillAfterCommit kills it as soon as the group's next commit is seen:
	// what the commit covers is then nearly all that decides the replay.
	KillAfterCommit = "after a commit"
	// KillAnywhere kills it at once, wherever it is between two commits:
	// the records completed since the last one are replayed as well.
	KillAnywhere = "anywhere"
)

// CommitPoll is how often the crash-replay scenario reads the group's
// committed offsets while the first process runs.
const CommitPoll = 10 * time.Millisecond

// CrashReplay is the crash-replay scenario: a listener binary consumes a
// topic with the simulated handler, is killed with SIGKILL once its record
// log holds KillAt of the records, and a second process of the same binary
// runs until the group's committed offsets reach the end offsets. The
// record logs of both say which records were handled twice and whether any
// was never handled.
type CrashReplay struct {
	Brokers                                []string
	Records, RecordBytes, Keys, Partitions int
	Latency                                time.Duration
	Concurrency, PerPartition              int
	KillAt                                 float64 // share of the records
	Work                                   string  // record logs and listener logs
	Log                                    io.Writer
	// Env is extra settings of the listener processes (tests shorten the
	// session timeout).
	Env   []string
	topic string
	ends  map[int32]int64
}

// Prepare creates the scenario's topic and fills it; every run reads it
// with a group of its own.
func (c *CrashReplay) Prepare() error {
	c.topic = fmt.Sprintf("bench-crash-%d", time.Now().Unix())
	if err := createTopic(c.Brokers, c.topic, c.Partitions); err != nil {
		return err
	}
	if err := produceWithKeys(c.Brokers, c.topic, 0, c.Records, c.RecordBytes, c.Keys); err != nil {
		return err
	}
	p, err := offsets.Read(c.Brokers, c.topic, "")
	if err != nil {
		return err
	}
	if p.Total() != int64(c.Records) {
		return fmt.Errorf("crash replay: topic %s holds %d records, want %d", c.topic, p.Total(), c.Records)
	}
	c.ends = p.Ends
	return nil
}

func (c *CrashReplay) env(group, recordLog string) []string {
	return append([]string{
		"KAFKA_BROKERS=" + strings.Join(c.Brokers, ","), "KAFKA_TOPIC=" + c.topic, "KAFKA_GROUP=" + group,
		"LISTENER_HANDLER=simulated", "LISTENER_SIMULATED_LATENCY=" + c.Latency.String(),
		"LISTENER_SIMULATED_RECORD_LOG=" + recordLog, "LISTENER_SIMULATED_PIN_OFFSET=-1",
		"LISTENER_INFLIGHT_TOTAL=" + strconv.Itoa(c.Concurrency), "LISTENER_INFLIGHT_PER_PARTITION=" + strconv.Itoa(c.PerPartition),
		// At the configured concurrency, as the listener before it runs: the
		// scenario measures what a crash replays with that many in flight.
		"LISTENER_CONCURRENCY=fixed",
		"LISTENER_ORDERING=key", "LISTENER_HTTP_ADDR=", "LISTENER_PROGRESS_INTERVAL=0", "LOG_LEVEL=warn", "LOG_FORMAT=json",
	}, c.Env...)
}

// Run takes the listener binary bin (named listener in the report) through
// one crash, at the moment kill names, on a group of its own.
func (c *CrashReplay) Run(listener, bin string, round int, kill string) (CrashResult, error) {
	res := CrashResult{Listener: listener, Round: round, Kill: kill, Records: c.Records, RecordBytes: c.RecordBytes, Keys: c.Keys, Partitions: c.Partitions,
		LatencyMS: float64(c.Latency) / float64(time.Millisecond), Concurrency: c.Concurrency, PerPartition: c.PerPartition}
	group := fmt.Sprintf("%s-%s-%d", c.topic, listener, round)
	file := func(n int, ext string) string { return filepath.Join(c.Work, fmt.Sprintf("%s-%d.%s", group, n, ext)) }
	fail := func(err error) (CrashResult, error) {
		return res, fmt.Errorf("crash replay, %s listener, round %d: %w", listener, round, err)
	}

	first, err := startListener(listener+" listener 1", bin, file(1, "log"), c.env(group, file(1, "records"))...)
	if err != nil {
		return fail(err)
	}
	defer first.kill9()
	log1 := &lineCounter{path: file(1, "records")}
	defer log1.close()
	watch := func(p *listenerProc, l *lineCounter, atLeast int64) func() (bool, error) {
		return func() (bool, error) {
			if err := p.alive(); err != nil {
				return false, err
			}
			n, err := l.count()
			return n >= atLeast, err
		}
	}
	if err := poll("the first process's first record", 5*time.Millisecond, 2*time.Minute, watch(first, log1, 1)); err != nil {
		return fail(withLog(err, first))
	}
	began := time.Now()
	commits, err := newCommitWatcher(c.Brokers, c.topic, group)
	if err != nil {
		return fail(err)
	}
	defer commits.close()
	killAt := int64(float64(c.Records) * c.KillAt)
	lastLook := time.Time{}
	halfway := func() (bool, error) {
		if time.Since(lastLook) >= CommitPoll {
			lastLook = time.Now()
			if err := commits.look(); err != nil {
				return false, err
			}
		}
		return watch(first, log1, killAt)()
	}
	if err := poll(fmt.Sprintf("%d records in the first process's record log", killAt), time.Millisecond, 5*time.Minute, halfway); err != nil {
		return fail(withLog(err, first))
	}
	switch kill {
	case KillAfterCommit:
		seen := commits.changed
		next := func() (bool, error) {
			if err := first.alive(); err != nil {
				return false, err
			}
			// The lines just before each look, so that those completed
			// since the commit seen are known.
			if _, err := log1.count(); err != nil {
				return false, err
			}
			if err := commits.look(); err != nil {
				return false, err
			}
			return commits.changed.After(seen), nil
		}
		if err := poll("the group's next commit", CommitPoll, time.Minute, next); err != nil {
			return fail(withLog(err, first))
		}
	case KillAnywhere:
	default:
		return fail(fmt.Errorf("unknown kill moment %q", kill))
	}
	first.kill9()
	killed := time.Now()
	if _, err := log1.count(); err != nil { // what it wrote up to the kill
		return fail(err)
	}
	res.HandledBeforeKill = log1.lines
	res.FirstRate = float64(log1.lines) / killed.Sub(began).Seconds()
	if !commits.changed.IsZero() {
		res.SinceCommitMS = float64(killed.Sub(commits.changed)) / float64(time.Millisecond)
		res.SinceCommit = log1.since(commits.changed)
	}

	committed, metadata, err := committedWithMetadata(c.Brokers, c.topic, group)
	if err != nil {
		return fail(err)
	}
	cover := newCommitCover(committed, metadata)
	res.CommittedBelow, res.NamedFinished = cover.below(), cover.named()
	for _, m := range metadata {
		res.MetadataBytes += len(m)
		res.MetadataMaxBytes = max(res.MetadataMaxBytes, len(m))
	}

	second, err := startListener(listener+" listener 2", bin, file(2, "log"), c.env(group, file(2, "records"))...)
	if err != nil {
		return fail(err)
	}
	defer second.kill9()
	restarted := time.Now()
	log2 := &lineCounter{path: file(2, "records")}
	defer log2.close()
	if err := poll("the second process's first record", 5*time.Millisecond, 2*time.Minute, watch(second, log2, 1)); err != nil {
		return fail(withLog(err, second))
	}
	res.RestartSeconds = time.Since(restarted).Seconds()
	resumed := time.Now()
	atEnd := func() (bool, error) {
		if err := second.alive(); err != nil {
			return false, err
		}
		p, err := offsets.Read(c.Brokers, c.topic, group)
		return err == nil && p.AtEnd(), nil
	}
	if err := poll("the group's committed offsets at the end offsets", 100*time.Millisecond, 5*time.Minute, atEnd); err != nil {
		return fail(withLog(err, second))
	}
	res.FinishSeconds = time.Since(restarted).Seconds()
	if err := second.stop(time.Minute); err != nil {
		return fail(err)
	}
	if _, err := log2.count(); err != nil {
		return fail(err)
	}
	res.SecondRate = float64(log2.lines) / time.Since(resumed).Seconds()

	one, err := readRecordLog(file(1, "records"), c.ends)
	if err != nil {
		return fail(err)
	}
	two, err := readRecordLog(file(2, "records"), c.ends)
	if err != nil {
		return fail(err)
	}
	t := tally(c.ends, one, two)
	res.HandledTwice, res.Extra, res.Never = t.HandledTwice, t.Extra, t.Never
	_, res.NotCovered = cover.split(c.ends, one)
	res.RanCovered, _ = cover.split(c.ends, two)
	if c.Log != nil {
		fmt.Fprintf(c.Log, "kafka  crash-replay   %-6s round %d, killed %s: at %d handled (%.0f records/s; %d completed in the %.0f ms since the last commit); commit: %d below, %d named finished, metadata %d B (largest %d B); not covered %d; handled twice %d, ran though covered %d, never handled %d; restart %.1fs, finish %.1fs\n",
			listener, round, kill, res.HandledBeforeKill, res.FirstRate, res.SinceCommit, res.SinceCommitMS, res.CommittedBelow, res.NamedFinished, res.MetadataBytes, res.MetadataMaxBytes,
			res.NotCovered, res.HandledTwice, res.RanCovered, res.Never, res.RestartSeconds, res.FinishSeconds)
	}
	return res, nil
}

// committedWithMetadata reads group's committed offset and its metadata for
// every partition of topic.
func committedWithMetadata(brokers []string, topic, group string) (map[int32]int64, map[int32]string, error) {
	cfg := sarama.NewConfig()
	cfg.Version = sarama.V3_6_0_0
	admin, err := sarama.NewClusterAdmin(brokers, cfg)
	if err != nil {
		return nil, nil, err
	}
	defer admin.Close()
	parts, err := topicPartitions(admin, topic)
	if err != nil {
		return nil, nil, err
	}
	return listCommitted(admin, topic, group, parts)
}

// commitWatcher reads a group's committed offsets (one admin connection
// kept open) and remembers when it last saw them change.
type commitWatcher struct {
	admin   sarama.ClusterAdmin
	topic   string
	group   string
	parts   []int32
	last    map[int32]int64
	primed  bool      // last holds a first reading
	changed time.Time // zero until a change was seen
}

func newCommitWatcher(brokers []string, topic, group string) (*commitWatcher, error) {
	cfg := sarama.NewConfig()
	cfg.Version = sarama.V3_6_0_0
	admin, err := sarama.NewClusterAdmin(brokers, cfg)
	if err != nil {
		return nil, err
	}
	parts, err := topicPartitions(admin, topic)
	if err != nil {
		admin.Close()
		return nil, err
	}
	return &commitWatcher{admin: admin, topic: topic, group: group, parts: parts, last: map[int32]int64{}}, nil
}

// look reads the committed offsets once.
func (w *commitWatcher) look() error {
	committed, _, err := listCommitted(w.admin, w.topic, w.group, w.parts)
	if err != nil {
		return err
	}
	for p, o := range committed {
		if w.primed && o != w.last[p] {
			w.changed = time.Now()
		}
		w.last[p] = o
	}
	w.primed = true
	return nil
}

func (w *commitWatcher) close() { _ = w.admin.Close() }

func topicPartitions(admin sarama.ClusterAdmin, topic string) ([]int32, error) {
	meta, err := admin.DescribeTopics([]string{topic})
	if err != nil || len(meta) != 1 || meta[0].Err != sarama.ErrNoError {
		return nil, fmt.Errorf("describe topic %s: %v", topic, err)
	}
	var parts []int32
	for _, p := range meta[0].Partitions {
		parts = append(parts, p.ID)
	}
	return parts, nil
}

// listCommitted reads group's committed offset and its metadata for parts
// of topic (offset -1, metadata empty: none committed).
func listCommitted(admin sarama.ClusterAdmin, topic, group string, parts []int32) (map[int32]int64, map[int32]string, error) {
	res, err := admin.ListConsumerGroupOffsets(group, map[string][]int32{topic: parts})
	if err != nil {
		return nil, nil, fmt.Errorf("committed offsets of group %s: %w", group, err)
	}
	committed, metadata := map[int32]int64{}, map[int32]string{}
	for _, p := range parts {
		b := res.GetBlock(topic, p)
		if b == nil || b.Err != sarama.ErrNoError {
			return nil, nil, fmt.Errorf("committed offset of %s/%d: %v", topic, p, b)
		}
		committed[p], metadata[p] = b.Offset, b.Metadata
	}
	return committed, metadata, nil
}
