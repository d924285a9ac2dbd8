package actors

import (
	"runtime"
	"sync"
	"sync/atomic"

	"github.com/asynkron/protoactor-go/actor"
)

// childMailbox is the mailbox of an EvaluationActor. An evaluation actor
// lives for one record and gets one user message and three or four system
// messages (started, stop, and the termination of its watch); protoactor's
// default mailbox allocates two queues at spawn and a node per system
// message, about a third of the allocations per record when handlers cost
// nothing. This one keeps both queues in small inline arrays behind a mutex
// (uncontended: the parent posts once, the child posts its own stop), so a
// spawn allocates the mailbox and nothing more.
//
// Semantics follow protoactor's default mailbox: system messages go first,
// SuspendMailbox/ResumeMailbox hold user messages back, a panic in a
// handler escalates to the supervisor with the message that caused it, and
// a mailbox yields after the dispatcher's throughput. It does not expand
// MessageBatch and has no mailbox middleware: evaluation actors use neither.
type childMailbox struct {
	mu        sync.Mutex
	system    fifo
	user      fifo
	suspended bool
	status    atomic.Int32 // mailboxIdle or mailboxRunning

	invoker    actor.MessageInvoker
	dispatcher actor.Dispatcher
	process    func() // m.processMessages, bound once
}

const (
	mailboxIdle int32 = iota
	mailboxRunning
)

var _ actor.Mailbox = (*childMailbox)(nil)

// newChildMailbox is the MailboxProducer of evaluation actors.
func newChildMailbox() actor.Mailbox {
	m := &childMailbox{}
	m.system.items = m.system.inline[:0]
	m.user.items = m.user.inline[:0]
	m.process = m.processMessages
	return m
}

// PostUserMessage implements actor.Mailbox.
func (m *childMailbox) PostUserMessage(msg any) {
	m.mu.Lock()
	m.user.push(msg)
	m.mu.Unlock()
	m.schedule()
}

// PostSystemMessage implements actor.Mailbox.
func (m *childMailbox) PostSystemMessage(msg any) {
	m.mu.Lock()
	m.system.push(msg)
	m.mu.Unlock()
	m.schedule()
}

// RegisterHandlers implements actor.Mailbox.
func (m *childMailbox) RegisterHandlers(invoker actor.MessageInvoker, dispatcher actor.Dispatcher) {
	m.invoker, m.dispatcher = invoker, dispatcher
}

// Start implements actor.Mailbox.
func (m *childMailbox) Start() {}

// UserMessageCount implements actor.Mailbox.
func (m *childMailbox) UserMessageCount() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.user.len()
}

func (m *childMailbox) schedule() {
	if m.status.CompareAndSwap(mailboxIdle, mailboxRunning) {
		m.dispatcher.Schedule(m.process)
	}
}

func (m *childMailbox) processMessages() {
	for {
		m.run()
		m.status.Store(mailboxIdle)
		// Messages posted after run saw the queues empty found the mailbox
		// running and did not schedule it: look again.
		m.mu.Lock()
		more := m.system.len() > 0 || (!m.suspended && m.user.len() > 0)
		m.mu.Unlock()
		if !more || !m.status.CompareAndSwap(mailboxIdle, mailboxRunning) {
			return
		}
	}
}

func (m *childMailbox) run() {
	var msg any
	defer func() {
		if r := recover(); r != nil {
			m.invoker.EscalateFailure(r, msg)
		}
	}()
	throughput := m.dispatcher.Throughput()
	for i := 0; ; i++ {
		if i > throughput {
			i = 0
			runtime.Gosched()
		}
		m.mu.Lock()
		if sys, ok := m.system.pop(); ok {
			switch sys.(type) {
			case *actor.SuspendMailbox:
				m.suspended = true
				m.mu.Unlock()
			case *actor.ResumeMailbox:
				m.suspended = false
				m.mu.Unlock()
			default:
				m.mu.Unlock()
				msg = sys
				m.invoker.InvokeSystemMessage(sys)
			}
			continue
		}
		if m.suspended {
			m.mu.Unlock()
			return
		}
		u, ok := m.user.pop()
		m.mu.Unlock()
		if !ok {
			return
		}
		msg = u
		m.invoker.InvokeUserMessage(u)
	}
}

// fifo is a queue that starts in an inline array and grows by append.
type fifo struct {
	inline [4]any
	items  []any
	head   int
}

func (q *fifo) push(v any) { q.items = append(q.items, v) }

func (q *fifo) pop() (any, bool) {
	if q.head == len(q.items) {
		return nil, false
	}
	v := q.items[q.head]
	q.items[q.head] = nil
	q.head++
	if q.head == len(q.items) {
		q.items, q.head = q.items[:0], 0
	}
	return v, true
}

func (q *fifo) len() int { return len(q.items) - q.head }
