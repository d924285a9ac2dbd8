package messages

import "time"

// OutboxKind names what an outbox message is: the relay publishes each kind
// to a topic of its own. The store writes them and the relay publishes them
// without knowing more of them than this.
type OutboxKind string

// The outbox's kinds (the CHECK of the outbox table lists the same).
const (
	// OutboxRemediation is a host's remediation state: its advisories and
	// update NEVRAs. Keyed by the host's inventory id.
	OutboxRemediation OutboxKind = "remediation"
	// OutboxNotification tells an org of advisories that became
	// installable on one of its hosts. Keyed by the org id.
	OutboxNotification OutboxKind = "notification"
	// OutboxPayloadStatus reports an upload's progress to the platform's
	// payload tracker. Keyed by the host's inventory id.
	OutboxPayloadStatus OutboxKind = "payload_status"
)

// OutboxKinds are the kinds, in a fixed order.
var OutboxKinds = []OutboxKind{OutboxRemediation, OutboxNotification, OutboxPayloadStatus}

// OutboxMessage is one message waiting in the outbox: committed with the
// rows of the event that decided it, published by the relay, deleted once
// the broker acknowledged it.
type OutboxMessage struct {
	// ID orders the messages of one OrderingKey: the relay publishes them
	// in ID order.
	ID   int64
	Kind OutboxKind
	// OrderingKey is what the relay keeps in order and publishes from one
	// relay at a time: a host's inventory id, or an org's id.
	OrderingKey string
	// Key is the Kafka record's key; nil for none.
	Key []byte
	// EventID is stable across publishes of the message: a duplicate after
	// a crash carries the same id (header EventIDHeader).
	EventID string
	Value   []byte
	// Created is when the message's transaction wrote it.
	Created time.Time
}

// EventIDHeader is the Kafka header carrying an outbox message's EventID.
const EventIDHeader = "patchflow-event-id"

// OutboxBacklog is what waits in the outbox.
type OutboxBacklog struct {
	Pending int64
	// Oldest is the age of the oldest message waiting; 0 when none waits.
	Oldest time.Duration
	// Refused counts the messages the broker refused for good, kept for a
	// person (not in Pending).
	Refused int64
}

// OutboxOutcome is what a relay's round did with its claim: the messages
// the broker acknowledged, to delete, and those it refused for good, to
// keep aside with the reason.
type OutboxOutcome struct {
	Published []int64
	Refused   map[int64]string
}
