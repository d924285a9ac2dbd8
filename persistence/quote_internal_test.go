package persistence

import (
	"context"
	"database/sql"
	"errors"
	"strings"
	"testing"
)

// refusingQueryer fails every transaction it is asked to begin.
type refusingQueryer struct{}

func (refusingQueryer) QueryContext(context.Context, string, ...any) (*sql.Rows, error) {
	return nil, errors.New("refused")
}

func (refusingQueryer) BeginTx(context.Context, *sql.TxOptions) (*sql.Tx, error) {
	return nil, errors.New("refused")
}

// An error naming an event's org id quotes at most 64 bytes of it: the org
// id is whatever the event says, as long as the record, and the error is
// kept for each attempt, logged, and carried by the dead letter.
func TestAccountErrorQuotesAtMost64BytesOfTheOrgID(t *testing.T) {
	org := strings.Repeat("o", 600_000)
	_, err := newIDCache(16).accountID(context.Background(), refusingQueryer{}, serverView{}, org)
	if err == nil {
		t.Fatal("no error from a database that refuses every transaction")
	}
	if text := err.Error(); strings.Contains(text, org[:65]) || len(text) > 200 {
		t.Fatalf("the error quotes the org id whole: %d bytes: %.100s...", len(text), text)
	}
	if !strings.Contains(err.Error(), `account "`+org[:64]+`"...`) {
		t.Fatalf("the error %.200q does not name the org id's start", err.Error())
	}
}
