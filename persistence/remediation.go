package persistence

import (
	"cmp"
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/lib/pq"

	"github.com/patchflow/patchflow/messages"
)

// Remediation is what a host's remediation state holds besides its
// evaluation's advisories: the updates it can install (each package's
// newest in an enabled repository).
type Remediation struct {
	// Updates are the updates whose NEVRA is their Name, a dash and their
	// EVRA, as VMaaS wrote it: the outbox refers to them by their ids in the
	// package dictionary.
	Updates []Package
	// Verbatim are the updates VMaaS named any other way, kept as it wrote
	// them: a state with one is written to the outbox whole.
	Verbatim []string
}

// RemediationMessage is the message of a host's remediation state: each
// advisory affecting it and each update it can install, prefixed with
// RemediationIssuePrefix, sorted.
type RemediationMessage struct {
	HostID string   `json:"host_id"`
	Issues []string `json:"issues"`
}

// RemediationIssuePrefix prefixes each issue of a remediation message.
const RemediationIssuePrefix = "patch:"

// outboxRemediationIDs is the outbox kind of a remediation state written by
// reference (schema version 6): its payload is remediationIDs' encoding of
// the advisories' and the updates' dictionary ids, and the relay renders
// the message (OutboxRemediation) when it publishes. A state with a
// Verbatim update is written whole, as OutboxRemediation.
//
// By reference, a host's state is about a kilobyte where the message is
// 13-16 KB: 5 KB less WAL per event with the effects on, and the writer
// renders no message; PostgreSQL's CPU is the same through the noise
// (BenchmarkRemediationByReference).
const outboxRemediationIDs = "remediation_ids"

// renderRemediation is the remediation message of host with the advisories
// and the updates (NEVRAs) named, byte for byte what encoding/json makes of
// a RemediationMessage of them. A prefix shared by every issue leaves their
// order as it was, so the names are sorted without it, and written with it
// into one buffer: a host's 450 issues cost 453 allocations and 110-130 µs
// through encoding/json, the relay's largest cost per message.
func renderRemediation(hostID string, advisories, updates []string) []byte {
	names := make([]string, 0, len(advisories)+len(updates))
	names = append(append(names, advisories...), updates...)
	slices.Sort(names)
	names = slices.Compact(names)
	size := len(`{"host_id":,"issues":[]}`) + len(hostID) + 2
	for _, n := range names {
		size += len(n) + len(RemediationIssuePrefix) + 3
	}
	b := make([]byte, 0, size)
	b = append(b, `{"host_id":`...)
	b = appendJSONString(b, "", hostID)
	b = append(b, `,"issues":[`...)
	for i, n := range names {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendJSONString(b, RemediationIssuePrefix, n)
	}
	return append(b, "]}"...)
}

// appendJSONString appends prefix+s as encoding/json writes a string: as
// it is when it holds only printable ASCII that needs no escape (names of
// advisories and packages do), else through encoding/json.
func appendJSONString(b []byte, prefix, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x7f || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			q, _ := json.Marshal(prefix + s)
			return append(b, q...)
		}
	}
	b = append(b, '"')
	b = append(append(b, prefix...), s...)
	return append(b, '"')
}

// remediationIDs is a remediation state by reference: the ids of its
// advisories and of its updates' packages, each ascending and unique.
type remediationIDs struct {
	advisories []int32
	packages   []int64
}

// encode writes r as the outbox holds it: each list as its first id and
// then the differences, in base 36, separated by commas, the two lists by a
// semicolon. It never starts with "{", which a whole message does.
func (r remediationIDs) encode() string {
	b := make([]byte, 0, 3*(len(r.advisories)+len(r.packages))+1)
	var last int64
	for i, id := range r.advisories {
		if i > 0 {
			b = append(b, ',')
		}
		b = strconv.AppendInt(b, int64(id)-last, 36)
		last = int64(id)
	}
	b = append(b, ';')
	last = 0
	for i, id := range r.packages {
		if i > 0 {
			b = append(b, ',')
		}
		b = strconv.AppendInt(b, id-last, 36)
		last = id
	}
	return string(b)
}

