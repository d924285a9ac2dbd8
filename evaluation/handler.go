// Package evaluation is the domain handler of the listener: it turns an
// inventory event into stored packages and a stored VMaaS evaluation. It
// joins persistence and clients, which the actors must not import; the
// pipeline sees it only as a consumer.Handler.
package evaluation

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"
	"time"

	"github.com/patchflow/patchflow/clients"
	"github.com/patchflow/patchflow/consumer"
	"github.com/patchflow/patchflow/inventory"
	"github.com/patchflow/patchflow/messages"
	"github.com/patchflow/patchflow/persistence"
)

// Handler handles inventory events. Safe for concurrent use; idempotent
// (redelivered and replayed events leave the database as if each event had
// been applied once, in order).
type Handler struct {
	store      *persistence.Store
	vmaas      *clients.VMaaS
	inventory  *clients.Inventory
	validation inventory.ValidationOptions
	logger     *slog.Logger
	stats      Stats
	effects    EffectsOptions
	// report hears every call to a dependency (ReportDependenciesTo).
	report func(ctx context.Context, dependency string, took time.Duration, err error)
}

var _ consumer.DependencyReporter = (*Handler)(nil)

// Stats counts what the handler did with the events it accepted. Skipped
// counts uploads not applied (older than the applied event, already
// applied, or for a deleted host); the pipeline counts every skip by reason.
type Stats struct {
	Uploads, Skipped, Evaluations, Deletes, ProfilesFetched atomic.Int64
}

// New returns a Handler.
func New(store *persistence.Store, vmaas *clients.VMaaS, inventory *clients.Inventory, validation inventory.ValidationOptions, logger *slog.Logger) *Handler {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return &Handler{store: store, vmaas: vmaas, inventory: inventory, validation: validation, logger: logger,
		report: func(context.Context, string, time.Duration, error) {}}
}

// ReportDependenciesTo implements consumer.DependencyReporter: after it,
// every VMaaS and inventory HTTP attempt (not cache hits) and every
// database transaction is reported, with its duration and its error, under
// clients.DependencyVMaaS, DependencyInventory and DependencyDatabase.
func (h *Handler) ReportDependenciesTo(report func(ctx context.Context, dependency string, took time.Duration, err error)) {
	if h.vmaas != nil {
		h.vmaas.ReportTo(func(ctx context.Context, took time.Duration, err error) {
			report(ctx, clients.DependencyVMaaS, took, err)
		})
	}
	if h.inventory != nil {
		h.inventory.ReportTo(func(ctx context.Context, took time.Duration, err error) {
			report(ctx, clients.DependencyInventory, took, err)
		})
	}
	h.report = report
}

// database reports one transaction. A failure that is not for want of the
// database (an unclassified one: the database answered, with an error) is
// reported as a refusal (Permanent: served, result "refused"); a transient
// one as no answer; a cancellation says nothing of the database and the
// consumer does not count it.
func (h *Handler) database(ctx context.Context, start time.Time, err error) {
	if messages.ClassOf(err) == messages.ErrorClass_ERROR_CLASS_UNKNOWN {
		err = messages.Permanent(err)
	}
	h.report(ctx, messages.DependencyDatabase, time.Since(start), err)
}

// WriteEffects turns on the messages the handler writes to the outbox with
// the event's rows (call before the first Handle).
func (h *Handler) WriteEffects(o EffectsOptions) { h.effects = o }

// Stats returns the handler's counters.
func (h *Handler) Stats() *Stats { return &h.stats }

// Handle implements consumer.Handler.
//
// Broken events fail permanently: they are dead-lettered with the reason (a
// inventory.ValidationReasons value). An upload whose time (the event's
// timestamp, or the record's without one) is further ahead of the clock
// than the validation options' MaxFutureSkew is broken too
// (inventory.CheckEventTime): timestamp in the future. An unreachable
// database, VMaaS or inventory fails transiently: retried.
//
// Events the service ignores by design return messages.Skip: the record is
// committed and counted by reason, never dead-lettered. They are
//   - filtered, and not stored: reporter not allowed, excluded host type;
//   - not applied, because what is stored already covers them: older than
//     applied (a newer event of the host is stored), already applied (the
//     same event again, stored and evaluated: a redelivery), host recently
//     deleted (an upload after the host's delete, or a second delete);
//   - stored but not evaluated: nothing to evaluate (a host without
//     packages; its evaluation is empty, so no earlier advisory remains).
//
// A redelivered event whose first delivery stored the profile but did not
// evaluate it is evaluated now and finishes as the first delivery would
// have; an older event evaluates the stored profile too, when that is due,
// before it is skipped.
func (h *Handler) Handle(ctx context.Context, r *consumer.Record) error {
	t := &upload{taken: time.Now()}
	err := h.handle(ctx, r, t)
	return h.finishStatus(ctx, t, err)
}

