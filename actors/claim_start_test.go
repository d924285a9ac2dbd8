package actors_test

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/IBM/sarama"

	"github.com/patchflow/patchflow/actors"
	"github.com/patchflow/patchflow/actors/ordering"
	"github.com/patchflow/patchflow/messages"
)

// syncBuffer collects log lines written from several goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// line returns the first log line with msg, or "".
func (s *syncBuffer) line(msg string) string {
	for l := range strings.SplitSeq(s.String(), "\n") {
		if strings.Contains(l, "msg=\""+msg+"\"") || strings.Contains(l, "msg="+msg+" ") {
			return l
		}
	}
	return ""
}

// startLoggedMember runs a member of k's group with a bridge that reads
// committed offsets as the listener's does, logging to a buffer.
// A nil handler succeeds at once.
func startLoggedMember(t *testing.T, k actors.KafkaSettings, s actors.Settings, h actors.Handler) (*actors.Bridge, *syncBuffer, func()) {
	t.Helper()
	if h == nil {
		h = actors.HandlerFunc(func(context.Context, *messages.Record) error { return nil })
	}
	logs := &syncBuffer{}
	b, err := actors.NewBridge(actors.BridgeConfig{System: newTestSystem(t), Settings: s, Committed: committedReader(t, k),
		Handler:     h,
		Logger:      slog.New(slog.NewTextHandler(logs, nil)),
		DeadLetters: actors.DeadLetterFunc(func(context.Context, *messages.DeadLetter) error { return nil })})
	if err != nil {
		t.Fatal(err)
	}
	return b, logs, runMember(t, k, s, b, nil)
}

// onePartition waits for b to claim its one partition and returns its state.
func onePartition(t *testing.T, b *actors.Bridge) actors.PartitionState {
	t.Helper()
	var ps []actors.PartitionState
	waitFor2(t, "the partition claimed", 20*time.Second, func() bool { ps = b.Partitions(); return len(ps) == 1 })
	return ps[0]
}

// A partition claimed at its end, with nothing to read, shows the offset
// the group committed, from the claim's start: in its state (what /status
// and the metrics read) and in the claim's log lines. It showed -1 until
// the claim's first mark, which never comes when there is nothing to read.
func TestIdleClaimShowsTheGroupsCommittedOffset(t *testing.T) {
	_, k := newKfake(t, "idle", "idle-group", 1)
	s := testSettings(ordering.Unordered)
	produceEven(t, k, 1, 5)
	reader := committedReader(t, k)

	// A first member consumes the five records and commits them.
	first, _, stop := startLoggedMember(t, k, s, nil)
	waitFor2(t, "offset 5 marked", 20*time.Second, func() bool { ps := first.Partitions(); return len(ps) == 1 && ps[0].Committed == 5 })
	stop()
	if c, err := reader(context.Background(), k.Topic, 0); err != nil || c.Offset != 5 {
		t.Fatalf("committed %+v (%v), want 5", c, err)
	}

	// The next one claims the partition at its end: nothing to read.
	next, logs, stop := startLoggedMember(t, k, s, nil)
	p := onePartition(t, next)
	if p.Committed != 5 || p.Admitted != -1 || p.Lag() != 0 || p.InFlightLimit != s.InFlightPerPartition {
		t.Fatalf("idle claim: committed %d, admitted %d, lag %d, in-flight limit %d; want 5, none (-1), 0, S=%d",
			p.Committed, p.Admitted, p.Lag(), p.InFlightLimit, s.InFlightPerPartition)
	}
	started := logs.line("claim started")
	if !strings.Contains(started, " committed=5 ") || strings.Contains(started, "initial_offset") || strings.Contains(started, "starts_at") {
		t.Fatalf("claim started: want committed=5 and no sentinel offset:\n%s", logs)
	}
	if joined := logs.line("joined consumer group"); !strings.Contains(joined, " claims=idle:0") {
		t.Fatalf("joined: want claims=idle:0, not Go's map syntax:\n%s", logs)
	}
	stop()
	ended := logs.line("claim ended")
	if !strings.Contains(ended, " committed=5 ") || strings.Contains(ended, "=-1") {
		t.Fatalf("claim ended: want committed=5 and no -1:\n%s", logs)
	}
}