// decodeRemediationIDs reads encode's form back.
func decodeRemediationIDs(s string) (remediationIDs, error) {
	adv, pkg, ok := strings.Cut(s, ";")
	if !ok {
		return remediationIDs{}, errors.New("no ';' between the advisories and the updates")
	}
	list := func(s string, max int64) ([]int64, error) {
		if s == "" {
			return nil, nil
		}
		parts := strings.Split(s, ",")
		out := make([]int64, len(parts))
		var last int64
		for i, p := range parts {
			d, err := strconv.ParseInt(p, 36, 64)
			if err != nil || d <= 0 || last > max-d || strconv.FormatInt(d, 36) != p {
				return nil, fmt.Errorf("id %d: %q does not follow %d", i, p, last)
			}
			last += d
			out[i] = last
		}
		return out, nil
	}
	a, err := list(adv, 1<<31-1)
	if err != nil {
		return remediationIDs{}, fmt.Errorf("advisories: %w", err)
	}
	p, err := list(pkg, 1<<63-1)
	if err != nil {
		return remediationIDs{}, fmt.Errorf("updates: %w", err)
	}
	r := remediationIDs{advisories: make([]int32, len(a)), packages: p}
	for i, id := range a {
		r.advisories[i] = int32(id)
	}
	return r, nil
}

// remediationWrite is a host's remediation state ready for effectsStatement:
// its outbox kind, payload and checksum (remediation_state: an evaluation
// that leaves it unchanged writes no message).
type remediationWrite struct {
	kind, payload string
	sum           []byte
}

// newRemediationWrite is the state of host with the advisories (their
// names, and their ids ascending) and the updates of rem, whose Updates
// have the ids updateIDs (ascending) in the package dictionary: by
// reference, unless an update is Verbatim. Its checksum is the payload's
// SHA-256 (a reference never starts with "{", so a state written one way
// never passes for the other; proving/effects checks messages by it).
func newRemediationWrite(host string, advisories []string, advisoryIDs []int32, rem *Remediation, updateIDs []int64) remediationWrite {
	w := remediationWrite{kind: outboxRemediationIDs}
	if len(rem.Verbatim) > 0 {
		updates := slices.Clone(rem.Verbatim)
		for _, p := range rem.Updates {
			updates = append(updates, p.Name+"-"+p.EVRA)
		}
		w.kind, w.payload = string(messages.OutboxRemediation), string(renderRemediation(host, advisories, updates))
	} else {
		w.payload = remediationIDs{advisories: advisoryIDs, packages: updateIDs}.encode()
	}
	sum := sha256.Sum256([]byte(w.payload))
	w.sum = sum[:]
	return w
}

// resolveRemediation resolves the ids of rem's updates under v (inserting
// the packages never seen, as an upload's are) and returns the host's state
// with ev's advisories (advisoryIDs their ids); nil when rem is.
func (s *Store) resolveRemediation(ctx context.Context, q queryer, v serverView, host string, ev *evaluationRow, advisoryIDs []int32, rem *Remediation) (*remediationWrite, error) {
	if rem == nil {
		return nil, nil
	}
	var updateIDs []int64
	if len(rem.Verbatim) == 0 && len(rem.Updates) > 0 {
		var err error
		if updateIDs, err = s.ids.packageIDs(ctx, q, v, sortedPackages(rem.Updates)); err != nil {
			return nil, fmt.Errorf("updates: %w", err)
		}
	}
	w := newRemediationWrite(host, ev.names, advisoryIDs, rem, updateIDs)
	return &w, nil
}

// sortedPackages are ps sorted as canonicalize sorts an upload's, without
// repeats (idCache.packageIDs wants them so).
func sortedPackages(ps []Package) []Package {
	ps = slices.Clone(ps)
	slices.SortFunc(ps, func(a, b Package) int {
		return cmp.Or(strings.Compare(a.Name, b.Name), strings.Compare(a.EVRA, b.EVRA))
	})
	return slices.Compact(ps)
}

// claimedRemediation is a claimed row of kind outboxRemediationIDs, to render.
type claimedRemediation struct {
	msg *messages.OutboxMessage
	ids remediationIDs
}

// errUnrenderable marks a row the relay cannot render: kept aside for a
// person, like a message the broker refused for good.
var errUnrenderable = errors.New("the remediation state names ids the dictionaries do not hold")

