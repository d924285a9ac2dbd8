package evaluation

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/patchflow/patchflow/clients"
	"github.com/patchflow/patchflow/consumer"
	"github.com/patchflow/patchflow/inventory"
	"github.com/patchflow/patchflow/messages"
	"github.com/patchflow/patchflow/persistence"
)

// EffectsOptions turn on each kind of message the handler writes to the
// outbox (DESIGN.md §5c); the zero value writes none.
type EffectsOptions struct {
	// Remediations: the host's remediation state, when an evaluation
	// changes it.
	Remediations bool
	// Notifications: an org's new installable advisories, once per (org,
	// advisory).
	Notifications bool
	// PayloadStatus: received, then success or error, for each upload
	// that carries a request id and an org id.
	PayloadStatus bool
}

// Payload-tracker statuses.
const (
	StatusReceived = "received"
	StatusSuccess  = "success"
	StatusError    = "error"
)

// payloadStatusService is the service name the payload tracker knows the
// patch evaluation by.
const payloadStatusService = "patchman"

// PayloadStatus is the payload tracker's message.
type PayloadStatus struct {
	Service     string `json:"service"`
	OrgID       string `json:"org_id"`
	RequestID   string `json:"request_id"`
	InventoryID string `json:"inventory_id"`
	Status      string `json:"status"`
	StatusMsg   string `json:"status_msg"`
	Date        string `json:"date"`
}

// payloadStatus is the message; its event id is a pure function of the
// upload and the status, so a redelivery's copy is a duplicate with the
// same id.
func payloadStatus(orgID, requestID, inventoryID, status, msg string, at time.Time) persistence.Message {
	b, _ := json.Marshal(PayloadStatus{Service: payloadStatusService, OrgID: orgID, RequestID: requestID, InventoryID: inventoryID,
		Status: status, StatusMsg: msg, Date: at.UTC().Format(time.RFC3339Nano)})
	final := status
	if status != StatusReceived {
		final = "final" // success and error of one upload are one message: never both
	}
	return persistence.Message{EventID: stableID(orgID, requestID, inventoryID, final), Value: b}
}

