package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"
)

// listenerProc is one listener process the suite started.
type listenerProc struct {
	name   string
	cmd    *exec.Cmd
	exited chan struct{} // closed once the process has exited
	err    error         // its exit status, valid after exited closes
}

// startListener runs bin/listener with env, logging to <work>/<name>.log.
func (e *Env) startListener(name string, env []string) (*listenerProc, error) {
	log, err := os.Create(filepath.Join(e.Work, name+".log"))
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(filepath.Join(e.Bin, "listener"))
	cmd.Env = append([]string{"PATH=" + os.Getenv("PATH")}, env...)
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		log.Close()
		return nil, err
	}
	p := &listenerProc{name: name, cmd: cmd, exited: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		log.Close()
		close(p.exited)
	}()
	return p, nil
}

// kill9 ends the process at once, as a crash would.
func (p *listenerProc) kill9() {
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.exited
}

// term asks the process to drain and exit, and waits up to limit.
func (p *listenerProc) term(limit time.Duration) error {
	if !p.running() {
		return nil
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.exited:
		if p.err != nil {
			return fmt.Errorf("%s exited with %v after SIGTERM", p.name, p.err)
		}
		return nil
	case <-time.After(limit):
		_ = p.cmd.Process.Signal(syscall.SIGKILL)
		<-p.exited
		return fmt.Errorf("%s did not exit within %v of SIGTERM", p.name, limit)
	}
}

// running reports whether the process is alive.
func (p *listenerProc) running() bool {
	select {
	case <-p.exited:
		return false
	default:
		return true
	}
}

// script runs one of the .ci scripts.
func (e *Env) script(name string, args ...string) error {
	cmd := exec.Command(filepath.Join(e.CI, name), args...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s %v: %v: %s", name, args, err, out)
	}
	return nil
}
