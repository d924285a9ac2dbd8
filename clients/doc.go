// Package clients holds the listener's HTTP clients for the services it
// depends on: VMaaS (package updates and errata for an installed package
// list) and the host inventory (a host's system profile).
//
// Both clients share one retry policy (retry.go): a per-attempt timeout,
// exponential backoff with full jitter on 408, 429, 502, 503, 504 and on
// connection errors or timeouts, Retry-After honoured up to the backoff cap,
// and response bodies always drained and closed so connections are reused.
// Every error they return is named with messages.FailedIn
// (DependencyVMaaS, DependencyInventory) and classified for the
// pipeline, except a cancelled caller context, which is returned
// unclassified so that messages.ClassOf reports it as cancelled:
//
//   - messages.Permanent only when the request is wrong for this record, so
//     no retry can help: one that cannot be made (a nil request, an invalid
//     host id) or an answer saying so (a 400; a 422 whose body names one of
//     the request's fields; the inventory's 404 or empty page for a host it
//     does not know, ErrHostNotFound, and a host without a profile). The
//     record is dead-lettered at once.
//   - messages.Transient for everything else, the dependency's failure:
//     retryable statuses and connection errors once the attempts run out;
//     at once (without spending the call's attempts, which a backoff of
//     milliseconds would not heal) a status saying the service or what
//     stands before it is wrong (401, 403, a 404 on the endpoint, 405, 413,
//     a 422 naming nothing of the request, 500, 501, any other status), a
//     body over the cap (on the wire, or on what decoding it would hold)
//     and one that is not the expected JSON. A
//     misconfigured URL or credential, an auth proxy refusing every call,
//     fails every record alike: the pipeline's retry rule judges whose
//     failure it was from the other records' calls, so an outage is retried
//     and only a failure the record meets alone counts towards its dead
//     letter.
//   - messages.Transient marked messages.Congested, the one transient
//     failure that is not the dependency's: the service answered and the
//     process had no room to read the answer (AnswerBudget, below) before
//     the call's attempts, or the caller's deadline, ended. Nothing of the
//     record nor of the dependency: the pipeline retries it and never
//     counts it towards a dead letter.
//
// Each attempt is reported (ReportTo) in the same terms: a permanent answer
// as served (the service is up), an answer the process had no room for as
// served too, every other failure as no answer.
//
// Answers are bounded in bytes (answers.go): each on its own (a cap on the
// wire, and on what decoding it holds), and all of a process's together by
// an AnswerBudget its clients share: an answer is read only once the
// budget holds what it is expected to need, and keeps its share until it
// is decoded.
//
// What it may import: the standard library, github.com/hashicorp/golang-lru/v2
// (the VMaaS answer cache), golang.org/x/sync/semaphore (the answer budget's
// first-come, first-served wait), messages (the error classes) and
// internal/redact (a base URL's password is masked in every error). It never
// imports actors or persistence: callers hand it plain values and get plain
// values back.
package clients
