package evaluation

// NewUpload exposes newUpload to the tests, which store profiles the way
// an older listener left them (stored, not evaluated).
var NewUpload = newUpload