func (h *Handler) handle(ctx context.Context, r *consumer.Record, t *upload) error {
	headerBytes := 0
	for _, hd := range r.Headers {
		headerBytes += len(hd.Key) + len(hd.Value)
	}
	if err := inventory.CheckRecord(r.Key, len(r.Headers), headerBytes, h.validation); err != nil {
		return err
	}
	ev, err := inventory.DecodeInventoryEvent(r.Value, h.validation)
	if err != nil {
		return err
	}
	at := ev.Timestamp
	if at.IsZero() {
		at = r.Timestamp // no event timestamp: order by the record's
	}
	if at.IsZero() {
		return messages.Permanent(&messages.ValidationError{Reason: inventory.ReasonMalformedJSON, Detail: "event has no timestamp"})
	}
	if ev.Type == inventory.EventDelete {
		start := time.Now()
		already, err := h.store.DeleteSystem(ctx, ev.OrgID(), ev.HostID(), at)
		h.database(ctx, start, err)
		if err != nil {
			return fmt.Errorf("delete host %s: %w", ev.HostID(), err)
		}
		if already {
			return messages.Skip(inventory.ReasonHostDeleted, "the host was deleted already")
		}
		h.stats.Deletes.Add(1)
		return nil
	}
	// Before anything is fetched or stored: an upload far ahead of the
	// clock, once applied, would have its host's correct uploads skipped
	// as older until the clock caught up.
	if ev.RequestID != "" {
		t.requestID, t.orgID, t.hostID = ev.RequestID, ev.OrgID(), ev.HostID()
	}
	if err := inventory.CheckEventTime(at, time.Now(), h.validation); err != nil {
		return err
	}
	return h.upload(ctx, ev, at, t)
}

