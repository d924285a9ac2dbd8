package bench

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"syscall"
	"time"
)

// listenerProc is a listener binary the benchmark started in a process of
// its own. The benchmark stops only the processes it started, by their pid.
type listenerProc struct {
	name    string
	cmd     *exec.Cmd
	logPath string        // its stderr and stdout
	exited  chan struct{} // closed once it has exited; err is set then
	err     error
}

// startListener runs bin with env on top of the benchmark's environment
// (later values win), its output to logPath.
func startListener(name, bin, logPath string, env ...string) (*listenerProc, error) {
	out, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		out.Close()
		return nil, fmt.Errorf("start %s: %w", bin, err)
	}
	p := &listenerProc{name: name, cmd: cmd, logPath: logPath, exited: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		out.Close()
		close(p.exited)
	}()
	return p, nil
}

// alive returns nil while the process runs, and an error saying how it
// ended (with the tail of its log) once it has.
func (p *listenerProc) alive() error {
	select {
	case <-p.exited:
		return fmt.Errorf("%s exited early (%v); its log ends: %s", p.name, p.err, p.logTail())
	default:
		return nil
	}
}

// kill9 ends the process at once, as a crash would, and waits for it.
func (p *listenerProc) kill9() {
	select {
	case <-p.exited:
		return
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.exited
}

// stop asks the process to drain and exit (SIGTERM) and waits up to limit,
// then kills it; it reports a process that did not exit 0 in time.
func (p *listenerProc) stop(limit time.Duration) error {
	select {
	case <-p.exited:
		return p.err
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.exited:
		if p.err != nil {
			return fmt.Errorf("%s exited with %v after SIGTERM; its log ends: %s", p.name, p.err, p.logTail())
		}
		return nil
	case <-time.After(limit):
		p.kill9()
		return fmt.Errorf("%s did not exit within %v of SIGTERM", p.name, limit)
	}
}

func (p *listenerProc) logTail() string {
	b, _ := os.ReadFile(p.logPath)
	return tail(string(b))
}

// withLog adds the tail of p's log to err, unless err already says how p
// ended.
func withLog(err error, p *listenerProc) error {
	if p.alive() != nil {
		return err
	}
	return fmt.Errorf("%w; %s's log ends: %s", err, p.name, p.logTail())
}

// poll checks cond every interval until it holds, fails, or limit passes;
// the error then names what was awaited.
func poll(what string, every, limit time.Duration, cond func() (bool, error)) error {
	deadline := time.Now().Add(limit)
	for {
		ok, err := cond()
		if err != nil {
			return fmt.Errorf("waiting for %s: %w", what, err)
		}
		if ok {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s: not within %v", what, limit)
		}
		time.Sleep(every)
	}
}

// freeAddr returns a loopback address with a port nothing listens on now.
func freeAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}
