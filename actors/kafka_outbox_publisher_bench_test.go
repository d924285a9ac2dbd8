package actors_test

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/IBM/sarama"

	"github.com/patchflow/patchflow/actors"
	"github.com/patchflow/patchflow/messages"
)

// BenchmarkRealBrokerOutboxPublish is the publishing side of the effects'
// cost with nothing else running: the relay's producer
// (NewKafkaOutboxPublisher) publishing what an event of the effects
// benchmark decides (docs/benchmarks.md, section 11: 3.5 messages, about
// 13 KB: a remediation state of 150 advisories and 300 updates, two
// payload statuses, a notification every second event), in rounds of 75
// events (the relay's linger's worth at 250 events/s), each round waited
// for, to a real broker:
//
//	kafka=$(.ci/kafka start); PATCHFLOW_KAFKA_BROKERS=$(cat $kafka/brokers) \
//	  PATCHFLOW_KAFKA_PID=$(cat $kafka/pid) go test ./actors -run '^$' \
//	  -bench RealBrokerOutboxPublish -benchtime 20000x; .ci/kafka down $kafka
//
// One op is one event. process-ms/event is this process's CPU (the
// producer, its compression and its answers; the events are made before
// the clock starts), broker-ms/event the broker's (PATCHFLOW_KAFKA_PID).
func BenchmarkRealBrokerOutboxPublish(b *testing.B) {
	env := os.Getenv("PATCHFLOW_KAFKA_BROKERS")
	if env == "" {
		b.Skip("PATCHFLOW_KAFKA_BROKERS is not set")
	}
	brokers := strings.Split(env, ",")
	brokerPID, _ := strconv.Atoi(os.Getenv("PATCHFLOW_KAFKA_PID"))
	cfg := sarama.NewConfig()
	cfg.Version = sarama.V2_1_0_0
	admin, err := sarama.NewClusterAdmin(brokers, cfg)
	if err != nil {
		b.Fatal(err)
	}
	defer admin.Close()
	id := fmt.Sprintf("%x", rand.Uint32())
	topics := map[messages.OutboxKind]string{
		messages.OutboxRemediation:   "bench-remediations-" + id,
		messages.OutboxNotification:  "bench-notifications-" + id,
		messages.OutboxPayloadStatus: "bench-payload-status-" + id,
	}
	for _, t := range topics {
		if err := admin.CreateTopic(t, &sarama.TopicDetail{NumPartitions: 8, ReplicationFactor: 1}, false); err != nil {
			b.Fatal(err)
		}
		defer admin.DeleteTopic(t)
	}
	p, err := actors.NewKafkaOutboxPublisher(actors.KafkaSettings{Brokers: brokers, Version: sarama.V3_6_0_0}, topics)
	if err != nil {
		b.Fatal(err)
	}
	defer p.Close()

	rng := rand.New(rand.NewPCG(5, 6))
	var events [][]messages.OutboxMessage
	bytes := 0
	for e := range b.N {
		msgs := effectsOfAnEvent(rng, e)
		for _, m := range msgs {
			bytes += len(m.Value)
		}
		events = append(events, msgs)
	}
	const perRound = 75
	// A first round outside the clock: the producer's connections and
	// metadata.
	if errs := p.Publish(effectsOfAnEvent(rng, b.N)); slices.ContainsFunc(errs, func(err error) bool { return err != nil }) {
		b.Fatal(errs)
	}
	broker0 := brokerCPU(b, brokerPID)
	self0 := selfCPU()
	b.ResetTimer()
	for from := 0; from < len(events); from += perRound {
		var round []messages.OutboxMessage
		for _, ev := range events[from:min(from+perRound, len(events))] {
			round = append(round, ev...)
		}
		for i, err := range p.Publish(round) {
			if err != nil {
				b.Fatalf("message %d of round %d: %v", i, from/perRound, err)
			}
		}
	}
	b.StopTimer()
	n := float64(b.N)
	b.ReportMetric(float64(selfCPU()-self0)/1e6/n, "process-ms/event")
	if brokerPID > 0 {
		b.ReportMetric(float64(brokerCPU(b, brokerPID)-broker0)/1e6/n, "broker-ms/event")
	}
	b.ReportMetric(float64(bytes)/n, "bytes/event")
}

