package persistence

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	lru "github.com/hashicorp/golang-lru/v2"
	"github.com/lib/pq"

	"github.com/patchflow/patchflow/messages"
)

// DefaultIDCacheSize is how many ids of each kind (accounts, packages,
// advisories) a Store keeps in memory by default: a fleet's distinct
// packages, with room. A package's entry costs about 320 bytes with its
// name by id (200 without: a scratch measure of 100,000 entries' heap).
const DefaultIDCacheSize = 200_000

// idCache maps the shared rows events name (accounts, packages, advisories)
// to their ids, so an event whose packages were all seen before looks none
// of them up. Rows of these tables are never deleted and their keys never
// change, so a cached id stays right for the life of the database; ids are
// cached only once the rows are committed.
//
// Lookups Peek: a hit takes the caches' read lock and leaves the entry where
// it is, so entries leave in the order they came (first in, first out)
// rather than least recently used. Get's exclusive lock and move to the
// front cost 300 to 560 ns a lookup against Peek's 50 (BenchmarkIDCacheLookup,
// two goroutines), 400 lookups an event: a tenth of the listener's CPU end
// to end. An id evicted while still in use is looked up again, one query
// for an event's misses together.
type idCache struct {
	accounts   *lru.Cache[string, int]
	packages   *lru.Cache[Package, int64]
	advisories *lru.Cache[string, int32]
	// packageNames and advisoryNames map the other way, for the relay
	// rendering remediations written by reference (remediation.go); they
	// learn what the maps above learn, under the same rule.
	packageNames  *lru.Cache[int64, Package]
	advisoryNames *lru.Cache[int32, string]

	// mu guards server and gen: read-locked to look at them and to cache
	// ids or notified pairs (the caches have locks of their own), locked to
	// empty the caches.
	mu sync.RWMutex
	// server is when the database server started, as last seen: a server
	// that started since (a failover to a standby, a restore) may lack rows
	// whose ids are cached, so the cache is emptied when it changes.
	server time.Time
	// gen counts the times the cache was emptied. An id read from the
	// database is cached only if it was read from the server of the view
	// its event began resolving under, and gen did not move since
	// (cacheable): an answer of another server is not kept. A write's
	// notified pairs are learnt under the same rule (notifiedCommitted).
	gen uint64
	// notified is the pairs known notified (effects.go), emptied with the
	// rest.
	notified *notifiedCache
}

// seeServer notes the start time of the server a query just ran on, and
// empties the cache when the server is another one than before.
func (c *idCache) seeServer(started time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.seeServerLocked(started)
}

func (c *idCache) seeServerLocked(started time.Time) {
	if started.Equal(c.server) {
		return
	}
	if !c.server.IsZero() {
		c.accounts.Purge()
		c.packages.Purge()
		c.advisories.Purge()
		c.packageNames.Purge()
		c.advisoryNames.Purge()
		c.notified.purge()
		c.gen++
	}
	c.server = started
}

// serverView is what the cache knew of the server when an event began
// resolving its ids: every id the event then takes from the cache was read
// from that server.
type serverView struct {
	gen     uint64
	started time.Time
}

func (c *idCache) view() serverView {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return serverView{gen: c.gen, started: c.server}
}

// cacheable says whether ids read from the server started at started, by
// an event resolving under v, may be cached; c.mu is read-locked.
func (c *idCache) cacheable(v serverView, started time.Time) bool {
	return c.gen == v.gen && started.Equal(v.started)
}

// unchangedSince says whether the cache was not emptied since v: every id
// an event took from it since v was then read from v's server.
func (c *idCache) unchangedSince(v serverView) bool {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.gen == v.gen
}

// confirmRead is confirm for an id read before, outside the cache (a
// system's, in an UploadResult): read on the server started at readOn
// (zero: not known, nothing to check), it is used on the server started
// at started only if that is the same one.
func (c *idCache) confirmRead(readOn, started time.Time) error {
	if readOn.IsZero() || readOn.Equal(started) {
		return nil
	}
	c.seeServer(started)
	return errServerChanged
}

// errServerChanged is confirm's refusal.
var errServerChanged = messages.Transient(errors.New(
	"the database server changed since the event's ids were resolved (a failover or a restore): they are resolved again"))