// renderClaimed renders the claimed rows by reference into their messages,
// on the claim's connection of the server started at started. Names come
// from the id cache where it holds them (it learns them as the writers
// resolve them), else from the dictionaries in one query per kind. It
// returns the ids of rows it could not render, with why.
func (o *Outbox) renderClaimed(ctx context.Context, q rowsQueryer, rows []claimedRemediation, started time.Time) (map[int64]string, error) {
	c := o.ids
	c.seeServer(started)
	v := c.view()
	if afterRenderView != nil {
		afterRenderView()
	}
	advisories := map[int32]string{}
	packages := map[int64]string{}
	var missA []int32
	var missP []int64
	for _, r := range rows {
		for _, id := range r.ids.advisories {
			if _, ok := advisories[id]; ok {
				continue
			}
			if n, ok := c.advisoryNames.Peek(id); ok {
				advisories[id] = n
			} else {
				advisories[id], missA = "", append(missA, id)
			}
		}
		for _, id := range r.ids.packages {
			if _, ok := packages[id]; ok {
				continue
			}
			if p, ok := c.packageNames.Peek(id); ok {
				packages[id] = p.Name + "-" + p.EVRA
			} else {
				packages[id], missP = "", append(missP, id)
			}
		}
	}
	// Every name taken from the cache was cached under v, read from the
	// server started at started, unless the cache was emptied since.
	if !c.unchangedSince(v) || !v.started.Equal(started) {
		return nil, messages.Transient(errors.New("the database server changed while the relay rendered remediations; it renders them again"))
	}
	if err := o.lookUpNames(ctx, q, v, missA, missP, advisories, packages); err != nil {
		return nil, err
	}
	var bad map[int64]string
	for _, r := range rows {
		adv := make([]string, len(r.ids.advisories))
		upd := make([]string, len(r.ids.packages))
		missing := 0
		for i, id := range r.ids.advisories {
			if adv[i] = advisories[id]; adv[i] == "" {
				missing++
			}
		}
		for i, id := range r.ids.packages {
			if upd[i] = packages[id]; upd[i] == "" {
				missing++
			}
		}
		if missing > 0 {
			if bad == nil {
				bad = map[int64]string{}
			}
			bad[r.msg.ID] = fmt.Sprintf("%v (%d of them)", errUnrenderable, missing)
			continue
		}
		r.msg.Value = renderRemediation(r.msg.OrderingKey, adv, upd)
	}
	return bad, nil
}

// afterRenderView, when set (by a test), runs in renderClaimed between its
// view of the cache and its reads of it.
var afterRenderView func()

// lookUpNames reads the names of the ids the cache missed, fills them in,
// and caches them if the server that answered is v's.
func (o *Outbox) lookUpNames(ctx context.Context, q rowsQueryer, v serverView, missA []int32, missP []int64, advisories map[int32]string, packages map[int64]string) error {
	read := func(query string, arg any, scan func(*sql.Rows) error) error {
		rows, err := q.QueryContext(ctx, query, arg)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			if err := scan(rows); err != nil {
				return err
			}
		}
		return rows.Err()
	}
	if len(missA) > 0 {
		found := map[string]int32{}
		var started time.Time
		err := read(`SELECT id, name, pg_postmaster_start_time() FROM advisory WHERE id = ANY ($1::int[])`, pq.Array(missA), func(rows *sql.Rows) error {
			var id int32
			var n string
			err := rows.Scan(&id, &n, &started)
			advisories[id], found[n] = n, id
			return err
		})
		if err != nil {
			return fmt.Errorf("read advisory names: %w", err)
		}
		o.ids.cacheAdvisories(v, started, found)
	}
	if len(missP) > 0 {
		found := map[Package]int64{}
		var started time.Time
		err := read(`SELECT p.id, n.name, p.evra, pg_postmaster_start_time() FROM package p JOIN package_name n ON n.id = p.name_id
			WHERE p.id = ANY ($1::bigint[])`, pq.Array(missP), func(rows *sql.Rows) error {
			var id int64
			var p Package
			err := rows.Scan(&id, &p.Name, &p.EVRA, &started)
			packages[id], found[p] = p.Name+"-"+p.EVRA, id
			return err
		})
		if err != nil {
			return fmt.Errorf("read package names: %w", err)
		}
		o.ids.cachePackages(v, started, found)
	}
	return nil
}
