// Package effects reads the topics the listener's outbox publishes to and
// judges them against the database, independently of the listener: for the
// demo and the e2e suite (DESIGN.md §3, invariant 10).
//
// The rules it checks, after quiescence (every record committed, the relay
// drained):
//   - remediations: each stored host's last remediation message names
//     exactly its stored advisories (and its update NEVRAs), and is the
//     state last written for it, whole or by reference (its checksum is
//     remediation_state's: remediation_state.go);
//   - notifications: the (org, advisory) pairs notified are those
//     advisory_notified records, each under a single event id (a duplicate
//     carries the same id);
//   - payload status: each upload with a request id has received and a
//     final status (success or error), never both success and error, the
//     final's last copy after the received's (the host's order);
//   - with the audit (InstallAudit, a trigger that records each message the
//     outbox commits, in its transaction): every message read was committed
//     with that value (no ghost of a rolled-back transaction), and every
//     notification and payload status committed was read (none lost).
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
	"sync"
	"time"

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

// auditSQL records each message the outbox takes, in the writing
// transaction: the audit holds what committed, and nothing else.
const auditSQL = `
	CREATE TABLE IF NOT EXISTS outbox_audit (event_id UUID NOT NULL, kind TEXT NOT NULL, value_sha256 BYTEA NOT NULL);
	CREATE OR REPLACE FUNCTION outbox_audit() RETURNS trigger LANGUAGE plpgsql AS $$
	BEGIN
		INSERT INTO outbox_audit VALUES (NEW.event_id, NEW.kind, sha256(convert_to(NEW.payload, 'UTF8')));
		RETURN NULL;
	END $$;
	DROP TRIGGER IF EXISTS outbox_audit ON outbox;
	CREATE TRIGGER outbox_audit AFTER INSERT OR UPDATE ON outbox FOR EACH ROW EXECUTE FUNCTION outbox_audit();`

// InstallAudit installs the audit in db, whose schema must be migrated.
func InstallAudit(ctx context.Context, db *sql.DB) error {
	_, err := db.ExecContext(ctx, auditSQL)
	return err
}

