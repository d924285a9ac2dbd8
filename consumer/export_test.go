package consumer

// Crash makes every transactional committer act as if the process had
// died (see crashed) while on.
func Crash(on bool) { crashed.Store(on) }
