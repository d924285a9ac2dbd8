package ordering

// NewCollidingGate returns a gate whose every key hashes alike, so the
// properties can be checked where two keys collide.
func NewCollidingGate(mode Mode) *Gate {
	g := NewGate(mode)
	g.hash = func([]byte) uint64 { return 42 }
	return g
}

// Slots returns the offsets the gate's queues have room for: the
// partition's, the busy keys' and the recycled ones.
func Slots(g *Gate) int {
	n := cap(g.whole.items)
	for _, q := range g.busy {
		if q != nil {
			n += cap(q.items)
		}
	}
	for _, q := range g.free {
		n += cap(q.items)
	}
	return n
}