// A partition the group never committed, with nothing in it, has no
// committed offset to show: its state says none (-1, which no output shows
// as an offset), and the claim's log line where consumption begins instead
// of sarama's sentinel (-2).
func TestNeverCommittedClaimShowsNone(t *testing.T) {
	_, k := newKfake(t, "fresh", "fresh-group", 1)
	s := testSettings(ordering.Unordered)
	b, logs, stop := startLoggedMember(t, k, s, nil)
	if p := onePartition(t, b); p.Committed != -1 || p.Admitted != -1 || p.Lag() != 0 {
		t.Fatalf("fresh claim: committed %d, admitted %d, lag %d; want none, none, 0", p.Committed, p.Admitted, p.Lag())
	}
	waitFor2(t, "the claim's log line", 5*time.Second, func() bool { return logs.line("claim started") != "" })
	if started := logs.line("claim started"); !strings.Contains(started, " starts_at=oldest ") || strings.Contains(started, "committed=") ||
		strings.Contains(started, "=-2") {
		t.Fatalf("claim started: want starts_at=oldest, no committed offset, no -2:\n%s", logs)
	}
	stop()
	if ended := logs.line("claim ended"); ended == "" || strings.Contains(ended, "committed=") || strings.Contains(ended, "=-1") {
		t.Fatalf("claim ended: want no committed offset and no -1:\n%s", logs)
	}
}

// A committed offset sarama cannot start at (out of the log's range: the
// records there were deleted) makes it begin at the oldest offset, with a
// sentinel for InitialOffset. The group's offset then says nothing of where
// the claim reads: shown as its position, a commit past the end would hide
// a backlog (lag 0 with records unread). The claim has no committed offset
// until its first mark, and its lag does not hide the records in flight.
func TestOutOfRangeCommitShowsNoCommittedOffset(t *testing.T) {
	_, k := newKfake(t, "reset", "reset-group", 1)
	s := testSettings(ordering.Unordered)
	produceEven(t, k, 1, 5)
	first, _, stop := startLoggedMember(t, k, s, nil)
	waitFor2(t, "offset 5 marked", 20*time.Second, func() bool { ps := first.Partitions(); return len(ps) == 1 && ps[0].Committed == 5 })
	stop()
	produceEven(t, k, 1, 5) // offsets 5-9
	admin, err := sarama.NewClusterAdmin(k.Brokers, saramaConfig(k.Version))
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	if err := admin.DeleteRecords(k.Topic, map[int32]int64{0: 8}); err != nil {
		t.Fatal(err)
	}

	// The records from 8 on do not finish: nothing is marked.
	hold := actors.HandlerFunc(func(ctx context.Context, _ *messages.Record) error { <-ctx.Done(); return ctx.Err() })
	b, logs, _ := startLoggedMember(t, k, s, hold)
	waitFor2(t, "offsets 8 and 9 in flight", 20*time.Second, func() bool { ps := b.Partitions(); return len(ps) == 1 && ps[0].InFlight == 2 })
	if p := b.Partitions()[0]; p.Start >= 0 || p.Committed != -1 || p.Admitted != 9 || p.Lag() < 2 {
		t.Fatalf("claim begun at the oldest offset under an out-of-range commit: start %d, committed %d, admitted %d, lag %d; want a sentinel, none, 9, at least the 2 in flight",
			p.Start, p.Committed, p.Admitted, p.Lag())
	}
	if started := logs.line("claim started"); !strings.Contains(started, " starts_at=oldest ") || strings.Contains(started, "committed=") {
		t.Fatalf("claim started: want starts_at=oldest and no committed offset:\n%s", logs)
	}
}

// Claims read as topic:partitions in the log, in order, never as Go's map
// syntax (map[events:[2 0 1]]).
func TestFormatClaims(t *testing.T) {
	for _, tc := range []struct {
		claims map[string][]int32
		want   string
	}{
		{nil, "none"},
		{map[string][]int32{"events": {2, 0, 1}}, "events:0,1,2"},
		{map[string][]int32{"b": {3}, "a": {1, 0}}, "a:0,1 b:3"},
	} {
		if got := actors.FormatClaims(tc.claims); got != tc.want {
			t.Errorf("FormatClaims(%v) = %q, want %q", tc.claims, got, tc.want)
		}
	}
}
