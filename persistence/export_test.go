package persistence

// SetAfterEffects makes every write that writes effects in a transaction
// fail (or not) after writing them and before committing; nil restores. An
// update with its effects commits by itself and does not run it.
func SetAfterEffects(f func() error) { afterEffects = f }
