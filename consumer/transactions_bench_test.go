package consumer_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/IBM/sarama"

	"github.com/patchflow/patchflow/consumer"
	"github.com/patchflow/patchflow/proving/offsets"
)

// BenchmarkRealBrokerResultsModes: a handler that waits 5 ms and produces
// one 100-byte result per record, 40,000 records on 8 partitions, 256 in
// flight, on a real broker, under CommitPeriodic and CommitTransactional
// in turn (each round a topic and group of its own), three rounds each,
// alternating:
//
//	make kafka-up; PATCHFLOW_KAFKA_BROKERS=127.0.0.1:19092 go test ./consumer \
//	  -run '^$' -bench RealBrokerResultsModes -benchtime 1x
//
// records/s is the consumer's, from its first record to its last commit;
// CPU µs/record the benchmark process's (the consumer's, and its polls of
// the committed offsets) over the same window.
func BenchmarkRealBrokerResultsModes(b *testing.B) {
	env := os.Getenv("PATCHFLOW_KAFKA_BROKERS")
	if env == "" {
		b.Skip("PATCHFLOW_KAFKA_BROKERS is not set")
	}
	brokers := strings.Split(env, ",")
	const records, partitions, latency = 40000, 8, 5 * time.Millisecond
	cfg := sarama.NewConfig()
	cfg.Version = sarama.V2_1_0_0
	admin, err := sarama.NewClusterAdmin(brokers, cfg)
	if err != nil {
		b.Fatal(err)
	}
	defer admin.Close()
	for round := range 3 {
		for _, mode := range []consumer.CommitMode{consumer.CommitPeriodic, consumer.CommitTransactional} {
			b.Run(fmt.Sprintf("round=%d/mode=%s", round+1, mode), func(b *testing.B) {
				for range b.N {
					id := fmt.Sprintf("%x", rand.Uint32())
					in, out := "bench-in-"+id, "bench-out-"+id
					for _, topic := range []string{in, out} {
						if err := admin.CreateTopic(topic, &sarama.TopicDetail{NumPartitions: partitions, ReplicationFactor: 1}, false); err != nil {
							b.Fatal(err)
						}
					}
					fill(b, brokers, in, records)
					var done atomic.Int64
					var first atomic.Int64
					h := consumer.HandlerFunc(func(ctx context.Context, r *consumer.Record) error {
						first.CompareAndSwap(0, time.Now().UnixNano())
						time.Sleep(latency)
						r.Produce(consumer.Message{Topic: out, Key: r.Key, Value: make([]byte, 100)})
						done.Add(1)
						return nil
					})
					c, err := consumer.New(consumer.Config{Brokers: brokers, Topic: in, Group: "bench-" + id, CommitMode: mode,
						InFlightTotal: 256, InFlightPerPartition: 32, Concurrency: consumer.ConcurrencyFixed}, h)
					if err != nil {
						b.Fatal(err)
					}
					cpu0 := processCPU()
					ctx, cancel := context.WithCancel(context.Background())
					ran := make(chan error, 1)
					go func() { ran <- c.Run(ctx) }()
					for {
						if s := c.Stats(); s.Succeeded >= records {
							break
						}
						time.Sleep(5 * time.Millisecond)
					}
					for !allCommitted(brokers, in, "bench-"+id) {
						time.Sleep(20 * time.Millisecond)
					}
					took := time.Since(time.Unix(0, first.Load()))
					cpu := processCPU() - cpu0
					cancel()
					if err := <-ran; err != nil {
						b.Fatal(err)
					}
					b.ReportMetric(float64(records)/took.Seconds(), "records/s")
					b.ReportMetric(float64(cpu.Microseconds())/records, "CPU-µs/record")
				}
			})
		}
	}
}

// processCPU is the process's user and system time so far.
func processCPU() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// fill writes n keyed records to topic.
func fill(b *testing.B, brokers []string, topic string, n int) {
	cfg := sarama.NewConfig()
	cfg.Producer.Return.Successes = true
	cfg.Producer.Flush.Messages = 500
	cfg.Producer.Flush.Frequency = 5 * time.Millisecond
	p, err := sarama.NewAsyncProducer(brokers, cfg)
	if err != nil {
		b.Fatal(err)
	}
	go func() {
		for i := range n {
			p.Input() <- &sarama.ProducerMessage{Topic: topic, Key: sarama.StringEncoder("k" + strconv.Itoa(i%5000)), Value: sarama.StringEncoder(strconv.Itoa(i))}
		}
	}()
	for range n {
		select {
		case <-p.Successes():
		case err := <-p.Errors():
			b.Fatal(err)
		}
	}
	_ = p.Close()
}

// allCommitted reports whether group committed every partition of topic to its end.
func allCommitted(brokers []string, topic, group string) bool {
	p, err := offsets.Read(brokers, topic, group)
	if err != nil {
		return false
	}
	for i := range p.Ends {
		if p.Committed[i] != p.Ends[i] {
			return false
		}
	}
	return true
}
