package persistence

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/lib/pq"
)

// Effects are the messages an event's write decides, written to the outbox
// in the transaction that writes the event's rows (schema version 4): they
// exist if and only if it commits. The zero value writes nothing.
type Effects struct {
	// OrgID and InventoryID name the host, for StoreEvaluation (the
	// upload's are used by StoreEvaluatedSystem).
	OrgID, InventoryID string
	// Remediation, when set and the write stores an evaluation, writes
	// the host's remediation state (its evaluation's advisories and these
	// updates) when it differs from the last one written for the host
	// (remediation_state), replacing the host's unpublished one.
	Remediation *Remediation
	// Notify, when set and the write stores an evaluation, notifies the
	// org of each installable advisory none of its hosts had before
	// (advisory_notified): one message, an event per advisory.
	Notify *NotifyContext
	// PayloadStatus are payload-status messages, written in this order
	// when the write applies (WritePayloadStatus writes them alone).
	PayloadStatus []Message
}

// Message is an outbox message the caller made whole: its value and its
// event id (a UUID), stable across redeliveries of the event that decided
// it, so the copy a redelivery writes is a duplicate with the same id.
type Message struct {
	EventID string
	Value   []byte
}

// NotifyContext is a notification's context: the host that made the
// advisories installable.
type NotifyContext struct {
	InventoryID string `json:"inventory_id"`
	DisplayName string `json:"display_name"`
	RHELVersion string `json:"rhel_version"`
}

func (e *Effects) empty() bool {
	return e == nil || (e.Remediation == nil && e.Notify == nil && len(e.PayloadStatus) == 0)
}

// OutboxChannel is the PostgreSQL channel the relays listen on; a process
// notifies it after commits that wrote to the outbox (Outbox.NotifySoon),
// never inside them.
const OutboxChannel = "patchflow_outbox"

// effectsStatement returns the statement that writes an event's effects
// for the system its first part, system, yields (a statement returning one
// row, the system's id, or none: then nothing is written), the effects'
// parameters numbered from first (effectsWrite.statement):
//   - rem: the remediation checksum, only when it changed; remq: the
//     host's remediation state then (by reference, or whole: remediation.go),
//     replacing an unpublished one under a new id (a relay publishing the
//     older one deletes only that), or one kept aside as refused: the
//     newer state is published, and the refused one was never the last;
//   - ps: the payload-status messages, in order;
//   - nt: the org's installable advisories not notified before; ntq: one
//     notification for them, its id the outbox row's event id (only with
//     notify).
//
// It returns the system's id and how many messages it wrote. It does not
// NOTIFY: a transaction that notifies takes a database-wide lock from its
// pre-commit to the end of its commit, so every writer would commit one at
// a time; the store tells its hook after the commit instead
// (Store.OnOutboxWrite).
//
// system is the write itself where it can be (an update, an insert), so
// that the event's rows and its effects are one statement: an update then
// commits by itself, in one round trip, as it does without the effects,
// where a transaction around two statements took four. Each part reads the
// system's id from s, which is what orders them after the system's write
// and keeps them from writing when it wrote nothing.
//
// Without notify, the statement leaves nt and ntq out, for an event with
// nothing to notify: once an org's fleet is evaluated, nearly every event
// (notifiedCache). The parts it leaves out cost their execution's set-up
// even when they write nothing (their tables and indexes opened and
// locked, past the 16 locks a transaction takes without the shared lock
// table): 0.1-0.2 ms of a call of about 0.6-0.9
// (BenchmarkEffectsStatement).
func effectsStatement(system string, first int, notify bool) string {
	parts := `WITH s (id) AS (` + system + `),
	rem AS (
		INSERT INTO remediation_state (system_id, checksum) SELECT s.id, $sum::bytea FROM s WHERE $sum::bytea IS NOT NULL
		ON CONFLICT (system_id) DO UPDATE SET checksum = EXCLUDED.checksum
			WHERE remediation_state.checksum IS DISTINCT FROM EXCLUDED.checksum
		RETURNING system_id),
	remq AS (
		INSERT INTO outbox (kind, ordering_key, message_key, payload)
		SELECT $kind::text, $host::text, $host::text, $state::text FROM rem
		ON CONFLICT (ordering_key) WHERE kind IN ('remediation', 'remediation_ids') DO UPDATE SET id = nextval('outbox_id_seq'),
			kind = EXCLUDED.kind, payload = EXCLUDED.payload, event_id = EXCLUDED.event_id, created_at = EXCLUDED.created_at,
			refused = NULL
		RETURNING 1),
	ps AS (
		INSERT INTO outbox (kind, ordering_key, message_key, event_id, payload)
		SELECT 'payload_status', $host::text, $host::text, e, p FROM s, unnest($statuses::text[], $statusIDs::uuid[]) WITH ORDINALITY AS t (p, e, i) ORDER BY i
		RETURNING 1)`
	count := `(SELECT count(*) FROM remq) + (SELECT count(*) FROM ps)`
	if notify {
		parts += `,
	nt AS (
		INSERT INTO advisory_notified (account_id, advisory_id)
		SELECT $account::int, a FROM s, unnest($advisories::int[]) AS a WHERE $context::json IS NOT NULL
			AND NOT EXISTS (SELECT 1 FROM advisory_notified n WHERE n.account_id = $account::int AND n.advisory_id = a)
		ORDER BY a
		ON CONFLICT DO NOTHING
		RETURNING advisory_id),
	ntid AS (SELECT gen_random_uuid() AS id),
	ntq AS (
		INSERT INTO outbox (kind, ordering_key, message_key, event_id, payload)
		SELECT 'notification', $org::text, $org::text, ntid.id, json_build_object(
			'version', 'v1.1.0', 'id', ntid.id, 'bundle', 'rhel', 'application', 'patch', 'event_type', 'new-advisory',
			'timestamp', to_char(now() AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"'), 'org_id', $org::text,
			'context', $context::json,
			'events', json_agg(json_build_object('metadata', json_build_object(), 'payload', json_build_object(
				'advisory_id', a.id::text, 'advisory_name', a.name, 'advisory_type', a.advisory_type, 'synopsis', ''))
				ORDER BY a.name),
			'recipients', json_build_array())::text
		FROM nt JOIN advisory a ON a.id = nt.advisory_id CROSS JOIN ntid
		GROUP BY ntid.id
		RETURNING 1)`
		count += ` + (SELECT count(*) FROM ntq)`
	}
	var numbers []string
	for i, name := range effectsParamNames {
		numbers = append(numbers, "$"+name, "$"+strconv.Itoa(first+i))
	}
	return strings.NewReplacer(numbers...).Replace(parts + `
	SELECT s.id::bigint, (` + count + `)::int FROM s`)
}

