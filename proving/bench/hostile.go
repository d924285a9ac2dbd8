package bench

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/IBM/sarama"

	"github.com/patchflow/patchflow/proving/offsets"
)

// Scenario 10, hostile input: the listener binary with its default settings
// (and the memory limit its pod passes it) on the worst record, answer or
// batch of each kind a producer or VMaaS can send, one kind per topic, each
// followed by ordinary events. For each: the listener's peak resident memory
// (VmHWM), whether it committed every record (the hostile ones included) and
// what it dead-lettered. The pod's limit is 512 MiB.

// BeforeHostileCommit is the commit before issue 37, whose listener the
// scenario measures beside this one.
const BeforeHostileCommit = "0661fe1"

// HostilePodMemory is the Deployment's memory limit (deploy/kubernetes),
// which the pod passes the listener as LISTENER_MEMORY_LIMIT.
const HostilePodMemory = 512 << 20

// HostileResult is one listener on one hostile topic.
type HostileResult struct {
	Row       string `json:"row"`
	Attack    string `json:"attack"`
	Listener  string `json:"listener"`
	Records   int64  `json:"records"`
	Committed int64  `json:"committed"`
	// Finished counts the records handled, skipped or dead-lettered, Held
	// those the retry rule holds for want of evidence (several records
	// failing at one dependency while its check passes: docs/architecture.md,
	// "Whose failure"); a held record pins its partition's committed offset,
	// so the records after it are finished but not committed.
	Finished     int64            `json:"finished"`
	Held         int64            `json:"held"`
	Seconds      float64          `json:"seconds"`
	PeakRSSMiB   float64          `json:"peak_rss_mib"`
	DeadLettered map[string]int64 `json:"dead_lettered_by_reason,omitempty"`
	// Exited says how the process ended when it did not last the run (an
	// out-of-memory kill, say); empty when it ran until stopped.
	Exited string `json:"exited,omitempty"`
}

// hostileRow is one kind of hostile input: what it sends, and what the
// ordinary events after it are.
type hostileRow struct {
	name, attack string
	// records are the hostile records, produced before the ordinary ones.
	records func(now time.Time) ([]*sarama.ProducerMessage, error)
	// compressed produces the hostile records zstd-compressed, a batch each.
	compressed bool
}

// Hostile runs scenario 10.
type Hostile struct {
	Brokers     []string
	DatabaseURL string // an admin URL: each listener run gets a database of its own
	Partitions  int
	// Ordinary is how many ordinary events follow each row's hostile ones.
	Ordinary int
	// Limit bounds each listener run: a listener that has not committed
	// everything by then is stopped and reported as it stood.
	Limit time.Duration
	// MemoryLimit is what the pod passes as LISTENER_MEMORY_LIMIT (its
	// limits.memory), given to the listeners that read it.
	MemoryLimit int64
	Work        string
	Log         io.Writer

	vmaas  *hostileVMaaS
	topics map[string]string // row -> topic
}

