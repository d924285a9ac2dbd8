package effects

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// A host's remediation state is written to the outbox whole (its message)
// or by reference (schema 6: the ids of its advisories and of its updates'
// packages, which the relay renders into the message). remediation_state
// holds the SHA-256 of what was written, so a message read back matches the
// state last written when either the message's own SHA-256 is that sum, or
// the SHA-256 of the reference it names is. The reference is worked out
// here from the message and the dictionaries, apart from the listener's
// code: each advisory's id, each update's package id (its NEVRA split as
// name-E:V-R.A), each list ascending, written as its first id and then the
// differences in base 36, comma-separated, the two lists joined by ";".

// dictionary maps the names a remediation message holds to their ids.
type dictionary struct {
	advisories map[string]int64
	packages   map[string]int64 // "name-evra"
}

func readDictionary(ctx context.Context, db *sql.DB) (*dictionary, error) {
	d := &dictionary{advisories: map[string]int64{}, packages: map[string]int64{}}
	read := func(query string, into map[string]int64) error {
		rows, err := db.QueryContext(ctx, query)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var name string
			var id int64
			if err := rows.Scan(&name, &id); err != nil {
				return err
			}
			into[name] = id
		}
		return rows.Err()
	}
	if err := read(`SELECT name, id FROM advisory`, d.advisories); err != nil {
		return nil, fmt.Errorf("read advisories: %w", err)
	}
	if err := read(`SELECT n.name || '-' || p.evra, p.id FROM package p JOIN package_name n ON n.id = p.name_id`, d.packages); err != nil {
		return nil, fmt.Errorf("read packages: %w", err)
	}
	return d, nil
}

// remediationMessage is the message's shape, in its fields' order.
type remediationMessage struct {
	HostID string   `json:"host_id"`
	Issues []string `json:"issues"`
}

// stateSums are the sums of what could have been written for the
// remediation message value: the message itself, and its reference when
// the message is exactly what encoding/json makes of its host and its
// issues sorted without repeats (the relay renders it so, byte for byte),
// and every issue names a stored advisory or package.
func (d *dictionary) stateSums(value []byte) [][]byte {
	whole := sha256.Sum256(value)
	sums := [][]byte{whole[:]}
	var msg remediationMessage
	if d == nil || json.Unmarshal(value, &msg) != nil {
		return sums
	}
	canonical := remediationMessage{HostID: msg.HostID, Issues: slices.Compact(slices.Sorted(slices.Values(msg.Issues)))}
	if canonical.Issues == nil {
		canonical.Issues = []string{}
	}
	if b, err := json.Marshal(canonical); err != nil || string(b) != string(value) {
		return sums
	}
	var adv, pkg []int64
	for _, issue := range msg.Issues {
		name, ok := strings.CutPrefix(issue, "patch:")
		if !ok {
			return sums
		}
		if id, ok := d.advisories[name]; ok {
			adv = append(adv, id)
		} else if id, ok := d.packages[name]; ok {
			pkg = append(pkg, id)
		} else {
			return sums
		}
	}
	ref := sha256.Sum256([]byte(referenceOf(adv) + ";" + referenceOf(pkg)))
	return append(sums, ref[:])
}

func referenceOf(ids []int64) string {
	slices.Sort(ids)
	parts := make([]string, len(ids))
	var last int64
	for i, id := range ids {
		parts[i] = strconv.FormatInt(id-last, 36)
		last = id
	}
	return strings.Join(parts, ",")
}

func containsSum(sums [][]byte, sum []byte) bool {
	return slices.ContainsFunc(sums, func(s []byte) bool { return slices.Equal(s, sum) })
}
