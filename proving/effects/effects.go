// Package effects reads the topics the listener's outbox publishes to and
// judges them against the database, independently of the listener: for the
// demo and the e2e suite (DESIGN.md §3, invariant 10).
//
// The rules it checks, after quiescence (every record committed, the relay
// drained):
//   - remediations: each stored host's last remediation message names
//     exactly its stored advisories (and its update NEVRAs), and is the
//     message last written for it (its checksum is remediation_state's);
//   - notifications: the (org, advisory) pairs notified are those
//     advisory_notified records, each under a single event id (a duplicate
//     carries the same id);
//   - payload status: each upload with a request id has received and a
//     final status (success or error), never both success and error.
package effects

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/IBM/sarama"
	"github.com/lib/pq"

	"github.com/patchflow/patchflow/messages"
)

// Topics names the three topics.
type Topics struct {
	Remediations, Notifications, PayloadStatus string
}

// List is the topics in a fixed order.
func (t Topics) List() []string { return []string{t.Remediations, t.Notifications, t.PayloadStatus} }

// CreateTopics creates the topics (partitions each) where missing.
func CreateTopics(brokers []string, version sarama.KafkaVersion, t Topics, partitions int32, replication int16) error {
	cfg := sarama.NewConfig()
	cfg.Version = version
	cfg.ClientID = "patchflow-effects-admin"
	admin, err := sarama.NewClusterAdmin(brokers, cfg)
	if err != nil {
		return err
	}
	defer admin.Close()
	for _, name := range t.List() {
		err := admin.CreateTopic(name, &sarama.TopicDetail{NumPartitions: partitions, ReplicationFactor: replication}, false)
		if err != nil && !errors.Is(err, sarama.ErrTopicAlreadyExists) {
			return fmt.Errorf("create topic %s: %w", name, err)
		}
	}
	return nil
}

// Record is one message read back.
type Record struct {
	Partition int32
	Offset    int64
	Key       string
	EventID   string
	Value     []byte
}

// Read reads every record of topic from the oldest offset to the high
// watermark at the call, each partition in offset order (the order one
// host's messages keep, since they share its key).
func Read(brokers []string, version sarama.KafkaVersion, topic string) ([]Record, error) {
	cfg := sarama.NewConfig()
	cfg.Version = version
	cfg.ClientID = "patchflow-effects-reader"
	client, err := sarama.NewClient(brokers, cfg)
	if err != nil {
		return nil, err
	}
	defer client.Close()
	parts, err := client.Partitions(topic)
	if err != nil {
		return nil, fmt.Errorf("partitions of %s: %w", topic, err)
	}
	consumer, err := sarama.NewConsumerFromClient(client)
	if err != nil {
		return nil, err
	}
	defer consumer.Close()
	var out []Record
	for _, p := range parts {
		oldest, err := client.GetOffset(topic, p, sarama.OffsetOldest)
		if err != nil {
			return nil, err
		}
		end, err := client.GetOffset(topic, p, sarama.OffsetNewest)
		if err != nil {
			return nil, err
		}
		if end <= oldest {
			continue
		}
		pc, err := consumer.ConsumePartition(topic, p, oldest)
		if err != nil {
			return nil, err
		}
		for m := range pc.Messages() {
			r := Record{Partition: p, Offset: m.Offset, Key: string(m.Key), Value: m.Value}
			for _, h := range m.Headers {
				if string(h.Key) == messages.EventIDHeader {
					r.EventID = string(h.Value)
				}
			}
			out = append(out, r)
			if m.Offset >= end-1 {
				break
			}
		}
		pc.Close()
	}
	return out, nil
}

// Report is what Check found.
type Report struct {
	Remediations, Notifications, PayloadStatuses int // messages read
	Hosts                                        int // stored hosts whose last remediation matched
	Notified                                     int // (org, advisory) pairs notified
	Uploads                                      int // request ids with a complete payload status
	Duplicates                                   int // messages read more than once (same event id)
	Problems                                     []string
}

// Line is the report in one line, for a summary.
func (r Report) Line() string {
	s := fmt.Sprintf("%d remediation messages (the last of each of %d stored hosts is its stored state), %d notifications (%d (org, advisory) pairs, each under one id), %d payload statuses (%d uploads: received, then success or error), %d duplicates with their event id",
		r.Remediations, r.Hosts, r.Notifications, r.Notified, r.PayloadStatuses, r.Uploads, r.Duplicates)
	if len(r.Problems) > 0 {
		s += fmt.Sprintf("; %d problems", len(r.Problems))
	}
	return s
}

// Check reads the topics and judges them against db.
func Check(ctx context.Context, brokers []string, version sarama.KafkaVersion, t Topics, db *sql.DB) (Report, error) {
	var r Report
	rem, err := Read(brokers, version, t.Remediations)
	if err != nil {
		return r, err
	}
	notes, err := Read(brokers, version, t.Notifications)
	if err != nil {
		return r, err
	}
	statuses, err := Read(brokers, version, t.PayloadStatus)
	if err != nil {
		return r, err
	}
	r.Remediations, r.Notifications, r.PayloadStatuses = len(rem), len(notes), len(statuses)
	seen := map[string]int{}
	for _, list := range [][]Record{rem, notes, statuses} {
		for _, m := range list {
			if m.EventID == "" {
				r.Problems = append(r.Problems, fmt.Sprintf("message at %d/%d has no event id", m.Partition, m.Offset))
			}
			seen[m.EventID]++
		}
	}
	for _, n := range seen {
		r.Duplicates += n - 1
	}
	if err := checkRemediations(ctx, db, rem, &r); err != nil {
		return r, err
	}
	if err := checkNotifications(ctx, db, notes, &r); err != nil {
		return r, err
	}
	checkPayloadStatus(statuses, &r)
	return r, nil
}

