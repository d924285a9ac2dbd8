package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"os/exec"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/IBM/sarama"

	"github.com/patchflow/patchflow/consumer"
	"github.com/patchflow/patchflow/proving/offsets"
)

// Peer is scenario 12: the consumer library and Confluent Parallel
// Consumer (PeerVersion, its harness in proving/peer, a JVM of its own) on
// the same workloads, on the same real broker, one after the other, rounds
// interleaved. Each run has topics and a group of its own, filled before it
// starts: Records records of RecordBytes on Partitions partitions, Keys
// keys, key ordering, Concurrency in flight (fixed), a handler that waits
// Latency. Workloads:
//   - results: each record produces one 100-byte result, at least once
//     (consumer.CommitPeriodic and Record.Produce; PC's pollAndProduce,
//     PERIODIC_CONSUMER_ASYNCHRONOUS);
//   - results, transactional: the same in one transaction with the offsets
//     (consumer.CommitTransactional; PC's PERIODIC_TRANSACTIONAL_PRODUCER);
//   - batches: BatchSize records a call, one wait per call
//     (consumer.BatchHandler; PC's batchSize, its maxConcurrency
//     Concurrency / BatchSize, since PC counts calls in flight, not
//     records).
//
// records/s runs from the first record handled to the last offset
// committed; CPU is each design's own process over that window (the
// library's is this process, which also fills nothing then and polls the
// committed offsets as the harness does, every 20 ms once every record
// was handled).
type Peer struct {
	Brokers     []string
	Jar         string // proving/peer/target/peer-bench.jar
	Java        string // the java binary; "java" when empty
	Records     int
	RecordBytes int
	Partitions  int
	Keys        int
	Concurrency int
	BatchSize   int
	Latency     time.Duration
	Rounds      int
	Log         io.Writer
}

// PeerVersion is the Parallel Consumer release the harness builds with.
const PeerVersion = "0.5.3.3"

// PeerResult is one run of one design on one workload.
type PeerResult struct {
	Workload   string  `json:"workload"`
	Design     string  `json:"design"` // patchflow or parallel-consumer
	Round      int     `json:"round"`
	Records    int     `json:"records"`
	Seconds    float64 `json:"seconds"`
	CPUSeconds float64 `json:"cpu_seconds"`
}

// RecordsPerSecond is the run's throughput.
func (r PeerResult) RecordsPerSecond() float64 { return float64(r.Records) / r.Seconds }

// CPUMicrosPerRecord is the run's CPU per record.
func (r PeerResult) CPUMicrosPerRecord() float64 { return r.CPUSeconds * 1e6 / float64(r.Records) }

// The workloads, by name, as the harness takes them.
var peerWorkloads = [][2]string{{"results", "results"}, {"results, transactional", "results-txn"}, {"batches", "batch"}}

// Run measures every workload with both designs, Rounds times; each round
// starts with the other design than the last.
func (p *Peer) Run() ([]PeerResult, error) {
	var out []PeerResult
	for round := 1; round <= p.Rounds; round++ {
		for _, w := range peerWorkloads {
			designs := []string{"patchflow", "parallel-consumer"}
			if round%2 == 0 {
				designs[0], designs[1] = designs[1], designs[0]
			}
			for _, d := range designs {
				res, err := p.one(w[0], w[1], d, round)
				if err != nil {
					return out, fmt.Errorf("%s, %s, round %d: %w", w[0], d, round, err)
				}
				fmt.Fprintf(p.Log, "peer: %s, %s, round %d: %.0f records/s, %.1f CPU µs/record\n", w[0], d, round, res.RecordsPerSecond(), res.CPUMicrosPerRecord())
				out = append(out, res)
			}
		}
	}
	return out, nil
}

