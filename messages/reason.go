package messages

// Reason says why a record was not processed the ordinary way: either it
// is broken (dead-lettered) or the service ignores it by design (skipped).
// The domain names its reasons (package inventory has the inventory
// events'). The values are stable strings meant for metric labels, the
// status page and dead-letter records.
type Reason string

// ValidationError is why a record cannot be processed, ever (it is broken):
// the domain returns it wrapped with Permanent (see Invalid), so ClassOf
// reports ERROR_CLASS_PERMANENT, errors.As still finds the
// *ValidationError, and the record is dead-lettered with Reason.
type ValidationError struct {
	Reason Reason
	Detail string
}

func (e *ValidationError) Error() string { return string(e.Reason) + ": " + e.Detail }

// Invalid returns a permanent *ValidationError for reason.
func Invalid(r Reason, detail string) error {
	return Permanent(&ValidationError{Reason: r, Detail: detail})
}