func (h *Handler) upload(ctx context.Context, ev *inventory.InventoryEvent, at time.Time, t *upload) error {
	host := ev.Host
	profile := host.SystemProfile
	if profile == nil {
		p, err := h.fetchProfile(ctx, host.ID)
		if err != nil {
			return err
		}
		profile = p
	}
	u, err := newUpload(ev, profile, at)
	if err != nil {
		return err
	}
	start := time.Now()
	check, err := h.store.CheckUpload(ctx, u)
	h.database(ctx, start, err)
	if err != nil {
		return fmt.Errorf("check host %s: %w", host.ID, err)
	}
	res := check.Result
	if check.Apply {
		// VMaaS first, then the profile and its evaluation in one
		// transaction: one commit, and one WAL flush, per event.
		target := evaluationTarget{packages: u.Packages, repos: u.Repos, modules: u.Modules, arch: u.Arch, releasever: u.Releasever}
		e, err := h.ask(ctx, host.ID, target)
		if err != nil {
			return err
		}
		e.Effects = h.evaluationEffects(ev, e, t)
		start := time.Now()
		res, err = h.store.StoreEvaluatedSystem(ctx, u, e.Evaluation, check)
		h.database(ctx, start, err)
		if err != nil {
			return fmt.Errorf("store host %s: %w", host.ID, err)
		}
		if res.Applied {
			t.written = t.statuses
			h.stats.Uploads.Add(1)
			h.stats.Evaluations.Add(1)
			if len(u.Packages) == 0 {
				return messages.Skip(inventory.ReasonNothingToEvaluate, "the host has no installed packages")
			}
			return nil
		}
		// A newer upload, or the host's delete, was stored meanwhile.
	}
	h.stats.Skipped.Add(1)
	h.logger.Debug("upload not applied", "host_id", host.ID, "org_id", host.OrgID, "reason", res.Skipped, "request_id", ev.RequestID)
	if res.Skipped == persistence.SkippedDeleted {
		return messages.Skip(inventory.ReasonHostDeleted, "an upload after the host's delete does not bring it back")
	}
	// Not newer than the applied event (res.EventTime): older, or the same.
	older := res.Skipped == persistence.SkippedOlder
	var evaluated error
	if res.NeedsEvaluation {
		// The stored profile was not evaluated yet: this is a redelivery
		// of the upload that stored it (its first delivery failed or was
		// cut short after storing), or an older event arriving meanwhile.
		// Evaluate what is stored, which may be newer than this event.
		start := time.Now()
		st, err := h.store.LoadSystem(ctx, host.OrgID, host.ID)
		if !errors.Is(err, persistence.ErrNoSystem) {
			h.database(ctx, start, err)
		}
		if errors.Is(err, persistence.ErrNoSystem) {
			return messages.Skip(inventory.ReasonHostDeleted, "the host was deleted while the event was handled")
		}
		if err != nil {
			return fmt.Errorf("load host %s: %w", host.ID, err)
		}
		evaluated = h.evaluate(ctx, ev, res, evaluationTarget{packages: st.Packages, repos: st.Repos, modules: st.Modules, arch: st.Arch, releasever: st.Releasever})
		if _, skipped := messages.SkipReasonOf(evaluated); evaluated != nil && !skipped {
			return evaluated
		}
	}
	switch {
	case older:
		return messages.Skip(inventory.ReasonOlderThanApplied, fmt.Sprintf("event of %s, the host is at %s",
			at.UTC().Format(time.RFC3339Nano), res.EventTime.UTC().Format(time.RFC3339Nano)))
	case res.NeedsEvaluation:
		return evaluated // this event's own evaluation, finished now: nil, or nothing to evaluate
	default:
		return messages.Skip(inventory.ReasonAlreadyApplied, "the event of "+at.UTC().Format(time.RFC3339Nano)+" is stored and evaluated")
	}
}

func (h *Handler) fetchProfile(ctx context.Context, hostID string) (*inventory.SystemProfile, error) {
	if h.inventory == nil {
		return nil, messages.Permanent(errors.New("event carries no system profile and no inventory service is configured"))
	}
	raw, err := h.inventory.SystemProfile(ctx, hostID)
	if err != nil {
		return nil, fmt.Errorf("fetch profile of %s: %w", hostID, err)
	}
	h.stats.ProfilesFetched.Add(1)
	p, err := inventory.DecodeSystemProfile(raw)
	if err != nil {
		return nil, err
	}
	if err := inventory.ValidateSystemProfile(p, h.validation); err != nil {
		return nil, err
	}
	return p, nil
}

type evaluationTarget struct {
	packages   []persistence.Package
	repos      []string
	modules    []persistence.Module
	arch       string
	releasever string
}

// ask asks VMaaS about t. A profile without packages is not sent: nothing
// can apply to it, so its evaluation is empty (advisories of an earlier
// profile go).
func (h *Handler) ask(ctx context.Context, hostID string, t evaluationTarget) (answer, error) {
	if len(t.packages) == 0 {
		return answer{}, nil
	}
	req := &clients.UpdatesRequest{Releasever: t.releasever, Basearch: t.arch}
	req.PackageList = make([]string, 0, len(t.packages))
	for _, p := range t.packages {
		req.PackageList = append(req.PackageList, p.Name+"-"+p.EVRA)
	}
	for _, m := range t.modules {
		req.ModulesList = append(req.ModulesList, clients.Module{Name: m.Name, Stream: m.Stream})
	}
	// No repository_list: VMaaS then answers with fixes from every
	// repository, and the system's enabled ones tell installable from
	// applicable.
	resp, err := h.vmaas.Updates(ctx, req)
	if err != nil {
		return answer{}, fmt.Errorf("evaluate host %s: %w", hostID, err)
	}
	a := answer{Evaluation: Classify(resp, t.repos)}
	if h.effects.Remediations {
		a.updates = installableUpdates(resp, t.repos)
	}
	return a, nil
}

// answer is an evaluation and what its remediation message needs beside.
type answer struct {
	persistence.Evaluation
	updates []string // NEVRAs of the installable updates
}