// stableID is a UUID (version 8, RFC 9562: custom) from the SHA-256 of parts.
func stableID(parts ...string) string {
	h := sha256.Sum256([]byte(strings.Join(parts, "\x00")))
	h[6] = h[6]&0x0f | 0x80
	h[8] = h[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", h[0:4], h[4:6], h[6:8], h[8:10], h[10:16])
}

// remediation is the host's remediation state besides its advisories:
// updates, NEVRAs as VMaaS names them. Those in the canonical form
// (name-E:V-R.A, which inventory.ParseNEVRA reads back to the same string)
// are stored by reference to the package dictionary; any other is kept as
// VMaaS wrote it, so the message carries exactly what VMaaS said.
func remediation(updates []string) *persistence.Remediation {
	r := &persistence.Remediation{Updates: make([]persistence.Package, 0, len(updates))}
	for _, u := range updates {
		if n, err := inventory.ParseNEVRA(u); err == nil && n.String() == u {
			r.Updates = append(r.Updates, persistence.Package{Name: n.Name, EVRA: n.EVRA()})
		} else {
			r.Verbatim = append(r.Verbatim, u)
		}
	}
	return r
}

// installableUpdates are the NEVRAs of each package's newest update (the
// last VMaaS lists) in an enabled repository.
func installableUpdates(resp *clients.UpdatesResponse, enabledRepos []string) []string {
	if resp == nil {
		return nil
	}
	enabled := make(map[string]bool, len(enabledRepos))
	for _, r := range enabledRepos {
		enabled[r] = true
	}
	var out []string
	for _, pu := range resp.UpdateList {
		newest := ""
		for _, u := range pu.AvailableUpdates {
			if enabled[u.Repository] && u.Package != "" {
				newest = u.Package
			}
		}
		if newest != "" {
			out = append(out, newest)
		}
	}
	return out
}

// notifyContext is a notification's context for the host of ev.
func notifyContext(ev *inventory.InventoryEvent) *persistence.NotifyContext {
	h := ev.Host
	c := &persistence.NotifyContext{InventoryID: h.ID, DisplayName: h.DisplayName}
	if p := h.SystemProfile; p != nil && p.OperatingSystem != nil {
		c.RHELVersion = strconv.Itoa(p.OperatingSystem.Major) + "." + strconv.Itoa(p.OperatingSystem.Minor)
	}
	return c
}

// upload is what the handler knows of an upload for its payload status.
type upload struct {
	taken                    time.Time // when the handler took the event
	requestID, orgID, hostID string    // set for an upload with a request id
	statuses, written        bool      // its statuses ride with the evaluation; were written
}

// evaluationEffects are the messages storing e writes; t, when set, is the
// upload whose statuses ride along (received, success).
func (h *Handler) evaluationEffects(ev *inventory.InventoryEvent, e answer, t *upload) *persistence.Effects {
	fx := &persistence.Effects{OrgID: ev.OrgID(), InventoryID: ev.HostID()}
	if h.effects.Remediations {
		fx.Remediation = remediation(e.updates)
	}
	if h.effects.Notifications {
		fx.Notify = notifyContext(ev)
	}
	if h.effects.PayloadStatus && t != nil && t.requestID != "" && t.orgID != "" {
		fx.PayloadStatus = []persistence.Message{
			payloadStatus(t.orgID, t.requestID, t.hostID, StatusReceived, "", t.taken),
			payloadStatus(t.orgID, t.requestID, t.hostID, StatusSuccess, "", time.Now()),
		}
		t.statuses = true
	}
	return fx
}

// maxStatusMsg bounds an error's text in a payload status.
const maxStatusMsg = 1024

// finishStatus writes the upload's payload status when its evaluation did
// not carry it: for an upload skipped (success, with the reason). A
// failure writes nothing: a retryable one is tried again, and a record the
// consumer gives up on gets its error status from DeadLettered. When the
// write fails, the record fails retryably, so no status is lost.
func (h *Handler) finishStatus(ctx context.Context, t *upload, err error) error {
	if !h.effects.PayloadStatus || t.written || t.requestID == "" || t.orgID == "" || t.hostID == "" {
		return err
	}
	msg := ""
	if reason, skipped := messages.SkipReasonOf(err); skipped {
		msg = "skipped: " + string(reason)
	} else if err != nil {
		return err
	}
	return h.writeStatus(ctx, t, StatusSuccess, msg, err)
}

// writeStatus writes received and the final status of t; it returns err,
// or a retryable failure when the write fails.
func (h *Handler) writeStatus(ctx context.Context, t *upload, status, msg string, err error) error {
	start := time.Now()
	werr := h.store.WritePayloadStatus(ctx, t.hostID,
		payloadStatus(t.orgID, t.requestID, t.hostID, StatusReceived, "", t.taken),
		payloadStatus(t.orgID, t.requestID, t.hostID, status, msg, time.Now()))
	h.database(ctx, start, werr)
	if werr != nil {
		return consumer.FailedIn(messages.DependencyDatabase, fmt.Errorf("write payload status of %s: %w", t.hostID, werr))
	}
	return err
}

var _ consumer.DeadLetterObserver = (*Handler)(nil)

// DeadLettered implements consumer.DeadLetterObserver: an upload given up
// on (broken, or failing on its own past the retry limit) gets its error
// status, with the failure, before its dead letter is written.
func (h *Handler) DeadLettered(ctx context.Context, r *consumer.Record, failure string) error {
	if !h.effects.PayloadStatus || h.store == nil {
		return nil
	}
	requestID, orgID, hostID, ok := inventory.UploadIdentity(r.Value, h.validation)
	if !ok {
		return nil
	}
	if len(failure) > maxStatusMsg {
		failure = strings.ToValidUTF8(failure[:maxStatusMsg], "")
	}
	t := &upload{taken: time.Now(), requestID: requestID, orgID: orgID, hostID: hostID}
	return h.writeStatus(ctx, t, StatusError, failure, nil)
}
