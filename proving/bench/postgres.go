package bench

import (
	"bufio"
	"context"
	"database/sql"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/lib/pq"
)

// PostgresSettings are the settings in force on the server the end-to-end
// scenario writes to, as current_setting reads them there (not as a script
// meant to set them).
type PostgresSettings struct {
	Version           string `json:"server_version"`
	Fsync             string `json:"fsync"`
	SynchronousCommit string `json:"synchronous_commit"`
	FullPageWrites    string `json:"full_page_writes"`
	WALLevel          string `json:"wal_level"`
	WALSyncMethod     string `json:"wal_sync_method"`
	SharedBuffers     string `json:"shared_buffers"`
	MaxConnections    string `json:"max_connections"`
	// DataFilesystem is the file system type of the data directory (from
	// /proc/mounts; empty when the server is not on this machine or the
	// directory cannot be read).
	DataFilesystem string `json:"data_filesystem,omitempty"`
}

// ReadPostgresSettings asks the server at url.
func ReadPostgresSettings(ctx context.Context, url string) (PostgresSettings, error) {
	db, err := sql.Open("postgres", url)
	if err != nil {
		return PostgresSettings{}, err
	}
	defer db.Close()
	var s PostgresSettings
	err = db.QueryRowContext(ctx, `SELECT current_setting('server_version'), current_setting('fsync'), current_setting('synchronous_commit'),
		current_setting('full_page_writes'), current_setting('wal_level'), current_setting('wal_sync_method'), current_setting('shared_buffers'),
		current_setting('max_connections')`).Scan(&s.Version, &s.Fsync, &s.SynchronousCommit, &s.FullPageWrites, &s.WALLevel, &s.WALSyncMethod,
		&s.SharedBuffers, &s.MaxConnections)
	if err != nil {
		return s, fmt.Errorf("read the PostgreSQL settings: %w", err)
	}
	var dir string
	if db.QueryRowContext(ctx, `SELECT current_setting('data_directory')`).Scan(&dir) == nil { // superusers and pg_read_all_settings only
		s.DataFilesystem = filesystemOf(dir)
	}
	return s, nil
}

// Durable reports whether a commit the server acknowledged survives a crash
// of the machine: fsync on (WAL and data flushed to disk), synchronous_commit
// not off (a commit waits for its WAL to be flushed) and full_page_writes on
// (a page torn by the crash can be restored).
func (s PostgresSettings) Durable() bool {
	return s.Fsync == "on" && s.SynchronousCommit != "off" && s.FullPageWrites == "on"
}

// NotDurable names the settings that make the server not durable, "" when
// it is.
func (s PostgresSettings) NotDurable() string {
	var off []string
	if s.Fsync != "on" {
		off = append(off, "fsync "+s.Fsync)
	}
	if s.SynchronousCommit == "off" {
		off = append(off, "synchronous_commit off")
	}
	if s.FullPageWrites != "on" {
		off = append(off, "full_page_writes "+s.FullPageWrites)
	}
	return strings.Join(off, ", ")
}

func (s PostgresSettings) String() string {
	out := fmt.Sprintf("PostgreSQL %s: fsync %s, synchronous_commit %s, full_page_writes %s, wal_level %s, wal_sync_method %s, shared_buffers %s, max_connections %s",
		s.Version, s.Fsync, s.SynchronousCommit, s.FullPageWrites, s.WALLevel, s.WALSyncMethod, s.SharedBuffers, s.MaxConnections)
	if s.DataFilesystem != "" {
		out += "; data directory on " + s.DataFilesystem
	}
	return out
}

// filesystemOf returns the type of the file system holding path, from the
// longest mount point of /proc/mounts that contains it ("" if unknown).
func filesystemOf(path string) string {
	if _, err := os.Stat(path); err != nil {
		return ""
	}
	f, err := os.Open("/proc/mounts")
	if err != nil {
		return ""
	}
	defer f.Close()
	best, fs := "", ""
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 3 {
			continue
		}
		mount := fields[1]
		inside := mount == "/" || path == mount || strings.HasPrefix(path, strings.TrimSuffix(mount, "/")+"/")
		if inside && len(mount) > len(best) {
			best, fs = mount, fields[2]
		}
	}
	return fs
}

