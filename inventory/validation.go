package inventory

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/patchflow/patchflow/messages"
)

// Reasons a message is broken: one per check of DecodeInventoryEvent, so a
// rejected record can be counted and found by what was wrong with it. They
// come as permanent *messages.ValidationError values; the record goes to the
// dead-letter topic, for a person to look at.
const (
	ReasonMalformedJSON   messages.Reason = "malformed JSON"
	ReasonMessageTooLarge messages.Reason = "message too large"
	// ReasonKeyTooLarge and ReasonHeadersTooLarge: the record's key, or
	// its headers (by count or by bytes), pass ValidationOptions' bounds
	// (CheckRecord). Inventory keys its events by host id and sets a few
	// short headers; anything far past that is not an inventory event.
	ReasonKeyTooLarge       messages.Reason = "key too large"
	ReasonHeadersTooLarge   messages.Reason = "headers too large"
	ReasonUnknownEventType  messages.Reason = "unknown event type"
	ReasonMissingHostID     messages.Reason = "missing host id" // absent, or not a UUID
	ReasonMissingOrgID      messages.Reason = "missing org id"
	ReasonUnparsablePackage messages.Reason = "unparsable package"
	// ReasonFutureTimestamp: an upload's time is further ahead of the
	// listener's clock than ValidationOptions.MaxFutureSkew (CheckEventTime).
	ReasonFutureTimestamp messages.Reason = "timestamp in the future"
)

// Reasons an event is skipped: nothing is wrong with it, the service
// ignores it (or part of it) on purpose. They come as *messages.Skipped values (see
// messages.Skip): the record is committed and counted by reason, never retried and
// never dead-lettered.
const (
	// Filters, applied by DecodeInventoryEvent and ValidateSystemProfile:
	// the event is not stored.
	ReasonReporterNotAllowed messages.Reason = "reporter not allowed" // host.reporter absent or not in the allow list
	ReasonExcludedHostType   messages.Reason = "excluded host type"   // e.g. edge hosts, patched by image

	// Outcomes of applying a valid event to what is stored, decided by the
	// handler.

	// ReasonNothingToEvaluate: the host is stored, but it has no installed
	// packages, so there is nothing to ask VMaaS about.
	ReasonNothingToEvaluate messages.Reason = "nothing to evaluate"
	// ReasonOlderThanApplied: a newer event of the host is applied already;
	// this one would move the host back in time.
	ReasonOlderThanApplied messages.Reason = "older than applied"
	// ReasonAlreadyApplied: the event (an event of the same time) is
	// applied and evaluated already: a redelivery, in practice.
	ReasonAlreadyApplied messages.Reason = "already applied"
	// ReasonHostDeleted: the host was deleted recently; a late upload must
	// not bring it back, and another delete has nothing left to do.
	ReasonHostDeleted messages.Reason = "host recently deleted"
)

// ValidationReasons returns every reason of a broken message, in the order
// CheckRecord then DecodeInventoryEvent check them, then CheckEventTime's.
func ValidationReasons() []messages.Reason {
	return []messages.Reason{ReasonKeyTooLarge, ReasonHeadersTooLarge, ReasonMessageTooLarge, ReasonMalformedJSON, ReasonUnknownEventType, ReasonMissingHostID,
		ReasonMissingOrgID, ReasonUnparsablePackage, ReasonFutureTimestamp}
}

// SkipReasons returns every reason an event is skipped: the filters first,
// then the outcomes the handler decides.
func SkipReasons() []messages.Reason {
	return []messages.Reason{ReasonReporterNotAllowed, ReasonExcludedHostType, ReasonNothingToEvaluate, ReasonOlderThanApplied,
		ReasonAlreadyApplied, ReasonHostDeleted}
}

// ValidationOptions are the policy knobs of DecodeInventoryEvent. Start from
// DefaultValidationOptions: an empty AllowedReporters allows no reporter, so
// the zero value skips every event that carries a system profile rather
// than silently accepting them all.
type ValidationOptions struct {
	// MaxMessageBytes bounds the raw message; 0 or less means no bound.
	MaxMessageBytes int
	// MaxKeyBytes bounds the record's key, MaxHeaders the number of its
	// headers and MaxHeaderBytes their keys and values together
	// (CheckRecord); 0 or less means no bound.
	MaxKeyBytes, MaxHeaders, MaxHeaderBytes int
	// AllowedReporters are the host.reporter values whose profiles are
	// trusted; events from others are skipped (ReasonReporterNotAllowed).
	AllowedReporters []string
	// ExcludedHostTypes are system_profile.host_type values not handled
	// here (edge devices are patched by image, not by package); their
	// events are skipped (ReasonExcludedHostType).
	ExcludedHostTypes []string
	// MaxFutureSkew bounds how far ahead of the listener's clock an
	// upload's time may be (CheckEventTime); 0 or less means no bound.
	MaxFutureSkew time.Duration
}