// confirm is a write's check that the ids it carries are the server's it
// writes to: started is that server's start time, read in the write's
// transaction before it wrote anything. Another server (one that started
// since the view, and may lack rows whose ids were cached: a failover to a
// standby that had not received them, a restore) or a cache emptied
// meanwhile fails the write with a transient error, after emptying the
// cache for the new server, so the retry reads the ids from it.
func (c *idCache) confirm(v serverView, started time.Time) error {
	c.mu.RLock()
	same := c.cacheable(v, started)
	c.mu.RUnlock()
	if same {
		return nil
	}
	c.seeServer(started)
	return errServerChanged
}

// notifiedCommitted records in the notified cache that installable are
// notified for account, after the commit of a write that resolved its ids
// under v. It records nothing when the cache was emptied since v: the
// write committed on a server the cache may no longer answer for. (A
// purge before the write's own check of its view failed the write; one
// after that check lets it commit, and lands here.) Holding c.mu keeps a
// purge from passing between the check and the record.
func (c *idCache) notifiedCommitted(v serverView, account int, installable []int32) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	if c.gen != v.gen {
		return
	}
	c.notified.committed(account, installable)
}

func newIDCache(size int) *idCache {
	if size <= 0 {
		size = DefaultIDCacheSize
	}
	// lru.New fails only for a size below 1.
	a, _ := lru.New[string, int](min(size, 100_000))
	p, _ := lru.New[Package, int64](size)
	v, _ := lru.New[string, int32](size)
	pn, _ := lru.New[int64, Package](size)
	vn, _ := lru.New[int32, string](size)
	return &idCache{accounts: a, packages: p, advisories: v, packageNames: pn, advisoryNames: vn, notified: newNotifiedCache(notifiedCacheSize)}
}

// queryer is what id resolution needs of a connection: lookups on it, and
// transactions for the inserts.
type queryer interface {
	rowsQueryer
	BeginTx(ctx context.Context, opts *sql.TxOptions) (*sql.Tx, error)
}

// sharedRowsTx runs f, which inserts shared rows (accounts, package names,
// packages, advisories), in a transaction of its own that commits
// synchronously, like every write of the store. An id is cached once its
// row is committed, and a cached id is used without looking at its row
// again: were the commit asynchronous, a crash of the server before its WAL
// flush would lose the row and let the sequence hand its id out again,
// while this process, which outlives the crash, kept storing the old id
// (another tenant's account, another package). Misses are rare once a
// fleet's packages are stored, so the flush costs little.
func sharedRowsTx(ctx context.Context, c queryer, f func(*sql.Tx) error) error {
	tx, err := c.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	if err := f(tx); err != nil {
		_ = tx.Rollback()
		return err
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("commit shared rows: %w", err)
	}
	return nil
}

// accountID returns the id of the account, creating it. DO NOTHING rather
// than DO UPDATE: an update would lock the account row until commit and
// serialise every system of the account.
func (c *idCache) accountID(ctx context.Context, q queryer, v serverView, orgID string) (int, error) {
	if id, ok := c.accounts.Peek(orgID); ok {
		return id, nil
	}
	var (
		id      int
		started time.Time
	)
	err := sharedRowsTx(ctx, q, func(tx *sql.Tx) error {
		err := tx.QueryRowContext(ctx,
			`INSERT INTO account (org_id) VALUES ($1) ON CONFLICT (org_id) DO NOTHING RETURNING id, pg_postmaster_start_time()`, orgID).Scan(&id, &started)
		if errors.Is(err, sql.ErrNoRows) {
			err = tx.QueryRowContext(ctx, `SELECT id, pg_postmaster_start_time() FROM account WHERE org_id = $1`, orgID).Scan(&id, &started)
		}
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("account %s: %w", quoteInput(orgID), err)
	}
	c.mu.RLock()
	if c.cacheable(v, started) {
		c.accounts.Add(strings.Clone(orgID), id)
	}
	c.mu.RUnlock()
	return id, nil
}

// packageIDs returns the ids of pkgs (sorted and unique, as canonicalize
// leaves them), sorted ascending, inserting the packages never seen. The
// misses of the cache are looked up first, and only those still missing
// are inserted: once a fleet's packages are stored, an event writes none.
func (c *idCache) packageIDs(ctx context.Context, q queryer, v serverView, pkgs []Package) ([]int64, error) {
	ids := make([]int64, 0, len(pkgs))
	var missing []Package
	for _, p := range pkgs {
		if id, ok := c.packages.Peek(p); ok {
			ids = append(ids, id)
		} else {
			missing = append(missing, p)
		}
	}
	if len(missing) > 0 {
		found, started, err := lookupPackages(ctx, q, missing)
		if err != nil {
			return nil, err
		}
		var absent []Package
		for _, p := range missing {
			if id, ok := found[p]; ok {
				ids = append(ids, id)
			} else {
				absent = append(absent, p)
			}
		}
		c.cachePackages(v, started, found)
		if len(absent) > 0 {
			inserted, started, err := insertPackages(ctx, q, absent)
			if err != nil {
				return nil, err
			}
			c.cachePackages(v, started, inserted) // committed now
			for _, id := range inserted {
				ids = append(ids, id)
			}
		}
	}
	slices.Sort(ids)
	return slices.Compact(ids), nil
}

func packageColumns(pkgs []Package) (names, evras []string) {
	names, evras = make([]string, len(pkgs)), make([]string, len(pkgs))
	for i, p := range pkgs {
		names[i], evras[i] = p.Name, p.EVRA
	}
	return names, evras
}

// selectPackageIDs looks each package up by the unique indexes, two index
// probes a package, whatever the size of the tables. The LATERAL with its
// LIMIT (a name and EVRA are unique) keeps the planner from flattening it
// into a join that hashes every stored package name: for the few misses an
// event has, that seq scan was most of the statement's cost, and it grows
// with the fleet's packages (EXPLAIN ANALYZE, 5,000 names, 30 packages
// looked up: 0.29 ms against 1.86; 400 packages: 3.2 against 5.7).
// Prepared (see preparedQueries); the plan does not depend on the arrays.
const selectPackageIDs = `
	SELECT w.name, w.evra, x.id, pg_postmaster_start_time() FROM unnest($1::text[], $2::text[]) AS w (name, evra),
	LATERAL (SELECT p.id::bigint FROM package_name pn JOIN package p ON p.name_id = pn.id AND p.evra = w.evra
		WHERE pn.name = w.name LIMIT 1) AS x`

type rowsQueryer interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}

