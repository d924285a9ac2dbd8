package evaluation

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/patchflow/patchflow/inventory"
	"github.com/patchflow/patchflow/messages"
)

// A database transaction is reported under "database" as the consumer
// reads calls: an error the database answered with (unclassified) as a
// refusal, so the metric says "refused" and the retry rule "served"; a
// transient one as no answer; a cancellation as a cancellation.
func TestDatabaseTransactionsReportedAsTheConsumerReadsThem(t *testing.T) {
	type call struct {
		dependency string
		class      messages.ErrorClass
	}
	var got []call
	h := New(nil, nil, nil, inventory.DefaultValidationOptions(), nil)
	h.ReportDependenciesTo(func(_ context.Context, dependency string, _ time.Duration, err error) {
		got = append(got, call{dependency, messages.ClassOf(err)})
	})
	for _, err := range []error{nil, errors.New("pq: permission denied for table system_platform"),
		messages.Transient(errors.New("connection refused")), context.Canceled} {
		h.database(context.Background(), time.Now(), err)
	}
	want := []call{{"database", messages.ErrorClass_ERROR_CLASS_UNSPECIFIED}, {"database", messages.ErrorClass_ERROR_CLASS_PERMANENT},
		{"database", messages.ErrorClass_ERROR_CLASS_TRANSIENT}, {"database", messages.ErrorClass_ERROR_CLASS_CANCELLED}}
	if len(got) != len(want) {
		t.Fatalf("reported %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("call %d reported as %v, want %v", i, got[i], want[i])
		}
	}
}