// effectsOfAnEvent are the outbox messages an event of host e decides:
// its remediation state, two payload statuses and, every second event,
// a notification. Package names and versions come from a shared
// vocabulary, as a fleet's hosts share theirs.
func effectsOfAnEvent(rng *rand.Rand, e int) []messages.OutboxMessage {
	host := fmt.Sprintf("8a3f1c2e-0000-4000-8000-%012d", e)
	var issues []string
	for range 150 {
		issues = append(issues, fmt.Sprintf("patch:RH%cA-20%02d:%05d", "SBE"[rng.IntN(3)], 18+rng.IntN(8), rng.IntN(4000)))
	}
	for range 300 {
		pkg := rng.IntN(3000)
		issues = append(issues, fmt.Sprintf("patch:pkg-%04d-0:%d.%d.%d-%d.el9_%d.%s", pkg, pkg%9, pkg%30, pkg%200, 1+rng.IntN(4), rng.IntN(6),
			[]string{"x86_64", "noarch", "i686"}[pkg%3]))
	}
	slices.Sort(issues)
	issues = slices.Compact(issues)
	rem, _ := json.Marshal(map[string]any{"host_id": host, "issues": issues})
	status := func(s string) []byte {
		v, _ := json.Marshal(map[string]string{"service": "patchman", "org_id": "org-" + strconv.Itoa(e%50), "request_id": fmt.Sprintf("req-%d", e),
			"inventory_id": host, "status": s, "status_msg": "", "date": time.Now().UTC().Format(time.RFC3339Nano)})
		return v
	}
	id := func(i int) string { return fmt.Sprintf("00000000-0000-8000-8000-%08d%04d", e, i) }
	msgs := []messages.OutboxMessage{
		{Kind: messages.OutboxRemediation, OrderingKey: host, Key: []byte(host), EventID: id(0), Value: rem},
		{Kind: messages.OutboxPayloadStatus, OrderingKey: host, Key: []byte(host), EventID: id(1), Value: status("received")},
		{Kind: messages.OutboxPayloadStatus, OrderingKey: host, Key: []byte(host), EventID: id(2), Value: status("success")},
	}
	if e%2 == 0 {
		var events []map[string]any
		for a := range 6 {
			events = append(events, map[string]any{"metadata": map[string]any{}, "payload": map[string]string{
				"advisory_id": strconv.Itoa(a), "advisory_name": fmt.Sprintf("RHSA-2026:%05d", rng.IntN(4000)), "advisory_type": "security", "synopsis": ""}})
		}
		v, _ := json.Marshal(map[string]any{"version": "v1.1.0", "id": id(3), "bundle": "rhel", "application": "patch", "event_type": "new-advisory",
			"org_id": "org-" + strconv.Itoa(e%50), "context": map[string]string{"inventory_id": host}, "events": events, "recipients": []string{}})
		org := "org-" + strconv.Itoa(e%50)
		msgs = append(msgs, messages.OutboxMessage{Kind: messages.OutboxNotification, OrderingKey: org, Key: []byte(org), EventID: id(3), Value: v})
	}
	return msgs
}

func selfCPU() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// brokerCPU is the broker process's user and system time (0 without a pid).
func brokerCPU(b *testing.B, pid int) time.Duration {
	if pid <= 0 {
		return 0
	}
	s, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		b.Fatal(err)
	}
	f := strings.Fields(string(s[strings.LastIndexByte(string(s), ')')+2:]))
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(ut+st) * 10 * time.Millisecond
}
