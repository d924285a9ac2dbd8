package telemetry

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/patchflow/patchflow/actors"
)

// MinReleaseTokenLength is the shortest token ReleaseHandler accepts: a
// token guessed is a record of someone else's dead-lettered.
const MinReleaseTokenLength = 16

// ReleaseResult is ReleaseHandler's answer.
type ReleaseResult struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	Offset    int64  `json:"offset"`
	Released  bool   `json:"released"`
	Status    string `json:"status"`
}

// ReleaseHandler serves an operator's release of a failing record to the
// dead-letter topic: POST with topic, partition and offset as query
// parameters and the header "Authorization: Bearer <token>". The status
// port has no authentication otherwise, so this route exists only when a
// token is configured (consumer.WithRelease), and every request without the
// token is refused before anything is looked at. Answers, as JSON: 200 with
// released true (dead-lettered now, or when its running attempt fails) or
// false and why (not failing, already being dead-lettered, not in flight
// here); 404 when no claim of the partition runs in this process (another
// replica has it); 400 for a malformed request; 401 without the token.
func ReleaseHandler(bridge func() *actors.Bridge, token string) http.Handler {
	want := sha256.Sum256([]byte(token))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		given, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		got := sha256.Sum256([]byte(given))
		// Compared as digests: the same length whatever was sent, so the
		// comparison's time says nothing about the token's.
		if !ok || subtle.ConstantTimeCompare(got[:], want[:]) != 1 {
			w.Header().Set("WWW-Authenticate", `Bearer realm="patchflow release"`)
			http.Error(w, "a release needs the operator's token: Authorization: Bearer <token>", http.StatusUnauthorized)
			return
		}
		q := r.URL.Query()
		topic := q.Get("topic")
		partition, perr := strconv.ParseInt(q.Get("partition"), 10, 32)
		offset, oerr := strconv.ParseInt(q.Get("offset"), 10, 64)
		if topic == "" || perr != nil || oerr != nil || partition < 0 || offset < 0 {
			http.Error(w, "want topic, partition and offset: POST /records/release?topic=T&partition=P&offset=O", http.StatusBadRequest)
			return
		}
		b := bridge()
		if b == nil {
			http.Error(w, "the consumer is not running", http.StatusServiceUnavailable)
			return
		}
		res, found, err := b.ReleaseRecord(topic, int32(partition), offset)
		out := ReleaseResult{Topic: topic, Partition: int32(partition), Offset: offset}
		switch {
		case err != nil:
			out.Status = err.Error()
			writeJSON(w, http.StatusServiceUnavailable, out)
		case !found:
			out.Status = fmt.Sprintf("no claim of %s/%d runs in this process: ask the replica that has it (its /status)", topic, partition)
			writeJSON(w, http.StatusNotFound, out)
		default:
			out.Released, out.Status = res.Released, res.Status
			writeJSON(w, http.StatusOK, out)
		}
	})
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}