// cachePackages caches ids read from the server started at started, if
// they may be (cacheable). Their keys are strings scanned from rows, never
// an event's: a key that is a slice of a decoded event would keep the
// whole event in memory.
func (c *idCache) cachePackages(v serverView, started time.Time, found map[Package]int64) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	if !c.cacheable(v, started) {
		return
	}
	for p, id := range found {
		c.packages.Add(p, id)
		c.packageNames.Add(id, p)
	}
}

// lookupPackages reads the ids of the stored ones among pkgs, and when the
// server that answered started.
func lookupPackages(ctx context.Context, q rowsQueryer, pkgs []Package) (found map[Package]int64, started time.Time, err error) {
	names, evras := packageColumns(pkgs)
	rows, err := q.QueryContext(ctx, selectPackageIDs, pq.Array(names), pq.Array(evras))
	if err != nil {
		return nil, started, fmt.Errorf("look up packages: %w", err)
	}
	defer rows.Close()
	found = make(map[Package]int64, len(pkgs))
	for rows.Next() {
		var p Package
		var id int64
		if err := rows.Scan(&p.Name, &p.EVRA, &id, &started); err != nil {
			return nil, started, fmt.Errorf("look up packages: %w", err)
		}
		found[p] = id
	}
	if err := rows.Err(); err != nil {
		return nil, started, fmt.Errorf("look up packages: %w", err)
	}
	return found, started, nil
}

// insertPackages stores pkgs (sorted by name, then EVRA: the lock order
// every writer keeps, so concurrent ones cannot deadlock) and returns their
// ids. Inserting and looking up are separate statements: under READ
// COMMITTED a statement sees only rows committed before it began, so a row
// another transaction inserted concurrently makes ON CONFLICT DO NOTHING
// skip it (after waiting for that transaction) without returning its id,
// and only a later statement sees it.
func insertPackages(ctx context.Context, q queryer, pkgs []Package) (found map[Package]int64, started time.Time, err error) {
	names, evras := packageColumns(pkgs)
	err = sharedRowsTx(ctx, q, func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, `
			INSERT INTO package_name (name) SELECT DISTINCT n FROM unnest($1::text[]) AS n ORDER BY n
			ON CONFLICT (name) DO NOTHING`, pq.Array(names)); err != nil {
			return fmt.Errorf("insert package names: %w", err)
		}
		if _, err := tx.ExecContext(ctx, insertPackagesQuery, pq.Array(names), pq.Array(evras)); err != nil {
			return fmt.Errorf("insert packages: %w", err)
		}
		var err error
		found, started, err = lookupPackages(ctx, tx, pkgs)
		return err
	})
	if err != nil {
		return nil, started, err
	}
	if len(found) != len(pkgs) {
		return nil, started, fmt.Errorf("stored %d of %d new packages", len(found), len(pkgs))
	}
	return found, started, nil
}