// hostileRows are the table of docs/reliability.md, "Hostile input".
func hostileRows() []hostileRow {
	return []hostileRow{
		{name: "dead letter over the limit", attack: "a 600 KB key; a package whose epoch is 600 KB", records: func(now time.Time) ([]*sarama.ProducerMessage, error) {
			big := bytes.Repeat([]byte("k"), 600_000)
			epoch := "kernel-" + strings.Repeat("1", 600_000) + ":4.18.0-305.el8.x86_64"
			return []*sarama.ProducerMessage{
				{Key: sarama.ByteEncoder(big), Value: sarama.ByteEncoder(hostileEvent(hostileHost(1), now, []string{"bash-5.1.8-6.el9_1.x86_64"}))},
				{Key: sarama.StringEncoder(hostileHost(2)), Value: sarama.ByteEncoder(hostileEvent(hostileHost(2), now, []string{epoch}))},
			}, nil
		}},
		{name: "decompression bomb", attack: "four 90 MiB values of zeros, zstd (about 40 KB on the broker)", compressed: true, records: func(now time.Time) ([]*sarama.ProducerMessage, error) {
			var out []*sarama.ProducerMessage
			for i := range 4 {
				out = append(out, &sarama.ProducerMessage{Key: sarama.StringEncoder(hostileHost(10 + i)), Value: sarama.ByteEncoder(make([]byte, 90<<20))})
			}
			return out, nil
		}},
		{name: "big records", attack: "160 events of about 990 KB, 66,000 packages each", records: func(now time.Time) ([]*sarama.ProducerMessage, error) {
			pk := make([]string, 66_000)
			for i := range pk {
				pk[i] = "b" + strconv.Itoa(i) + "-1-1.x"
			}
			var out []*sarama.ProducerMessage
			for i := range 160 {
				id := hostileHost(1000 + i)
				out = append(out, &sarama.ProducerMessage{Key: sarama.StringEncoder(id), Value: sarama.ByteEncoder(hostileEvent(id, now, pk))})
			}
			return out, nil
		}},
		{name: "header bomb", attack: "five records of 300,000 empty headers (about 600 KB each)", records: func(now time.Time) ([]*sarama.ProducerMessage, error) {
			var out []*sarama.ProducerMessage
			for i := range 5 {
				id := hostileHost(200 + i)
				hs := make([]sarama.RecordHeader, 300_000)
				for k := range hs {
					// An empty key, not a null one: the broker refuses a
					// header without a key.
					hs[k].Key = []byte{}
				}
				out = append(out, &sarama.ProducerMessage{Key: sarama.StringEncoder(id), Headers: hs,
					Value: sarama.ByteEncoder(hostileEvent(id, now, []string{"bash-5.1.8-6.el9_1.x86_64"}))})
			}
			return out, nil
		}},
		{name: "answer bomb", attack: "VMaaS answering 60 MiB to eight evaluations at once", records: func(now time.Time) ([]*sarama.ProducerMessage, error) {
			var out []*sarama.ProducerMessage
			for i := range 8 {
				id := hostileHost(300 + i)
				out = append(out, &sarama.ProducerMessage{Key: sarama.StringEncoder(id),
					Value: sarama.ByteEncoder(hostileEvent(id, now, []string{answerBombPackage, "bash-5.1.8-6.el9_1.x86_64"}))})
			}
			return out, nil
		}},
	}
}

// answerBombPackage in an event's package list makes the VMaaS stub answer
// its evaluation with answerBombBytes (the request names it as the client
// writes it, with its epoch: answerBombName is what the stub looks for).
const (
	answerBombPackage = "answer-bomb-1-1.x86_64"
	answerBombName    = `"answer-bomb-`
	answerBombBytes   = 60 << 20
)

func hostileHost(i int) string { return fmt.Sprintf("0badc0de-0000-4000-8000-%012d", i) }

// hostileEvent is a created event of host id with these packages, as
// inventory sends it.
func hostileEvent(id string, at time.Time, packages []string) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, `{"type":"created","timestamp":%q,"platform_metadata":{"request_id":"hostile"},"host":{"id":%q,"org_id":"org-hostile","reporter":"puptoo","display_name":"hostile","system_profile":{"arch":"x86_64","yum_repos":[{"id":"rhel-9-baseos","name":"BaseOS","enabled":true}],"installed_packages":[`,
		at.UTC().Format(time.RFC3339Nano), id)
	for i, p := range packages {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.Quote(p))
	}
	b.WriteString("]}}}")
	return b.Bytes()
}

// Prepare produces every row's topic and starts the VMaaS stub.
func (h *Hostile) Prepare() error {
	v, err := startHostileVMaaS()
	if err != nil {
		return err
	}
	h.vmaas, h.topics = v, map[string]string{}
	now := time.Now()
	for i, row := range hostileRows() {
		topic := fmt.Sprintf("bench-hostile-%d-%d", now.Unix(), i)
		if err := createTopic(h.Brokers, topic, h.Partitions); err != nil {
			return err
		}
		msgs, err := row.records(now)
		if err != nil {
			return err
		}
		if err := produceHostile(h.Brokers, topic, msgs, row.compressed); err != nil {
			return fmt.Errorf("%s: %w", row.name, err)
		}
		var ordinary []*sarama.ProducerMessage
		for j := range h.Ordinary {
			id := hostileHost(10_000 + i*h.Ordinary + j)
			ordinary = append(ordinary, &sarama.ProducerMessage{Key: sarama.StringEncoder(id),
				Value: sarama.ByteEncoder(hostileEvent(id, now, []string{"bash-5.1.8-6.el9_1.x86_64", "kernel-4.18.0-305.el8.x86_64"}))})
		}
		if err := produceHostile(h.Brokers, topic, ordinary, false); err != nil {
			return err
		}
		h.topics[row.name] = topic
	}
	return nil
}

// Close stops the VMaaS stub.
func (h *Hostile) Close() error {
	if h.vmaas != nil {
		return h.vmaas.srv.Close()
	}
	return nil
}

