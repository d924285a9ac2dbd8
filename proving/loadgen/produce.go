package loadgen

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"runtime"
	"sync"
	"time"

	"github.com/IBM/sarama"
	"github.com/schollz/progressbar/v3"

	"github.com/patchflow/patchflow/proving/platform"
)

// ProduceOptions say where and how to send.
type ProduceOptions struct {
	Brokers     []string
	Topic       string
	Version     sarama.KafkaVersion
	Compression string  // none, gzip, snappy, lz4, zstd
	Rate        float64 // messages per second; 0: as fast as possible
	Progress    io.Writer
	// Wait, when set, is called before the message at plan index i is
	// handed to the producer and may block to pace it (the demo keeps it
	// a bounded number of messages ahead of the consumer group); an error
	// stops Produce with that error.
	Wait func(ctx context.Context, i int) error
	// MetadataRefresh is how often the producer refreshes the topic's
	// metadata, and so how soon it produces to partitions added while it
	// runs (0: sarama's 10 minutes).
	MetadataRefresh time.Duration
}

// Result says what was sent.
type Result struct {
	Messages int
	Bytes    int64
	Elapsed  time.Duration
}

// Produce renders the plan's messages (in parallel) and sends them in plan
// order, so each host's events keep their order on its partition. The
// producer is idempotent: a retried send neither duplicates nor reorders.
func Produce(ctx context.Context, ds *platform.Dataset, o Options, plan *Plan, po ProduceOptions) (Result, error) {
	cfg := sarama.NewConfig()
	cfg.ClientID = "patchflow-loadgen"
	cfg.Version = po.Version
	cfg.Producer.Return.Successes = true
	cfg.Producer.RequiredAcks = sarama.WaitForAll
	cfg.Producer.Idempotent = true
	cfg.Net.MaxOpenRequests = 1
	// A leader that dies is replaced once the controller fences it (KRaft's
	// broker session, 9 s by default): retry for longer than that, rather
	// than sarama's 3 × 100 ms, which fails the load of a run on a cluster
	// whose nodes are killed. Idempotence keeps retries from duplicating.
	cfg.Producer.Retry.Max = 100
	cfg.Producer.Retry.Backoff = 300 * time.Millisecond
	cfg.Producer.MaxMessageBytes = 1_048_000
	cfg.Producer.Flush.Frequency = 5 * time.Millisecond
	cfg.Producer.Flush.Bytes = 1 << 20
	if po.MetadataRefresh > 0 {
		cfg.Metadata.RefreshFrequency = po.MetadataRefresh
	}
	if err := cfg.Producer.Compression.UnmarshalText([]byte(po.Compression)); err != nil {
		return Result{}, fmt.Errorf("compression %q: %w", po.Compression, err)
	}
	producer, err := sarama.NewAsyncProducer(po.Brokers, cfg)
	if err != nil {
		return Result{}, fmt.Errorf("connect to %v: %w", po.Brokers, err)
	}
	defer producer.Close()

	var bar *progressbar.ProgressBar
	if po.Progress != nil {
		bar = progressbar.NewOptions(len(plan.Items), progressbar.OptionSetWriter(po.Progress),
			progressbar.OptionSetDescription("producing"), progressbar.OptionShowCount(), progressbar.OptionShowIts(),
			progressbar.OptionSetItsString("events"), progressbar.OptionThrottle(200*time.Millisecond),
			progressbar.OptionOnCompletion(func() { fmt.Fprintln(po.Progress) }))
	}

	start := time.Now()
	acked := make(chan error, 1)
	go func() {
		var firstErr error
		for i := 0; i < len(plan.Items); i++ {
			select {
			case _, ok := <-producer.Successes():
				if !ok { // closed: Produce returned early
					acked <- firstErr
					return
				}
			case e, ok := <-producer.Errors():
				if !ok {
					acked <- firstErr
					return
				}
				if firstErr == nil {
					firstErr = e.Err
				}
			}
			if bar != nil {
				_ = bar.Add(1)
			}
		}
		acked <- firstErr
	}()

	var total int64
	const chunk = 256
	workers := runtime.GOMAXPROCS(0)
	bodies := make([][]byte, chunk)
	for lo := 0; lo < len(plan.Items); lo += chunk {
		hi := min(lo+chunk, len(plan.Items))
		var wg sync.WaitGroup
		errs := make([]error, workers)
		for w := 0; w < workers; w++ {
			wg.Go(func() {
				for i := lo + w; i < hi; i += workers {
					bodies[i-lo], errs[w] = Render(ds, o, plan.Items[i])
					if errs[w] != nil {
						return
					}
				}
			})
		}
		wg.Wait()
		for _, err := range errs {
			if err != nil {
				return Result{}, err
			}
		}
		for i := lo; i < hi; i++ {
			if err := ctx.Err(); err != nil {
				return Result{}, err
			}
			if po.Rate > 0 {
				if wait := time.Until(start.Add(time.Duration(float64(i) / po.Rate * float64(time.Second)))); wait > 0 {
					time.Sleep(wait)
				}
			}
			if po.Wait != nil {
				if err := po.Wait(ctx, i); err != nil {
					return Result{}, err
				}
			}
			body := bodies[i-lo]
			total += int64(len(body))
			producer.Input() <- &sarama.ProducerMessage{Topic: po.Topic, Key: sarama.StringEncoder(plan.Items[i].Key), Value: sarama.ByteEncoder(body)}
		}
	}
	if err := <-acked; err != nil {
		return Result{}, fmt.Errorf("produce: %w", err)
	}
	return Result{Messages: len(plan.Items), Bytes: total, Elapsed: time.Since(start)}, nil
}

// WriteExpected writes one JSON line per host: the state it must end in.
func WriteExpected(path string, plan *Plan) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	enc := json.NewEncoder(f)
	for _, st := range plan.Expected {
		if err := enc.Encode(st); err != nil {
			f.Close()
			return err
		}
	}
	return f.Close()
}

// ReadExpected reads a file written by WriteExpected.
func ReadExpected(path string) (map[string]*HostState, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	out := map[string]*HostState{}
	dec := json.NewDecoder(f)
	for dec.More() {
		var st HostState
		if err := dec.Decode(&st); err != nil {
			return nil, err
		}
		out[st.HostID] = &st
	}
	return out, nil
}
