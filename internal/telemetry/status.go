package telemetry

import (
	"encoding/json"
	"fmt"
	"html/template"
	"net/http"
	"time"

	"github.com/patchflow/patchflow/actors"
	"github.com/patchflow/patchflow/messages"
)

// Status is what /status shows, and /status.json serves. Its JSON names
// are snake_case throughout; a value that does not exist (no committed
// offset yet, no record pinning the watermark) is absent, never a
// placeholder number.
type Status struct {
	Now   time.Time `json:"now"`
	Ready bool      `json:"ready"`
	// Why says why the process is not ready; empty (absent) when it is.
	Why        string            `json:"why,omitempty"`
	Partitions []PartitionStatus `json:"partitions"`
	// Totals are the pipeline's counters; Totals.SkippedByReason splits the
	// skipped records by reason (absent before the first skip),
	// Totals.DeadLetteredByReason the dead-lettered ones (every reason
	// present from the start).
	Totals actors.StatsSnapshot `json:"totals"`
	// Concurrency is the process-wide in-flight limit.
	Concurrency ConcurrencyStatus `json:"concurrency"`
	// Outbox is the outbox relay's state; absent without a relay.
	Outbox *OutboxStatus `json:"outbox,omitempty"`
	// Topics is the group's lag on each topic over every partition,
	// claimed or not; absent before the first read.
	Topics []TopicStatus `json:"topics,omitempty"`
	// Settings is the effective configuration, secrets redacted.
	Settings []Setting `json:"settings"`
}

// ConcurrencyStatus is the process-wide in-flight limit: fixed at G, or
// adaptive between its floor and G; and S, the limit of each partition.
type ConcurrencyStatus struct {
	Mode    string `json:"mode"`
	Law     string `json:"law,omitempty"`
	Limit   int    `json:"limit"`
	Floor   int    `json:"floor"`
	Ceiling int    `json:"ceiling"` // G, Config.InFlightTotal
	// PerPartition is S, LISTENER_INFLIGHT_PER_PARTITION.
	PerPartition int     `json:"per_partition_limit"`
	InFlight     int     `json:"in_flight"`
	Baseline     float64 `json:"baseline_seconds"`
	Latency      float64 `json:"latency_seconds"`
	Queue        float64 `json:"queue_records"`
	Probing      bool    `json:"probing"`
	SlowStart    bool    `json:"slow_start"`
}

// PartitionStatus is one row of the partitions table.
type PartitionStatus struct {
	Topic      string `json:"topic"`
	Partition  int32  `json:"partition"`
	Generation int32  `json:"generation"`
	// Committed is the group's committed offset (see
	// actors.PartitionState); nil (absent) while the group has none.
	Committed *int64 `json:"committed,omitempty"`
	// Admitted is the highest offset admitted; nil (absent) before the first.
	Admitted      *int64 `json:"admitted,omitempty"`
	HighWatermark int64  `json:"high_watermark"`
	Lag           int64  `json:"lag"`
	InFlight      int    `json:"in_flight"`
	// InFlightLimit is the partition's limit, S.
	InFlightLimit int `json:"in_flight_limit"`
	// PinnedOffset is the oldest unfinished offset, the record holding the
	// watermark; nil (absent) when nothing is in flight.
	PinnedOffset  *int64  `json:"pinned_offset,omitempty"`
	PinnedKey     string  `json:"pinned_key,omitempty"`
	PinnedSeconds float64 `json:"pinned_seconds"`
	// PinnedFailure is the pinned record's last failed attempt, if any.
	PinnedFailure string  `json:"pinned_failure,omitempty"`
	RecordsPerSec float64 `json:"records_per_second"`
	// DeadLetterBlocked is set while a dead-letter write keeps failing.
	DeadLetterBlocked *DeadLetterBlockStatus `json:"dead_letter_blocked,omitempty"`
	// SpanBlockedSeconds is set while the partition admits nothing because
	// its next record is SpanLimit offsets past the pinned one.
	SpanBlockedSeconds *float64 `json:"span_blocked_seconds,omitempty"`
	SpanLimit          int64    `json:"span_limit"`
	// UnconfirmedSeconds is set while the partition admits nothing because
	// the group's coordinator has not confirmed the member for a session
	// timeout (cut off from it, the member may have been thrown out).
	UnconfirmedSeconds *float64 `json:"unconfirmed_seconds,omitempty"`
	// PausedSeconds is set while the partition admits nothing because the
	// application paused its topic: how long it has waited.
	PausedSeconds *float64 `json:"paused_seconds,omitempty"`
	// CreditWaitSeconds is set while the partition has its next record in
	// hand and waits for a credit: its own (S records in flight) or the
	// process's (the process-wide limit is held).
	CreditWaitSeconds *float64 `json:"credit_wait_seconds,omitempty"`
	// MetadataBytes is the size of the commit metadata last marked.
	MetadataBytes int `json:"commit_metadata_bytes"`
	// Held counts records whose latest failure nothing could judge;
	// Overdue, attempts running past their deadline and its grace.
	Held    int `json:"held"`
	Overdue int `json:"overdue"`
}