// evaluate evaluates t, the profile stored at res.EventTime, and stores the
// answer (for a stored profile whose evaluation is due). For a profile
// without packages it returns a skip for ReasonNothingToEvaluate once the
// empty evaluation is stored.
func (h *Handler) evaluate(ctx context.Context, ev *inventory.InventoryEvent, res persistence.UploadResult, t evaluationTarget) error {
	e, err := h.ask(ctx, ev.HostID(), t)
	if err != nil {
		return err
	}
	e.Effects = h.evaluationEffects(ev, e, nil)
	start := time.Now()
	stored, err := h.store.StoreEvaluation(ctx, res, e.Evaluation)
	h.database(ctx, start, err)
	if err != nil {
		return fmt.Errorf("store evaluation of system %d: %w", res.SystemID, err)
	}
	if stored {
		h.stats.Evaluations.Add(1)
	}
	if len(t.packages) == 0 {
		return messages.Skip(inventory.ReasonNothingToEvaluate, "the host has no installed packages")
	}
	return nil
}

// Classify turns a VMaaS answer into the system's advisories: installable
// when a fix is in one of the enabled repositories, applicable when fixes
// exist only elsewhere. A package is updatable when a newer build is in an
// enabled repository.
func Classify(resp *clients.UpdatesResponse, enabledRepos []string) persistence.Evaluation {
	enabled := make(map[string]bool, len(enabledRepos))
	for _, r := range enabledRepos {
		enabled[r] = true
	}
	status := map[string]persistence.AdvisoryStatus{}
	var e persistence.Evaluation
	for _, pu := range resp.UpdateList {
		updatable := false
		for _, u := range pu.AvailableUpdates {
			in := enabled[u.Repository]
			updatable = updatable || in
			if u.Erratum == "" {
				continue
			}
			if in {
				status[u.Erratum] = persistence.Installable
			} else if status[u.Erratum] == "" {
				status[u.Erratum] = persistence.Applicable
			}
		}
		if updatable {
			e.PackagesUpdatable++
		}
	}
	for name, st := range status {
		e.Advisories = append(e.Advisories, persistence.AdvisoryResult{Name: name, Type: AdvisoryType(name), Status: st})
	}
	return e
}

// AdvisoryType derives the type from the advisory name's prefix, the only
// place the updates answer carries it.
func AdvisoryType(name string) string {
	switch {
	case strings.HasPrefix(name, "RHSA-"):
		return "security"
	case strings.HasPrefix(name, "RHBA-"):
		return "bugfix"
	case strings.HasPrefix(name, "RHEA-"):
		return "enhancement"
	}
	return "unknown"
}

// newUpload maps an event and its profile to what persistence stores.
func newUpload(ev *inventory.InventoryEvent, p *inventory.SystemProfile, at time.Time) (persistence.SystemUpload, error) {
	h := ev.Host
	u := persistence.SystemUpload{
		OrgID: h.OrgID, InventoryID: h.ID, EventTime: at, RequestID: ev.RequestID,
		DisplayName: h.DisplayName, Reporter: h.Reporter, Arch: p.Arch, HostType: p.HostType,
		Releasever: p.Releasever, RHSMVersion: p.RHSMVersion,
		StaleTimestamp: h.StaleTimestamp, CulledTimestamp: h.CulledTimestamp, LastUpload: at,
	}
	if t, ok := h.LastCheckIn[h.Reporter]; ok {
		u.LastUpload = t
	}
	if os := p.OperatingSystem; os != nil {
		u.OSName = os.Name
		major, minor := os.Major, os.Minor
		u.OSMajor, u.OSMinor = &major, &minor
	}
	for _, r := range p.YumRepos {
		if r.Enabled {
			u.Repos = append(u.Repos, r.ID)
		}
	}
	for _, m := range p.DnfModules {
		u.Modules = append(u.Modules, persistence.Module{Name: m.Name, Stream: m.Stream})
	}
	nevras, err := inventory.ParsedPackages(p)
	if err != nil {
		return u, err
	}
	u.Packages = make([]persistence.Package, len(nevras))
	for i, n := range nevras {
		u.Packages[i] = persistence.Package{Name: n.Name, EVRA: n.EVRA()}
	}
	return u, nil
}