func (p *Peer) one(workload, mode, design string, round int) (PeerResult, error) {
	id := fmt.Sprintf("%x", rand.Uint32())
	in, out, group := "peer-in-"+id, "peer-out-"+id, "peer-"+id
	if err := p.topics(in, out); err != nil {
		return PeerResult{}, err
	}
	res := PeerResult{Workload: workload, Design: design, Round: round, Records: p.Records}
	if design == "parallel-consumer" {
		java := p.Java
		if java == "" {
			java = "java"
		}
		threads := p.Concurrency
		if mode == "batch" {
			threads = max(p.Concurrency/p.BatchSize, 1) // PC's concurrency counts calls, each of up to BatchSize records
		}
		cmd := exec.Command(java, "-jar", p.Jar, strings.Join(p.Brokers, ","), in, out, group, mode, strconv.Itoa(p.Records),
			strconv.Itoa(threads), strconv.FormatInt(p.Latency.Milliseconds(), 10), strconv.Itoa(p.BatchSize))
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		if err := runWithin(cmd, 10*time.Minute); err != nil {
			return res, fmt.Errorf("the harness: %w: %s", err, tail(stderr.String()))
		}
		var got struct {
			Seconds    float64 `json:"seconds"`
			CPUSeconds float64 `json:"cpu_seconds"`
		}
		if err := json.Unmarshal(bytes.TrimSpace(stdout.Bytes()), &got); err != nil {
			return res, fmt.Errorf("the harness's answer %q: %w", stdout.String(), err)
		}
		res.Seconds, res.CPUSeconds = got.Seconds, got.CPUSeconds
		return res, nil
	}
	var first, firstCPU atomic.Int64
	var handled atomic.Int64
	begin := func() {
		if first.CompareAndSwap(0, time.Now().UnixNano()) {
			firstCPU.Store(int64(cpuTime()))
		}
	}
	value := make([]byte, 100)
	var h consumer.Handler = consumer.HandlerFunc(func(ctx context.Context, r *consumer.Record) error {
		begin()
		time.Sleep(p.Latency)
		r.Produce(consumer.Message{Topic: out, Key: r.Key, Value: value})
		handled.Add(1)
		return nil
	})
	cfg := consumer.Config{Brokers: p.Brokers, Topic: in, Group: group, InFlightTotal: p.Concurrency,
		InFlightPerPartition: max(p.Concurrency/p.Partitions, 1), Concurrency: consumer.ConcurrencyFixed}
	switch mode {
	case "results-txn":
		cfg.CommitMode = consumer.CommitTransactional
	case "batch":
		cfg.BatchSize = p.BatchSize
		h = peerBatches{func(records []*consumer.Record) []error {
			begin()
			time.Sleep(p.Latency)
			handled.Add(int64(len(records)))
			return make([]error, len(records))
		}}
	}
	c, err := consumer.New(cfg, h)
	if err != nil {
		return res, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan error, 1)
	go func() { ran <- c.Run(ctx) }()
	defer func() { cancel(); <-ran }()
	deadline := time.Now().Add(10 * time.Minute)
	for {
		time.Sleep(20 * time.Millisecond)
		if time.Now().After(deadline) {
			return res, fmt.Errorf("not done after 10 min: %d of %d handled", handled.Load(), p.Records)
		}
		if handled.Load() < int64(p.Records) || !committedToEnd(p.Brokers, in, group) {
			continue
		}
		res.Seconds = time.Since(time.Unix(0, first.Load())).Seconds()
		res.CPUSeconds = (cpuTime() - time.Duration(firstCPU.Load())).Seconds()
		return res, nil
	}
}

// peerBatches is a consumer.BatchHandler whose Handle is never called
// alone: BatchSize > 1 sends every call through HandleBatch (a batch of
// one too).
type peerBatches struct {
	f func([]*consumer.Record) []error
}

func (b peerBatches) Handle(_ context.Context, r *consumer.Record) error {
	return b.f([]*consumer.Record{r})[0]
}

func (b peerBatches) HandleBatch(_ context.Context, records []*consumer.Record) []error {
	return b.f(records)
}

