package actors

// Deliverable is deliverable, for the settle probe's tests.
var Deliverable = deliverable
