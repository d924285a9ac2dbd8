package persistence

// SetAfterEffects makes every write that writes effects fail (or not) after
// writing them and before committing; nil restores.
func SetAfterEffects(f func() error) { afterEffects = f }