// topics creates in and out and fills in.
func (p *Peer) topics(in, out string) error {
	cfg := sarama.NewConfig()
	cfg.Version = sarama.V2_1_0_0
	cfg.Producer.Return.Successes = true
	cfg.Producer.Flush.Messages = 500
	cfg.Producer.Flush.Frequency = 5 * time.Millisecond
	admin, err := sarama.NewClusterAdmin(p.Brokers, cfg)
	if err != nil {
		return err
	}
	defer admin.Close()
	for _, t := range []string{in, out} {
		if err := admin.CreateTopic(t, &sarama.TopicDetail{NumPartitions: int32(p.Partitions), ReplicationFactor: 1}, false); err != nil {
			return err
		}
	}
	prod, err := sarama.NewAsyncProducer(p.Brokers, cfg)
	if err != nil {
		return err
	}
	defer prod.Close()
	value := make([]byte, p.RecordBytes)
	go func() {
		for i := range p.Records {
			prod.Input() <- &sarama.ProducerMessage{Topic: in, Key: sarama.StringEncoder("k" + strconv.Itoa(i%p.Keys)), Value: sarama.ByteEncoder(value)}
		}
	}()
	for range p.Records {
		select {
		case <-prod.Successes():
		case e := <-prod.Errors():
			return e
		}
	}
	return nil
}

// committedToEnd reports whether group committed every partition of topic
// to its end.
func committedToEnd(brokers []string, topic, group string) bool {
	p, err := offsets.Read(brokers, topic, group)
	if err != nil {
		return false
	}
	for part, end := range p.Ends {
		if p.Committed[part] != end {
			return false
		}
	}
	return true
}

// runWithin runs cmd, killing it after limit.
func runWithin(cmd *exec.Cmd, limit time.Duration) error {
	if err := cmd.Start(); err != nil {
		return err
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		return err
	case <-time.After(limit):
		_ = cmd.Process.Kill()
		<-done
		return fmt.Errorf("killed after %v", limit)
	}
}

// peerTable writes scenario 12.
func (r *Report) peerTable(b *strings.Builder) {
	if len(r.Peer) == 0 {
		return
	}
	b.WriteString("\n## 12. The peer: Parallel Consumer on the same workloads\n\n")
	b.WriteString("The consumer library (**patchflow**, in the benchmark's process) and Confluent Parallel Consumer " + PeerVersion +
		" (**parallel-consumer**, its harness in `proving/peer`, a JVM of its own) on the same real broker, one after the other, the designs' order alternating by round; " +
		"each run on topics and a group of its own, filled before it starts. Every record waits 5 ms in the handler, key ordering, 256 in flight (fixed), 8 partitions, 10,000 keys, records of 1,000 bytes. " +
		"**results**: each record produces one 100-byte result, at least once (`CommitPeriodic` and `Record.Produce`; PC's `pollAndProduce` under `PERIODIC_CONSUMER_ASYNCHRONOUS`); " +
		"**results, transactional**: the same, results and offsets in Kafka transactions (`CommitTransactional`: a transaction per partition every 100 ms; PC's `PERIODIC_TRANSACTIONAL_PRODUCER`, with its one transactional producer); " +
		"**batches**: up to 64 records a call, the 5 ms once per call, no results (`BatchHandler`, `BatchSize` 64; PC's `batchSize` 64, its `maxConcurrency` 4, since it counts calls: 256 records in flight for both). " +
		"records/s runs from the first record handled to the last offset committed; CPU is each design's own process over that window.\n\n")
	b.WriteString("| workload | round | design | records | records/s | CPU µs/record |\n|---|---|---|---|---|---|\n")
	for _, p := range r.Peer {
		fmt.Fprintf(b, "| %s | %d | %s | %d | %.0f | %.1f |\n", p.Workload, p.Round, p.Design, p.Records, p.RecordsPerSecond(), p.CPUMicrosPerRecord())
	}
	b.WriteString("\n")
	for _, w := range peerWorkloads {
		var ours, theirs, oursCPU, theirsCPU []float64
		for _, p := range r.Peer {
			if p.Workload != w[0] {
				continue
			}
			if p.Design == "patchflow" {
				ours, oursCPU = append(ours, p.RecordsPerSecond()), append(oursCPU, p.CPUMicrosPerRecord())
			} else {
				theirs, theirsCPU = append(theirs, p.RecordsPerSecond()), append(theirsCPU, p.CPUMicrosPerRecord())
			}
		}
		if len(ours) == 0 || len(theirs) == 0 {
			continue
		}
		fmt.Fprintf(b, "- %s: patchflow %.2f × Parallel Consumer's records/s (mean of %d rounds: %.0f against %.0f), %.2f × its CPU per record.\n",
			w[0], mean(ours)/mean(theirs), len(ours), mean(ours), mean(theirs), mean(oursCPU)/mean(theirsCPU))
	}
}