func checkRemediations(ctx context.Context, db *sql.DB, rem []Record, r *Report) error {
	last := map[string]Record{}
	for _, m := range rem { // per partition in offset order; a host's are in one partition
		last[m.Key] = m
	}
	rows, err := db.QueryContext(ctx, `
		SELECT s.inventory_id::text, rs.checksum,
			COALESCE((SELECT array_agg(a.name ORDER BY a.name) FROM advisory a WHERE a.id = ANY (s.advisory_ids)), '{}')
		FROM system s JOIN remediation_state rs ON rs.system_id = s.id`)
	if err != nil {
		return fmt.Errorf("read remediation states: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var (
			host  string
			sum   []byte
			names []string
		)
		if err := rows.Scan(&host, &sum, pq.Array(&names)); err != nil {
			return err
		}
		m, ok := last[host]
		if !ok {
			r.Problems = append(r.Problems, fmt.Sprintf("host %s: no remediation message", host))
			continue
		}
		if got := sha256.Sum256(m.Value); !slices.Equal(got[:], sum) {
			r.Problems = append(r.Problems, fmt.Sprintf("host %s: the last remediation message is not the last written", host))
			continue
		}
		var msg struct {
			HostID string   `json:"host_id"`
			Issues []string `json:"issues"`
		}
		if err := json.Unmarshal(m.Value, &msg); err != nil || msg.HostID != host {
			r.Problems = append(r.Problems, fmt.Sprintf("host %s: remediation message %q", host, m.Value))
			continue
		}
		var advisories []string
		for _, i := range msg.Issues {
			name := strings.TrimPrefix(i, "patch:")
			if strings.HasPrefix(name, "RH") && strings.Contains(name, ":") && !strings.Contains(name, ".") {
				advisories = append(advisories, name)
			}
		}
		if !slices.Equal(advisories, names) && !(len(advisories) == 0 && len(names) == 0) {
			r.Problems = append(r.Problems, fmt.Sprintf("host %s: remediation names %v, stored %v", host, advisories, names))
			continue
		}
		r.Hosts++
	}
	return rows.Err()
}

func checkNotifications(ctx context.Context, db *sql.DB, notes []Record, r *Report) error {
	idOf := map[string]string{} // "org advisory" → event id
	for _, m := range notes {
		var n struct {
			ID     string `json:"id"`
			OrgID  string `json:"org_id"`
			Events []struct {
				Payload struct {
					AdvisoryName string `json:"advisory_name"`
				} `json:"payload"`
			} `json:"events"`
		}
		if err := json.Unmarshal(m.Value, &n); err != nil {
			r.Problems = append(r.Problems, fmt.Sprintf("notification %q: %v", m.Value, err))
			continue
		}
		if n.ID != m.EventID {
			r.Problems = append(r.Problems, fmt.Sprintf("notification id %s under event id %s", n.ID, m.EventID))
		}
		for _, e := range n.Events {
			k := n.OrgID + " " + e.Payload.AdvisoryName
			if prev, ok := idOf[k]; ok && prev != n.ID {
				r.Problems = append(r.Problems, fmt.Sprintf("(%s) notified under two ids", k))
			}
			idOf[k] = n.ID
		}
	}
	rows, err := db.QueryContext(ctx, `SELECT a.org_id, v.name FROM advisory_notified n JOIN account a ON a.id = n.account_id JOIN advisory v ON v.id = n.advisory_id`)
	if err != nil {
		return fmt.Errorf("read notified advisories: %w", err)
	}
	defer rows.Close()
	want := map[string]bool{}
	for rows.Next() {
		var org, name string
		if err := rows.Scan(&org, &name); err != nil {
			return err
		}
		want[org+" "+name] = true
		if _, ok := idOf[org+" "+name]; !ok {
			r.Problems = append(r.Problems, fmt.Sprintf("(%s %s) recorded as notified, never published", org, name))
		}
	}
	for k := range idOf {
		if !want[k] {
			r.Problems = append(r.Problems, fmt.Sprintf("(%s) published, not recorded as notified (a ghost)", k))
		}
	}
	r.Notified = len(want)
	return rows.Err()
}

func checkPayloadStatus(statuses []Record, r *Report) {
	type upload struct{ received, success, failed bool }
	byRequest := map[string]*upload{}
	for _, m := range statuses {
		var s struct {
			RequestID string `json:"request_id"`
			Status    string `json:"status"`
		}
		if err := json.Unmarshal(m.Value, &s); err != nil || s.RequestID == "" {
			r.Problems = append(r.Problems, fmt.Sprintf("payload status %q", m.Value))
			continue
		}
		u := byRequest[s.RequestID]
		if u == nil {
			u = &upload{}
			byRequest[s.RequestID] = u
		}
		switch s.Status {
		case "received":
			u.received = true
		case "success":
			u.success = true
		case "error":
			u.failed = true
		default:
			r.Problems = append(r.Problems, fmt.Sprintf("payload status %q: unknown status", m.Value))
		}
	}
	for id, u := range byRequest {
		switch {
		case !u.received || !(u.success || u.failed):
			r.Problems = append(r.Problems, fmt.Sprintf("request %s: incomplete payload status %+v", id, *u))
		case u.success && u.failed:
			r.Problems = append(r.Problems, fmt.Sprintf("request %s: both success and error", id))
		default:
			r.Uploads++
		}
	}
}