// DefaultValidationOptions returns the production policy: messages up to
// 1,000,000 bytes (just under Kafka's default record limit, so the bound is
// reachable), profiles reported by puptoo or rhsm-system-profile-bridge,
// edge hosts excluded, and uploads at most 10 minutes ahead of the clock
// (clocks kept by NTP differ by milliseconds; minutes of room still take a
// producer whose clock drifted, and bound how long one stamped ahead can
// hold its host back: see CheckEventTime).
func DefaultValidationOptions() ValidationOptions {
	return ValidationOptions{
		MaxMessageBytes:   1_000_000,
		MaxKeyBytes:       1024,
		MaxHeaders:        64,
		MaxHeaderBytes:    64 << 10,
		AllowedReporters:  []string{"puptoo", "rhsm-system-profile-bridge"},
		ExcludedHostTypes: []string{"edge"},
		MaxFutureSkew:     10 * time.Minute,
	}
}

// CheckEventTime checks at, the time an upload (a created or updated event)
// is ordered by, against now, the listener's clock: an upload more than
// opts.MaxFutureSkew ahead is a permanent *messages.ValidationError with
// ReasonFutureTimestamp, to be dead-lettered. Applied, it would make every
// later upload of its host, stamped correctly, "older than applied" and
// skipped until the clock caught up with it (a producer with a wrong
// clock, or hostile input, could freeze a host for years). An upload within
// the skew is applied: the longest it can hold its host back is the skew.
//
// at is what the handler orders by: the event's timestamp, or the record's
// when the event has none. A delete is not checked: its time orders
// nothing (a delete wins whatever its time), so refusing one would only
// keep a deleted host.
func CheckEventTime(at, now time.Time, opts ValidationOptions) error {
	if opts.MaxFutureSkew <= 0 || !at.After(now.Add(opts.MaxFutureSkew)) {
		return nil
	}
	return messages.Invalid(ReasonFutureTimestamp, fmt.Sprintf("event time %s is %s ahead of the listener's clock (%s), more than the %s allowed",
		at.UTC().Format(time.RFC3339Nano), at.Sub(now).Round(time.Second), now.UTC().Format(time.RFC3339), opts.MaxFutureSkew))
}

// CheckRecord checks what of a record is not its value against opts: the
// key's size, and the number and size of the headers (headerBytes: their
// keys and values together). A record past one is a permanent
// *messages.ValidationError (ReasonKeyTooLarge, ReasonHeadersTooLarge),
// to be dead-lettered without its value being parsed. Whatever is quoted
// of it is a count, never the field itself.
func CheckRecord(key []byte, headers, headerBytes int, opts ValidationOptions) error {
	if opts.MaxKeyBytes > 0 && len(key) > opts.MaxKeyBytes {
		return messages.Invalid(ReasonKeyTooLarge, fmt.Sprintf("key of %d bytes, limit %d", len(key), opts.MaxKeyBytes))
	}
	if opts.MaxHeaders > 0 && headers > opts.MaxHeaders {
		return messages.Invalid(ReasonHeadersTooLarge, fmt.Sprintf("%d headers, limit %d", headers, opts.MaxHeaders))
	}
	if opts.MaxHeaderBytes > 0 && headerBytes > opts.MaxHeaderBytes {
		return messages.Invalid(ReasonHeadersTooLarge, fmt.Sprintf("headers of %d bytes, limit %d", headerBytes, opts.MaxHeaderBytes))
	}
	return nil
}

// DecodeInventoryEvent decodes one Kafka record value and checks it against
// opts, so a handler receiving an event can rely on the guarantees documented
// on InventoryEvent, Host and SystemProfile. Checks run in this order, and
// the first that fails decides: size (before any parsing), JSON, event
// type, host id, org id, then for created and updated the reporter, the
// host type and the packages. Created and updated events without a system
// profile pass with only an id and org id; their reporter is checked only
// if present. An empty package list passes: the host is still stored, with
// nothing to evaluate.
//
// The error, when there is one, comes with a nil event and is either
//   - a permanent *messages.ValidationError (one of ValidationReasons): the message is
//     broken and belongs on the dead-letter topic; or
//   - a *messages.Skipped with ReasonReporterNotAllowed or ReasonExcludedHostType
//     (see messages.SkipReasonOf): the event is valid but filtered out by opts, and
//     the record is to be committed and counted, not dead-lettered.
func DecodeInventoryEvent(data []byte, opts ValidationOptions) (*InventoryEvent, error) {
	if opts.MaxMessageBytes > 0 && len(data) > opts.MaxMessageBytes {
		return nil, messages.Invalid(ReasonMessageTooLarge, fmt.Sprintf("%d bytes, limit %d", len(data), opts.MaxMessageBytes))
	}
	ev, err := decodeEvent(data)
	if err != nil {
		return nil, err
	}
	if err := validateEvent(ev, opts); err != nil {
		return nil, err
	}
	return ev, nil
}