// postmasterPID finds the server's postmaster on this machine: the parent
// of the backend serving a connection to url. It returns 0 when the server
// is not a process here (another machine, another pid namespace).
func postmasterPID(ctx context.Context, url string) (int, error) {
	db, err := sql.Open("postgres", url)
	if err != nil {
		return 0, err
	}
	defer db.Close()
	conn, err := db.Conn(ctx)
	if err != nil {
		return 0, err
	}
	defer conn.Close()
	var backend int
	var dir string
	if err := conn.QueryRowContext(ctx, `SELECT pg_backend_pid(), current_setting('data_directory')`).Scan(&backend, &dir); err != nil {
		return 0, err
	}
	t, err := readProcTimes(backend)
	if err != nil || !isPostgres(backend) || !isPostgres(t.ppid) {
		return 0, nil
	}
	// The postmaster writes its pid on the first line of postmaster.pid;
	// when that can be read, it must be the same process.
	if b, err := os.ReadFile(filepath.Join(dir, "postmaster.pid")); err == nil {
		first, _, _ := strings.Cut(string(b), "\n")
		if pid, err := strconv.Atoi(strings.TrimSpace(first)); err == nil && pid != t.ppid {
			return 0, nil
		}
	}
	return t.ppid, nil
}

// isPostgres reports whether pid is a process of PostgreSQL's server (its
// executable is named postgres).
func isPostgres(pid int) bool {
	exe, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid))
	if err == nil {
		return filepath.Base(exe) == "postgres"
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
	return err == nil && strings.TrimSpace(string(b)) == "postgres"
}

// databaseURL is url with its database replaced by name.
func databaseURL(base, name string) (string, error) {
	u, err := url.Parse(base)
	if err != nil {
		return "", fmt.Errorf("DATABASE_URL: %w", err)
	}
	if u.Scheme != "postgres" && u.Scheme != "postgresql" {
		return "", fmt.Errorf("DATABASE_URL must be a postgres:// URL to create databases beside it")
	}
	u.Path = "/" + name
	return u.String(), nil
}

// createDatabase creates database name on the server at admin (a URL of
// any database there) and returns its URL.
func createDatabase(ctx context.Context, admin, name string) (string, error) {
	target, err := databaseURL(admin, name)
	if err != nil {
		return "", err
	}
	db, err := sql.Open("postgres", admin)
	if err != nil {
		return "", err
	}
	defer db.Close()
	if _, err := db.ExecContext(ctx, "CREATE DATABASE "+pq.QuoteIdentifier(name)); err != nil {
		return "", fmt.Errorf("create database %s: %w", name, err)
	}
	return target, nil
}

// dropDatabase drops database name (one createDatabase made), closing what
// is still connected to it.
func dropDatabase(ctx context.Context, admin, name string) error {
	db, err := sql.Open("postgres", admin)
	if err != nil {
		return err
	}
	defer db.Close()
	if _, err := db.ExecContext(ctx, "DROP DATABASE IF EXISTS "+pq.QuoteIdentifier(name)+" WITH (FORCE)"); err != nil {
		return fmt.Errorf("drop database %s: %w", name, err)
	}
	return nil
}

// forgetSystems deletes every host stored in the database at url, and the
// outbox's messages and remediation states of them (TRUNCATE system,
// deleted_system, remediation_state, outbox), and keeps the rows hosts share (accounts,
// packages, advisories), so that each run of the adaptive comparison starts
// on the same database: otherwise each met one grown by the runs before it
// (15 runs of 2,000 hosts), slower for the later ones whatever their
// settings. A database the listener has not migrated yet holds no host.
func forgetSystems(ctx context.Context, url string) error {
	db, err := sql.Open("postgres", url)
	if err != nil {
		return err
	}
	defer db.Close()
	var migrated bool
	if err := db.QueryRowContext(ctx, `SELECT to_regclass('system') IS NOT NULL AND to_regclass('deleted_system') IS NOT NULL`).Scan(&migrated); err != nil {
		return fmt.Errorf("forget the stored hosts: %w", err)
	}
	if !migrated {
		return nil
	}
	if _, err := db.ExecContext(ctx, `TRUNCATE system, deleted_system, remediation_state, outbox`); err != nil {
		return fmt.Errorf("forget the stored hosts: %w", err)
	}
	return nil
}