// insertPackagesQuery inserts packages whose names are stored, in the lock
// order (see insertPackages). Each name is found by its index, as in
// selectPackageIDs.
const insertPackagesQuery = `
	INSERT INTO package (name_id, evra)
	SELECT pn.id, w.evra FROM unnest($1::text[], $2::text[]) AS w (name, evra),
	LATERAL (SELECT id FROM package_name WHERE name = w.name LIMIT 1) AS pn
	ORDER BY pn.id, w.evra
	ON CONFLICT (name_id, evra) DO NOTHING`

// advisoryIDs returns the ids of the advisories named, inserting those
// never seen (with their type; a stored advisory keeps the type it has).
// names must be sorted and unique.
func (c *idCache) advisoryIDs(ctx context.Context, q queryer, v serverView, names, types []string) (map[string]int32, error) {
	ids := make(map[string]int32, len(names))
	var missNames, missTypes []string
	for i, n := range names {
		if id, ok := c.advisories.Peek(n); ok {
			ids[n] = id
		} else {
			missNames, missTypes = append(missNames, n), append(missTypes, types[i])
		}
	}
	if len(missNames) == 0 {
		return ids, nil
	}
	found, started, err := lookupAdvisories(ctx, q, missNames)
	if err != nil {
		return nil, err
	}
	c.cacheAdvisories(v, started, found)
	var absentNames, absentTypes []string
	for i, n := range missNames {
		if id, ok := found[n]; ok {
			ids[n] = id
		} else {
			absentNames, absentTypes = append(absentNames, n), append(absentTypes, missTypes[i])
		}
	}
	if len(absentNames) == 0 {
		return ids, nil
	}
	var inserted map[string]int32
	err = sharedRowsTx(ctx, q, func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, `
			INSERT INTO advisory (name, advisory_type)
			SELECT n, t FROM unnest($1::text[], $2::text[]) AS a (n, t) ORDER BY n
			ON CONFLICT (name) DO NOTHING`, pq.Array(absentNames), pq.Array(absentTypes)); err != nil {
			return fmt.Errorf("insert advisories: %w", err)
		}
		var err error
		inserted, started, err = lookupAdvisories(ctx, tx, absentNames)
		return err
	})
	if err != nil {
		return nil, err
	}
	if len(inserted) != len(absentNames) {
		return nil, fmt.Errorf("stored %d of %d new advisories", len(inserted), len(absentNames))
	}
	c.cacheAdvisories(v, started, inserted) // committed now
	for n, id := range inserted {
		ids[n] = id
	}
	return ids, nil
}

// cacheAdvisories caches ids read from the server started at started,
// keyed by the scanned names, if they may be (see cachePackages).
func (c *idCache) cacheAdvisories(v serverView, started time.Time, found map[string]int32) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	if !c.cacheable(v, started) {
		return
	}
	for n, id := range found {
		c.advisories.Add(n, id)
		c.advisoryNames.Add(id, n)
	}
}

// lookupAdvisories reads the ids of the stored ones among names, and when
// the server that answered started.
func lookupAdvisories(ctx context.Context, q rowsQueryer, names []string) (out map[string]int32, started time.Time, err error) {
	rows, err := q.QueryContext(ctx, `SELECT name, id, pg_postmaster_start_time() FROM advisory WHERE name = ANY($1::text[])`, pq.Array(names))
	if err != nil {
		return nil, started, fmt.Errorf("look up advisories: %w", err)
	}
	defer rows.Close()
	out = make(map[string]int32, len(names))
	for rows.Next() {
		var n string
		var id int32
		if err := rows.Scan(&n, &id, &started); err != nil {
			return nil, started, fmt.Errorf("look up advisories: %w", err)
		}
		out[n] = id
	}
	if err := rows.Err(); err != nil {
		return nil, started, fmt.Errorf("look up advisories: %w", err)
	}
	return out, started, nil
}

// quoteInput quotes a value of an event for an error: at most its first 64
// bytes. An org id is whatever the event says, up to the record's size, and
// an error travels in logs and the dead-letter envelope.
func quoteInput(s string) string {
	const limit = 64
	if len(s) > limit {
		return strconv.Quote(s[:limit]) + "..."
	}
	return strconv.Quote(s)
}