// DeadLetterBlockStatus is a partition's failing dead-letter write.
type DeadLetterBlockStatus struct {
	Offset  int64   `json:"offset"`
	Seconds float64 `json:"seconds"`
	Writes  int     `json:"writes"`
	Error   string  `json:"error"`
}

// Setting is one configuration value.
type Setting struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}

// statusSource builds Status snapshots and remembers the previous one to
// compute recent throughput per partition.
type statusSource struct {
	ready *Readiness
	// validationReasons are shown at 0 before their first dead letter.
	validationReasons []messages.Reason
	settings          []Setting
	outbox            func() *OutboxStatus // nil: no relay line
	topics            func() []TopicStatus
	prev              map[[2]any]int64
	prevAt            time.Time
}

func (s *statusSource) snapshot() Status {
	now := time.Now()
	ok, why := s.ready.Check(now)
	if ok {
		why = "" // the verdict says it
	}
	// Empty lists, not null, before the first claim and without settings.
	st := Status{Now: now, Ready: ok, Why: why, Totals: s.ready.Bridge.Stats().Snapshot(),
		Partitions: []PartitionStatus{}, Settings: append([]Setting{}, s.settings...)}
	st.Totals.DeadLetteredByReason = byReason(st.Totals.DeadLetteredByReason, append(messages.DeadLetterReasons(), s.validationReasons...))
	for topic, t := range st.Totals.ByTopic {
		t.DeadLetteredByReason = deadLetteredByReason(t, s.validationReasons)
		st.Totals.ByTopic[topic] = t
	}
	if s.outbox != nil {
		st.Outbox = s.outbox()
	}
	if s.topics != nil {
		st.Topics = s.topics()
	}
	c := s.ready.Bridge.Concurrency()
	st.Concurrency = ConcurrencyStatus{Mode: c.Mode, Law: c.Law, Limit: c.Limit, Floor: c.Floor, Ceiling: c.Ceiling,
		PerPartition: s.ready.Bridge.Settings().InFlightPerPartition, InFlight: int(st.Totals.InFlight),
		Baseline: c.Baseline.Seconds(), Latency: c.Latency.Seconds(), Queue: c.Queue, Probing: c.Probing, SlowStart: c.SlowStart}
	next := map[[2]any]int64{}
	for _, p := range s.ready.Bridge.Partitions() {
		ps := partitionStatus(p, now)
		k := [2]any{p.Topic, p.Partition}
		if p.Committed >= 0 {
			next[k] = p.Committed
		}
		if before, seen := s.prev[k]; seen && now.After(s.prevAt) && p.Committed >= before {
			ps.RecordsPerSec = float64(p.Committed-before) / now.Sub(s.prevAt).Seconds()
		}
		st.Partitions = append(st.Partitions, ps)
	}
	s.prev, s.prevAt = next, now
	return st
}

// partitionStatus is one claim's row at now (its throughput aside, which
// takes the previous snapshot).
func partitionStatus(p actors.PartitionState, now time.Time) PartitionStatus {
	ps := PartitionStatus{Topic: p.Topic, Partition: p.Partition, Generation: p.Generation,
		Committed: offsetOrNil(p.Committed), Admitted: offsetOrNil(p.Admitted), HighWatermark: p.HighWatermark,
		Lag: p.Lag(), InFlight: p.InFlight, InFlightLimit: p.InFlightLimit,
		PinnedKey: p.PinnedKey, PinnedSeconds: p.PinnedFor(now).Seconds()}
	if p.InFlight > 0 {
		off := p.PinnedOffset
		ps.PinnedOffset = &off
	}
	if f := p.PinnedFailure; f != nil {
		ps.PinnedFailure = fmt.Sprintf("attempt %d: %s", f.GetAttempt(), f.GetError())
	}
	if b := p.DeadLetterBlocked; b != nil {
		ps.DeadLetterBlocked = &DeadLetterBlockStatus{Offset: b.Offset, Seconds: now.Sub(b.Since).Seconds(), Writes: b.Writes, Error: b.Error}
	}
	// A wait that began after now (the bridge's partitions are read after
	// the snapshot took its time) has lasted nothing yet.
	if !p.SpanBlocked.IsZero() {
		d := max(0, now.Sub(p.SpanBlocked).Seconds())
		ps.SpanBlockedSeconds = &d
	}
	if !p.Unconfirmed.IsZero() {
		d := max(0, now.Sub(p.Unconfirmed).Seconds())
		ps.UnconfirmedSeconds = &d
	}
	if !p.Paused.IsZero() {
		d := max(0, now.Sub(p.Paused).Seconds())
		ps.PausedSeconds = &d
	}
	if !p.WaitingForCredit.IsZero() {
		d := max(0, now.Sub(p.WaitingForCredit).Seconds())
		ps.CreditWaitSeconds = &d
	}
	ps.SpanLimit, ps.MetadataBytes = p.SpanLimit, p.MetadataBytes
	ps.Held, ps.Overdue = p.Held, p.Overdue
	return ps
}