// effectsParamNames name the effects' parameters in effectsStatement, in
// the order effectsWrite.statement gives them; no name is the start of
// another's, so the replacement cannot take one for the other.
var effectsParamNames = []string{"sum", "host", "state", "kind", "statuses", "statusIDs", "account", "advisories", "context", "org"}

// The effects' statements: alone, for a system written before in the
// transaction ($1 its id); and with the write of the system itself, for
// an upload that inserts or updates it (systemWrite). Each with the
// notification's parts and without.
var (
	writeEffects                         = effectsStatement(`SELECT $1::bigint`, 2, true)
	writeEffectsNoNotify                 = effectsStatement(`SELECT $1::bigint`, 2, false)
	insertSystemWithEffects              = effectsStatement(insertSystem, 31, true)
	insertSystemWithEffectsNoNotify      = effectsStatement(insertSystem, 31, false)
	updateNewerSystemWithEffects         = effectsStatement(updateNewerSystem, 32, true)
	updateNewerSystemWithEffectsNoNotify = effectsStatement(updateNewerSystem, 32, false)
)

// effectsWrite is one event's effects ready for effectsStatement.
type effectsWrite struct {
	e           *Effects
	inventoryID string
	orgID       string
	accountID   int
	installable []int32 // the evaluation's installable advisory ids not known notified; nil without one
	evaluated   bool    // the write stores an evaluation
	// remediation is the host's remediation state when the write stores
	// an evaluation and e.Remediation is set (newRemediationWrite).
	remediation *remediationWrite
}

// statement returns which of an effects statement's two forms the effects
// need, withNotify (effectsStatement with the notification's parts) or
// without, and their parameters, in effectsParamNames' order (the last
// four only with the notification's parts).
func (w effectsWrite) statement(withNotify, without string) (query string, args []any, err error) {
	var sum, remediation, kind, notifyContext any
	if w.evaluated && w.remediation != nil {
		sum, remediation, kind = w.remediation.sum, w.remediation.payload, w.remediation.kind
	}
	if w.evaluated && w.e.Notify != nil && len(w.installable) > 0 {
		b, err := json.Marshal(w.e.Notify)
		if err != nil {
			return "", nil, fmt.Errorf("notification context: %w", err)
		}
		notifyContext = string(b)
	}
	statuses := make([]string, len(w.e.PayloadStatus))
	ids := make([]string, len(w.e.PayloadStatus))
	for i, p := range w.e.PayloadStatus {
		statuses[i], ids[i] = string(p.Value), p.EventID
	}
	args = []any{sum, w.inventoryID, remediation, kind, pq.Array(statuses), pq.Array(ids)}
	if notifyContext == nil {
		return without, args, nil
	}
	return withNotify, append(args, w.accountID, pq.Array(nonNil(w.installable)), notifyContext, w.orgID), nil
}

// write writes the effects by themselves in q (the event's transaction)
// for system id.
func (w effectsWrite) write(ctx context.Context, q rowQueryer, id int64) error {
	if w.e.empty() {
		return nil
	}
	query, args, err := w.statement(writeEffects, writeEffectsNoNotify)
	if err != nil {
		return err
	}
	var n int
	if err := q.QueryRowContext(ctx, query, append([]any{id}, args...)...).Scan(&id, &n); err != nil {
		return fmt.Errorf("write outbox: %w", err)
	}
	if afterEffects != nil {
		return afterEffects()
	}
	return nil
}

// afterEffects, when set (by a test), runs after the effects are written
// in a transaction, before it commits; its error rolls it back. An update
// with its effects commits by itself, and does not run it.
var afterEffects func() error

// WritePayloadStatus writes payload-status messages of the host inventoryID
// to the outbox by themselves, in one transaction: for an event that wrote
// no rows of its own (skipped, or broken).
func (s *Store) WritePayloadStatus(ctx context.Context, inventoryID string, statuses ...Message) error {
	if len(statuses) == 0 {
		return nil
	}
	w := effectsWrite{e: &Effects{PayloadStatus: statuses}, inventoryID: strings.ToLower(inventoryID)}
	err := s.withConn(ctx, "write payload status", func(conn *sql.Conn) error {
		return w.write(ctx, conn, 0)
	})
	if err == nil {
		s.outboxWritten()
	}
	return err
}

// OnOutboxWrite sets f to be called after each commit that wrote effects
// to the outbox (the relay's wake, in the same process).
func (s *Store) OnOutboxWrite(f func()) { s.onOutbox.Store(&f) }

func (s *Store) outboxWritten() {
	if f := s.onOutbox.Load(); f != nil {
		(*f)()
	}
}
