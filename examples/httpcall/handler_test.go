package main

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/patchflow/patchflow/consumer"
	"github.com/patchflow/patchflow/messages"
)

// Only a status saying the record is wrong dead-letters it; one saying the
// service, or the way to it, is wrong is retried, judged by the consumer
// against the other records' calls.
func TestEnricherBlamesTheRecordOnlyFor400And422(t *testing.T) {
	for code, want := range map[int]messages.ErrorClass{
		200: messages.ErrorClass_ERROR_CLASS_UNSPECIFIED,
		400: messages.ErrorClass_ERROR_CLASS_PERMANENT,
		422: messages.ErrorClass_ERROR_CLASS_PERMANENT,
		401: messages.ErrorClass_ERROR_CLASS_TRANSIENT,
		403: messages.ErrorClass_ERROR_CLASS_TRANSIENT,
		404: messages.ErrorClass_ERROR_CLASS_TRANSIENT,
		408: messages.ErrorClass_ERROR_CLASS_TRANSIENT,
		413: messages.ErrorClass_ERROR_CLASS_TRANSIENT,
		429: messages.ErrorClass_ERROR_CLASS_TRANSIENT,
		500: messages.ErrorClass_ERROR_CLASS_TRANSIENT,
		503: messages.ErrorClass_ERROR_CLASS_TRANSIENT,
	} {
		t.Run(fmt.Sprint(code), func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(code) }))
			defer srv.Close()
			e := &Enricher{URL: srv.URL, Client: srv.Client()}
			err := e.Handle(context.Background(), &consumer.Record{Key: []byte("host-1"), Value: []byte("1")})
			if got := messages.ClassOf(err); got != want {
				t.Fatalf("HTTP %d: class of %v = %v, want %v", code, err, got, want)
			}
			if err != nil && messages.DependencyOf(err) != dependency {
				t.Fatalf("HTTP %d: %v names %q, want %q", code, err, messages.DependencyOf(err), dependency)
			}
		})
	}
}