// offsetOrNil is off, or nil for the state's "none" (-1).
func offsetOrNil(off int64) *int64 {
	if off < 0 {
		return nil
	}
	return &off
}

var statusPage = template.Must(template.New("status").Funcs(template.FuncMap{"ms": func(s float64) float64 { return s * 1000 },
	// Optional seconds are pointers, which printf would print as such.
	"seconds": func(s *float64) float64 { return *s }}).Parse(`<!doctype html>
<html><head><meta charset="utf-8"><meta http-equiv="refresh" content="2"><title>patchflow status</title>
<style>
body{font-family:system-ui,sans-serif;margin:2em;color:#222}table{border-collapse:collapse;margin:1em 0}
td,th{border:1px solid #ccc;padding:.3em .7em;text-align:right}th{background:#f3f3f3}td.l{text-align:left}
.ok{color:#080}.bad{color:#b00}
</style></head><body>
<h1>patchflow consumer</h1>
<p>Readiness: {{if .Ready}}<b class="ok">ready</b>{{else}}<b class="bad">not ready</b>: {{.Why}}{{end}} &middot; {{.Now.Format "15:04:05"}} &middot; refreshes every 2 s &middot; <a href="status.json">JSON</a></p>
{{with .Concurrency}}<p id="concurrency">Concurrency: <b>{{.Mode}}</b>{{if eq .Mode "adaptive"}} ({{.Law}}){{end}} &middot; in flight {{.InFlight}} of the limit {{.Limit}}{{if eq .Mode "adaptive"}} (floor {{.Floor}}, ceiling G {{.Ceiling}}){{else}} (G){{end}} &middot; at most S {{.PerPartition}} per partition{{if eq .Mode "adaptive"}}{{if .SlowStart}} &middot; slow start{{end}}{{if .Probing}} &middot; probing the baseline{{end}} &middot; handler latency {{printf "%.1f" (ms .Latency)}} ms against a no-load baseline of {{printf "%.1f" (ms .Baseline)}} ms &middot; estimated queue {{printf "%.1f" .Queue}}{{end}}</p>{{end}}
<p id="totals">Succeeded {{.Totals.Succeeded}} &middot; skipped {{.Totals.Skipped}} &middot; dead-lettered {{.Totals.DeadLettered}} &middot; retried {{.Totals.Retried}} ({{.Totals.RetriedOwn}} own failures, {{.Totals.RetriedShared}} shared, {{.Totals.RetriedHeld}} held for want of evidence) &middot; panics {{.Totals.Panics}} &middot; dead-letter write failures {{.Totals.DeadLetterWriteFailures}} &middot; resumed {{.Totals.Resumed}} (finished by an earlier owner, not run again) &middot; abandoned {{.Totals.Abandoned}} &middot; fenced {{.Totals.Fenced}}</p>
{{range .Topics}}<p class="topic">Topic <b>{{.Topic}}</b>: lag {{.Lag}} over its {{.Partitions}} partitions{{if .Unclaimed}} &middot; <b class="bad">{{.Unclaimed}} held by no member</b>, {{.UnclaimedLag}} of the lag{{end}} &middot; read {{printf "%.0f" .ReadSecondsAgo}} s ago</p>
{{end}}{{with .Outbox}}<p id="outbox">Outbox: <b{{if or .LastError (ge .OldestSeconds 60.0)}} class="bad"{{end}}>{{.Pending}} waiting</b>, the oldest {{printf "%.1f" .OldestSeconds}} s old &middot; published {{.Published}} &middot; failed {{.Failed}}{{if .Refused}} &middot; <b class="bad">{{.Refused}} refused for good</b>, kept aside (outbox.refused){{end}}{{with .HeldKinds}} &middot; held after a refusal: {{range .}}{{.}} {{end}}{{end}}{{with .LastError}} &middot; <b class="bad">last round: {{.}}</b>{{end}}</p>{{end}}
<table id="partitions"><tr><th>topic</th><th>partition</th><th>generation</th><th>committed</th><th>admitted</th><th>high watermark</th><th>lag</th><th>in flight / S</th><th>oldest unfinished offset</th><th>its key</th><th>its age (s)</th><th>records/s</th><th>trouble</th></tr>
{{range .Partitions}}<tr class="partition"><td class="l">{{.Topic}}</td><td>{{.Partition}}</td><td>{{.Generation}}</td><td>{{with .Committed}}{{.}}{{else}}none{{end}}</td><td>{{with .Admitted}}{{.}}{{else}}none{{end}}</td><td>{{.HighWatermark}}</td><td>{{.Lag}}</td><td>{{.InFlight}} / {{.InFlightLimit}}{{with .CreditWaitSeconds}}{{if ge (seconds .) 1.0}}, waiting {{printf "%.0f" (seconds .)}} s for a credit{{end}}{{end}}</td><td>{{with .PinnedOffset}}{{.}}{{end}}</td><td class="l">{{.PinnedKey}}</td><td>{{printf "%.1f" .PinnedSeconds}}</td><td>{{printf "%.0f" .RecordsPerSec}}</td><td class="l">{{if .Held}}<b class="bad">{{.Held}} held</b>: failing, nothing to judge by (docs/consumer.md, "Held records"). {{end}}{{if .Overdue}}<b class="bad">{{.Overdue}} overdue</b>: a handler running past its deadline. {{end}}{{with .DeadLetterBlocked}}<b class="bad">dead-letter write of offset {{.Offset}} failing for {{printf "%.0f" .Seconds}} s ({{.Writes}} writes): {{.Error}}</b>{{else}}{{$limit := .SpanLimit}}{{with .SpanBlockedSeconds}}<b class="bad">span-blocked for {{printf "%.0f" (seconds .)}} s</b>: nothing is admitted {{$limit}} offsets past the oldest unfinished offset. {{end}}{{.PinnedFailure}}{{end}}{{with .UnconfirmedSeconds}} <b class="bad">unconfirmed for {{printf "%.0f" (seconds .)}} s</b>: the group's coordinator has not confirmed this member for a session timeout; nothing is admitted until it does.{{end}}{{with .PausedSeconds}} paused for {{printf "%.0f" (seconds .)}} s: the application paused the topic.{{end}}</td></tr>
{{else}}<tr><td colspan="13" class="l">no partition claimed</td></tr>{{end}}
</table>
<h2>Skipped by reason</h2><p>Ignored by design: committed, counted, never dead-lettered.</p>
<table id="skipped"><tr><th>reason</th><th>records</th></tr>
{{range $reason, $n := .Totals.SkippedByReason}}<tr class="skip"><td class="l">{{$reason}}</td><td>{{$n}}</td></tr>
{{else}}<tr><td colspan="2" class="l">none yet</td></tr>{{end}}
</table>
<h2>Dead-lettered by reason</h2><p>Written to the dead-letter topic for a person to look at: a broken message's reason, or the class of the failure that gave it up.</p>
<table id="dead-lettered"><tr><th>reason</th><th>records</th></tr>
{{range $reason, $n := .Totals.DeadLetteredByReason}}<tr class="dead-letter"><td class="l">{{$reason}}</td><td>{{$n}}</td></tr>
{{else}}<tr><td colspan="2" class="l">none yet</td></tr>{{end}}
</table>
<h2>Settings</h2><table>{{range .Settings}}<tr><td class="l">{{.Name}}</td><td class="l">{{.Value}}</td></tr>{{end}}</table>
</body></html>
`))

// StatusHandlers returns /status (HTML, refreshing itself) and /status.json.
//
// validation are the handler's validation reasons, shown at 0 before their
// first dead letter (Metrics.KnowReasons).
func StatusHandlers(ready *Readiness, settings []Setting, validation []messages.Reason) (html, js http.Handler) {
	return statusHandlers(&statusSource{ready: ready, settings: settings, validationReasons: validation})
}

func statusHandlers(src *statusSource) (html, js http.Handler) {
	html = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		_ = statusPage.Execute(w, src.snapshot())
	})
	js = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(src.snapshot())
	})
	return html, js
}
