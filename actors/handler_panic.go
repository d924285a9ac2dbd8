package actors

import (
	"bytes"
	"fmt"
	"runtime/debug"
	"unicode/utf8"
)

// MaxPanicStackBytes bounds the stack a handler's panic carries into its
// record's failure (and so its dead letter's envelope) and the log: the
// frames nearest the panic, cut at a line.
const MaxPanicStackBytes = 2048

// HandlerPanic is what an EvaluationActor panics with when its handler
// panicked: the handler's value and the stack it panicked on, which
// supervision has lost by the time the partition actor hears of it.
type HandlerPanic struct {
	Value any
	Stack string
}

// MaxPanicValueBytes bounds the panic's value as the failure and the log
// quote it, so a large value never pushes the stack out of the dead
// letter's error text (at most 4 KiB) nor fills a log line.
const MaxPanicValueBytes = 1024

// String is the handler's value, as fmt prints it, cut to
// MaxPanicValueBytes.
func (p *HandlerPanic) String() string { return PanicValue(p.Value) }

// PanicValue is a recovered panic's value as fmt prints it, cut to
// MaxPanicValueBytes: what a failure, a log line or a span quotes of it.
func PanicValue(v any) string { return cutText(fmt.Sprint(v), MaxPanicValueBytes) }

// RecoveredStack is the stack of the goroutine that recovered a panic, as
// a deferred recover takes it: from the panicking frame on, at most
// MaxPanicStackBytes.
func RecoveredStack() string { return panicStack(debug.Stack(), MaxPanicStackBytes) }

// cutText cuts s to at most limit bytes at a rune boundary, saying how
// much was left out.
func cutText(s string, limit int) string {
	if len(s) <= limit {
		return s
	}
	note := fmt.Sprintf("… %d bytes more", len(s))
	cut := max(0, limit-len(note))
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + fmt.Sprintf("… %d bytes more", len(s)-cut)
}

// panicStack is the part of a goroutine's stack (runtime/debug.Stack, taken
// in a deferred recover) from the frame that panicked on, without the
// goroutine header and the recovery's own frames, cut to at most limit
// bytes at a line, with how much was left out.
func panicStack(stack []byte, limit int) string {
	// The frames above the panic are the recovery's: debug.Stack, the
	// deferred function and runtime's panic; the panicking frame follows
	// the last "panic(" line and its file line.
	if i := bytes.LastIndex(stack, []byte("\npanic(")); i >= 0 {
		rest := stack[i+1:]
		for range 2 { // the panic( line and its file line
			if j := bytes.IndexByte(rest, '\n'); j >= 0 {
				rest = rest[j+1:]
			} else {
				rest = nil
			}
		}
		stack = rest
	}
	stack = bytes.TrimRight(stack, "\n")
	if len(stack) <= limit {
		return string(stack)
	}
	note := fmt.Sprintf("\n… %d bytes of stack more", len(stack)) // as long as the note below, or longer
	cut := stack[:max(0, limit-len(note))]
	if j := bytes.LastIndexByte(cut, '\n'); j > 0 {
		cut = cut[:j]
	}
	return string(cut) + fmt.Sprintf("\n… %d bytes of stack more", len(stack)-len(cut))
}