// WaitEmpty waits until the outbox holds nothing, up to limit.
func WaitEmpty(ctx context.Context, db *sql.DB, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for {
		var n int
		if err := db.QueryRowContext(ctx, `SELECT count(*) FROM outbox`).Scan(&n); err != nil {
			return err
		}
		if n == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the outbox still holds %d messages after %v", n, limit)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// Record is one message read back.
type Record struct {
	Partition int32
	Offset    int64
	Key       string
	EventID   string
	Value     []byte
	// Timestamp is the record's time on the broker (the producer's, for a
	// topic of CreateTime).
	Timestamp time.Time
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
	// Every partition at once: read one after another, each partition's
	// consumer waited out a fetch of Consumer.MaxWaitTime on the broker
	// when it started and when it closed, half a second each, which made
	// reading the three topics of a run take 14 s.
	got := make([][]Record, len(parts))
	errs := make([]error, len(parts))
	var wg sync.WaitGroup
	for i, p := range parts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			got[i], errs[i] = readPartition(client, consumer, topic, p)
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	var out []Record
	for _, rs := range got {
		out = append(out, rs...)
	}
	return out, nil
}

// readPartition reads partition p of topic from its oldest record to its
// end as it is now.
func readPartition(client sarama.Client, consumer sarama.Consumer, topic string, p int32) ([]Record, error) {
	oldest, err := client.GetOffset(topic, p, sarama.OffsetOldest)
	if err != nil {
		return nil, err
	}
	end, err := client.GetOffset(topic, p, sarama.OffsetNewest)
	if err != nil {
		return nil, err
	}
	if end <= oldest {
		return nil, nil
	}
	pc, err := consumer.ConsumePartition(topic, p, oldest)
	if err != nil {
		return nil, err
	}
	defer pc.Close()
	var out []Record
	for m := range pc.Messages() {
		r := Record{Partition: p, Offset: m.Offset, Key: string(m.Key), Value: m.Value, Timestamp: m.Timestamp}
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
	return out, nil
}

// Report is what Check found.
type Report struct {
	Remediations, Notifications, PayloadStatuses int // messages read
	Hosts                                        int // stored hosts whose last remediation matched
	Notified                                     int // (org, advisory) pairs notified
	Uploads                                      int // request ids with a complete payload status
	Duplicates                                   int // messages read more than once (same event id)
	// Audited is set when the audit judged the messages: Ghosts counts
	// those read that never committed, Lost those committed never read
	// (remediations, which replace one another, are judged by host).
	Audited      bool
	Ghosts, Lost int
	Problems     []string
}

// Line is the report in one line, for a summary.
func (r Report) Line() string {
	s := fmt.Sprintf("%d remediation messages (the last of each of %d stored hosts is its stored state), %d notifications (%d (org, advisory) pairs, each under one id), %d payload statuses (%d uploads: received, then success or error), %d duplicates with their event id",
		r.Remediations, r.Hosts, r.Notifications, r.Notified, r.PayloadStatuses, r.Uploads, r.Duplicates)
	if r.Audited {
		s += fmt.Sprintf("; against the audit of what committed: %d ghosts, %d lost", r.Ghosts, r.Lost)
	}
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
	var dict *dictionary
	if len(rem) > 0 {
		if dict, err = readDictionary(ctx, db); err != nil {
			return r, err
		}
	}
	if err := checkRemediations(ctx, db, dict, rem, &r); err != nil {
		return r, err
	}
	if err := checkNotifications(ctx, db, notes, &r); err != nil {
		return r, err
	}
	checkPayloadStatus(statuses, &r)
	if err := checkAudit(ctx, db, dict, [][]Record{rem, notes, statuses}, &r); err != nil {
		return r, err
	}
	return r, nil
}

// checkAudit judges what was read against what committed, when the audit
// is installed.
func checkAudit(ctx context.Context, db *sql.DB, dict *dictionary, read [][]Record, r *Report) error {
	var installed bool
	if err := db.QueryRowContext(ctx, `SELECT to_regclass('outbox_audit') IS NOT NULL`).Scan(&installed); err != nil || !installed {
		return err
	}
	rows, err := db.QueryContext(ctx, `SELECT event_id::text, kind, value_sha256 FROM outbox_audit`)
	if err != nil {
		return fmt.Errorf("read the outbox audit: %w", err)
	}
	defer rows.Close()
	committed := map[string][][]byte{} // event id → the values committed under it
	kinds := map[string]string{}
	for rows.Next() {
		var id, kind string
		var sum []byte
		if err := rows.Scan(&id, &kind, &sum); err != nil {
			return err
		}
		committed[id] = append(committed[id], sum)
		kinds[id] = kind
	}
	if err := rows.Err(); err != nil {
		return err
	}
	published := map[string]bool{}
	for i, list := range read {
		for _, m := range list {
			published[m.EventID] = true
			sums := [][]byte{nil}
			if i == 0 { // a remediation: written whole or by reference
				sums = dict.stateSums(m.Value)
			} else {
				sum := sha256.Sum256(m.Value)
				sums[0] = sum[:]
			}
			if !slices.ContainsFunc(committed[m.EventID], func(c []byte) bool { return containsSum(sums, c) }) {
				r.Ghosts++
				r.Problems = append(r.Problems, fmt.Sprintf("a ghost: message %s at %d/%d was never committed with that value", m.EventID, m.Partition, m.Offset))
			}
		}
	}
	for id, kind := range kinds {
		if kind != string(messages.OutboxRemediation) && kind != remediationByReference && !published[id] {
			r.Lost++
			r.Problems = append(r.Problems, fmt.Sprintf("lost: %s message %s committed, never published", kind, id))
		}
	}
	r.Audited = true
	return nil
}

// remediationByReference is the outbox kind of a remediation state
// written by reference (remediation_state.go).
const remediationByReference = "remediation_ids"

func checkRemediations(ctx context.Context, db *sql.DB, dict *dictionary, rem []Record, r *Report) error {
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
		if !containsSum(dict.stateSums(m.Value), sum) {
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
	// lastReceived, lastFinal: where each request's last copy of each sits
	// (a host's statuses share a partition, read in offset order).
	type upload struct {
		received, success, failed bool
		lastReceived, lastFinal   int
	}
	byRequest := map[string]*upload{}
	for i, m := range statuses {
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
			u.received, u.lastReceived = true, i
		case "success":
			u.success, u.lastFinal = true, i
		case "error":
			u.failed, u.lastFinal = true, i
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
		case u.lastFinal < u.lastReceived:
			r.Problems = append(r.Problems, fmt.Sprintf("request %s: its final status's last copy comes before its received's (out of order)", id))
		default:
			r.Uploads++
		}
	}
}