// produceHostile writes msgs to topic; compressed: each in a zstd batch of
// its own, as large as it is.
func produceHostile(brokers []string, topic string, msgs []*sarama.ProducerMessage, compressed bool) error {
	cfg := sarama.NewConfig()
	cfg.Version = sarama.V3_6_0_0
	cfg.Producer.Return.Successes = true
	cfg.Producer.RequiredAcks = sarama.WaitForLocal
	// sarama counts each header at 10 bytes more than the broker does: a
	// record of 300,000 empty headers (600 KB to the broker) is 3.6 MB to
	// it. One record a batch, measured by the broker alone.
	cfg.Producer.MaxMessageBytes = 8 << 20
	cfg.Producer.Flush.MaxMessages = 1
	if compressed {
		cfg.Producer.Compression = sarama.CompressionZSTD
		cfg.Producer.MaxMessageBytes = 100 << 20 // sarama measures before compressing; the broker after
	}
	p, err := sarama.NewSyncProducer(brokers, cfg)
	if err != nil {
		return err
	}
	defer p.Close()
	for _, m := range msgs {
		m.Topic = topic
	}
	err = p.SendMessages(msgs)
	var perrs sarama.ProducerErrors
	if errors.As(err, &perrs) && len(perrs) > 0 {
		return fmt.Errorf("%d of %d records not produced, the first: %w", len(perrs), len(msgs), perrs[0].Err)
	}
	return err
}

// Run runs one listener binary on every row's topic, one process per row.
// readsMemoryLimit: the build reads LISTENER_MEMORY_LIMIT.
func (h *Hostile) Run(ctx context.Context, listener, bin string, readsMemoryLimit bool) ([]HostileResult, error) {
	var out []HostileResult
	for _, row := range hostileRows() {
		res, err := h.runRow(ctx, row, listener, bin, readsMemoryLimit)
		if err != nil {
			return out, fmt.Errorf("%s, %s: %w", listener, row.name, err)
		}
		out = append(out, res)
		if h.Log != nil {
			fmt.Fprintf(h.Log, "kafka  hostile        %-28s %-7s peak RSS %5.0f MiB, committed %d of %d in %.0fs (finished %d, held %d), dead-lettered %v %s\n",
				row.name, listener, res.PeakRSSMiB, res.Committed, res.Records, res.Seconds, res.Finished, res.Held, res.DeadLettered, res.Exited)
		}
	}
	return out, nil
}

func (h *Hostile) runRow(ctx context.Context, row hostileRow, listener, bin string, readsMemoryLimit bool) (HostileResult, error) {
	topic := h.topics[row.name]
	res := HostileResult{Row: row.name, Attack: row.attack, Listener: listener}
	group := topic + "-" + listener
	dbName := strings.NewReplacer("-", "_").Replace(group)
	db, err := createDatabase(ctx, h.DatabaseURL, dbName)
	if err != nil {
		return res, err
	}
	defer func() { _ = dropDatabase(context.Background(), h.DatabaseURL, dbName) }()
	addr, err := freeAddr()
	if err != nil {
		return res, err
	}
	env := []string{"KAFKA_BROKERS=" + strings.Join(h.Brokers, ","), "KAFKA_TOPIC=" + topic, "KAFKA_GROUP=" + group,
		"KAFKA_DLQ_TOPIC=" + topic + "-dlq", "DATABASE_URL=" + db, "VMAAS_URL=" + h.vmaas.url, "LISTENER_HTTP_ADDR=" + addr,
		"LOG_FORMAT=json", "LOG_LEVEL=warn"}
	if readsMemoryLimit {
		env = append(env, "LISTENER_MEMORY_LIMIT="+strconv.FormatInt(h.MemoryLimit, 10))
	}
	p, err := startListener(listener, bin, filepath.Join(h.Work, group+".log"), env...)
	if err != nil {
		return res, err
	}
	start := time.Now()
	var peak float64
	var last scrape
	done := func() (bool, error) {
		if s, err := procStatus(p.cmd.Process.Pid); err == nil {
			peak = max(peak, s["VmHWM"]/1024)
		}
		if m, err := fetchMetrics("http://" + addr + "/metrics"); err == nil {
			last = m
		}
		prog, err := offsets.Read(h.Brokers, topic, group)
		if err != nil {
			return false, nil // the group is not there yet
		}
		res.Records, res.Committed = prog.Total(), prog.Done()
		res.Finished = int64(last.sum("patchflow_records_total", outcomeIn("ok", "skipped", "dead_lettered")))
		res.Held = int64(last.sum("patchflow_records_held", nil))
		return res.Records > 0 && (res.Committed >= res.Records || (res.Held > 0 && res.Finished+res.Held >= res.Records)), nil
	}
	for {
		if err := p.alive(); err != nil {
			res.Exited = err.Error()
			break
		}
		ok, err := done()
		if err != nil {
			return res, err
		}
		if ok || time.Since(start) > h.Limit {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	res.Seconds = time.Since(start).Seconds()
	res.PeakRSSMiB = peak
	res.DeadLettered = map[string]int64{}
	for _, s := range last {
		if s.name == "patchflow_records_dead_lettered_total" && s.value > 0 {
			res.DeadLettered[s.labels["reason"]] += int64(s.value)
		}
	}
	if res.Exited == "" {
		if err := p.stop(30 * time.Second); err != nil && h.Log != nil {
			fmt.Fprintf(h.Log, "bench: %s did not stop cleanly: %v\n", listener, err)
		}
	}
	return res, nil
}

// hostileVMaaS answers VMaaS's updates API: an empty update list, or
// answerBombBytes of JSON to a request naming answerBombPackage.
type hostileVMaaS struct {
	srv *http.Server
	url string
}

func startHostileVMaaS() (*hostileVMaaS, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	v := &hostileVMaaS{url: "http://" + ln.Addr().String()}
	bomb := append([]byte(`{"update_list":{},"padding":"`), bytes.Repeat([]byte("x"), answerBombBytes)...)
	bomb = append(bomb, `"}`...)
	v.srv = &http.Server{ReadHeaderTimeout: 10 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(io.LimitReader(r.Body, 64<<20))
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		if bytes.Contains(body, []byte(answerBombName)) {
			w.Header().Set("Content-Length", strconv.Itoa(len(bomb)))
			_, _ = w.Write(bomb)
			return
		}
		_, _ = io.WriteString(w, `{"update_list":{}}`)
	})}
	go func() { _ = v.srv.Serve(ln) }()
	return v, nil
}