func validateEvent(ev *InventoryEvent, opts ValidationOptions) error {
	var idField, orgField string
	switch ev.Type {
	case EventDelete:
		idField, orgField = "id", "org_id"
	case EventCreated, EventUpdated:
		if ev.Host == nil {
			return messages.Invalid(ReasonMissingHostID, fmt.Sprintf("%s event has no host", ev.Type))
		}
		idField, orgField = "host.id", "host.org_id"
	case "":
		return messages.Invalid(ReasonUnknownEventType, "type is missing")
	default:
		return messages.Invalid(ReasonUnknownEventType, fmt.Sprintf("type %s is not created, updated or delete", quote(string(ev.Type))))
	}

	switch id := ev.HostID(); {
	case id == "":
		return messages.Invalid(ReasonMissingHostID, idField+" is missing")
	case !isUUID(id):
		return messages.Invalid(ReasonMissingHostID, fmt.Sprintf("%s %s is not a UUID", idField, quote(id)))
	}
	// An org id of blanks cannot name an organization and would only
	// surface later as a foreign-key or tenancy error.
	if strings.TrimSpace(ev.OrgID()) == "" {
		return messages.Invalid(ReasonMissingOrgID, orgField+" is missing")
	}
	if ev.Type == EventDelete {
		return nil
	}

	h := ev.Host
	if h.SystemProfile != nil || h.Reporter != "" {
		if h.Reporter == "" {
			return messages.Skip(ReasonReporterNotAllowed, "host.reporter is missing, and a system profile must come from a known reporter")
		}
		if !slices.Contains(opts.AllowedReporters, h.Reporter) {
			return messages.Skip(ReasonReporterNotAllowed, fmt.Sprintf("host.reporter %s is not one of %q", quote(h.Reporter), opts.AllowedReporters))
		}
	}
	if h.SystemProfile == nil {
		return nil
	}
	return ValidateSystemProfile(h.SystemProfile, opts)
}

// ValidateSystemProfile applies the profile checks of DecodeInventoryEvent
// to a profile from DecodeSystemProfile: a host type in
// opts.ExcludedHostTypes is a *messages.Skipped with ReasonExcludedHostType, and an
// unparsable package a permanent *messages.ValidationError. No packages at all is
// valid (so is a nil profile, which has none): such a host is stored and
// has nothing to evaluate.
func ValidateSystemProfile(p *SystemProfile, opts ValidationOptions) error {
	if p == nil {
		return nil
	}
	if slices.Contains(opts.ExcludedHostTypes, p.HostType) {
		return messages.Skip(ReasonExcludedHostType, fmt.Sprintf("host type %s is excluded", quote(p.HostType)))
	}
	for i, pkg := range p.InstalledPackages {
		if _, err := ParseNEVRA(pkg); err != nil {
			return messages.Invalid(ReasonUnparsablePackage, fmt.Sprintf("installed_packages[%d]: %v", i, err))
		}
	}
	return nil
}

// ParsedPackages parses every installed package of p, in order. It fails on
// the first unparsable one with a permanent ReasonUnparsablePackage error,
// which cannot happen for a profile that passed validation.
func ParsedPackages(p *SystemProfile) ([]NEVRA, error) {
	if p == nil {
		return nil, nil
	}
	out := make([]NEVRA, 0, len(p.InstalledPackages))
	for i, pkg := range p.InstalledPackages {
		n, err := ParseNEVRA(pkg)
		if err != nil {
			return nil, messages.Invalid(ReasonUnparsablePackage, fmt.Sprintf("installed_packages[%d]: %v", i, err))
		}
		out = append(out, n)
	}
	return out, nil
}

// isUUID accepts the canonical 8-4-4-4-12 hex form in either case and of
// any version: inventory ids are v4 today, but the listener has no reason
// to refuse others.
func isUUID(s string) bool {
	if len(s) != 36 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch i {
		case 8, 13, 18, 23:
			if c != '-' {
				return false
			}
		default:
			if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F') {
				return false
			}
		}
	}
	return true
}

// quoteLimit bounds what an error repeats of the input, in bytes.
const quoteLimit = 64

// quote bounds what a detail repeats of the input: a field can be megabytes
// long, and details travel in logs and dead-letter envelopes. Every error
// that names a value of the input quotes it through quote.
func quote(s string) string {
	if len(s) > quoteLimit {
		return fmt.Sprintf("%q...", s[:quoteLimit])
	}
	return fmt.Sprintf("%q", s)
}

// UploadIdentity reads, from an event DecodeInventoryEvent refused, the
// upload's request id and the host's org and id, for the payload tracker's
// error status; ok is false when the event is too large (opts), is not
// JSON of an event, or lacks one of them.
func UploadIdentity(data []byte, opts ValidationOptions) (requestID, orgID, hostID string, ok bool) {
	if opts.MaxMessageBytes > 0 && len(data) > opts.MaxMessageBytes {
		return "", "", "", false
	}
	ev, err := decodeEvent(data)
	if err != nil || ev == nil {
		return "", "", "", false
	}
	requestID, orgID, hostID = ev.RequestID, strings.TrimSpace(ev.OrgID()), ev.HostID()
	return requestID, orgID, hostID, requestID != "" && orgID != "" && isUUID(hostID)
}
