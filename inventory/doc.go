// Package inventory is the patch-management domain's input: the inventory
// events of platform.inventory.events (created, updated, delete), decoded
// fast, taking only the fields the service uses from a profile of about
// 100 KB; their validation (a broken event is a permanent
// messages.ValidationError with one of ValidationReasons, dead-lettered) and
// filters (a skipped event is a messages.Skipped with one of SkipReasons,
// committed and counted); and NEVRA package strings.
//
// It imports messages (the generic outcomes) and internal/jsonscan, nothing
// of the pipeline.
package inventory