// hostilePasses: the listener kept within its pod's memory, lived through
// the row and committed every record.
func (h HostileResult) hostilePasses() bool {
	return h.Exited == "" && h.PeakRSSMiB < HostilePodMemory>>20 && h.Records > 0 &&
		(h.Committed >= h.Records || (h.Held > 0 && h.Finished+h.Held >= h.Records))
}

// hostileTargets is issue 37's row: every hostile row within the pod's
// memory, everything committed.
func (r *Report) hostileTargets() [][4]string {
	var rows [][4]string
	for _, h := range r.Hostile {
		if h.Listener != ListenerAfter {
			continue
		}
		rows = append(rows, [4]string{"10. hostile input: " + h.Row, fmt.Sprintf("peak RSS under %d MiB (the pod's limit), every record committed (or finished, but for those held)", HostilePodMemory>>20),
			fmt.Sprintf("%.0f MiB, committed %d of %d, %d held", h.PeakRSSMiB, h.Committed, h.Records, h.Held), metText(h.hostilePasses())})
	}
	return rows
}

func (r *Report) hostileTable(b *strings.Builder) {
	if len(r.Hostile) == 0 {
		return
	}
	fmt.Fprintf(b, "\n## 10. Hostile input\n\nThe listener binary with its default settings (and, for this build, the %d MiB memory limit its pod passes it as `LISTENER_MEMORY_LIMIT`), its real handler, PostgreSQL and a VMaaS stub, on one topic per row: the hostile records first, then %s ordinary events, %d partitions. Each row runs in a fresh process until every record is committed (or, where the retry rule holds records for want of evidence, every other record is finished) or %s pass; **peak RSS** is the kernel's VmHWM for that process. **before** is the listener at %s (the commit before issue 37), run the same way one row after the other in the same run.\n\n",
		HostilePodMemory>>20, "200", 8, "3 minutes", BeforeHostileCommit)
	b.WriteString("| row | attack | listener | peak RSS MiB | committed | finished | held | records | seconds | dead-lettered by reason | ended | |\n|---|---|---|---|---|---|---|---|---|---|---|---|\n")
	for _, h := range r.Hostile {
		var dl []string
		for _, k := range slices.Sorted(maps.Keys(h.DeadLettered)) {
			dl = append(dl, fmt.Sprintf("%s %d", k, h.DeadLettered[k]))
		}
		ended := "stopped"
		if h.Exited != "" {
			ended = "exited: " + strings.SplitN(h.Exited, ";", 2)[0]
		}
		fmt.Fprintf(b, "| %s | %s | %s | %.0f | %d | %d | %d | %d | %.0f | %s | %s | %s |\n", h.Row, h.Attack, h.Listener, h.PeakRSSMiB, h.Committed, h.Finished, h.Held, h.Records, h.Seconds,
			strings.Join(dl, ", "), ended, metText(h.hostilePasses()))
	}
}
