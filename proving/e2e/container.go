package e2e

import (
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// The image scenario runs listeners from the image `make image` builds, as
// a deployment would: the container engine's own stop and kill, a
// read-only root filesystem, no capabilities, the image's user. The host's
// network, so the listener reaches the broker, PostgreSQL and the mock on
// 127.0.0.1 as the processes of the other scenarios do.

// startContainer runs the image as listener name with env, its output
// (the listener's JSON log) to <work>/<name>.log. The settings go in an
// env file of mode 0600, not on the command line, where `ps` would show
// the database URL.
func (e *Env) startContainer(name string, env []string) (*listenerProc, error) {
	envFile := filepath.Join(e.Work, name+".env")
	if err := os.WriteFile(envFile, []byte(strings.Join(env, "\n")+"\n"), 0o600); err != nil {
		return nil, err
	}
	log, err := os.Create(filepath.Join(e.Work, name+".log"))
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(e.ContainerEngine, "run", "--rm", "--name", name, "--network", "host",
		"--read-only", "--cap-drop", "ALL", "--security-opt", "no-new-privileges",
		"--env-file", envFile, e.Image)
	cmd.Env = e.engineEnv()
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		log.Close()
		return nil, err
	}
	p := &listenerProc{name: name, log: log.Name(), cmd: cmd, started: time.Now(), exited: make(chan struct{}),
		container: name, engine: e.ContainerEngine, engineEnv: cmd.Env}
	go func() {
		p.err = cmd.Wait() // the engine's client exits with the container's status
		p.exitedAt = time.Now()
		log.Close()
		close(p.exited)
	}()
	return p, nil
}

// engineEnv is the container engine's environment: the suite's, with
// CONTAINERS_CONF naming .ci/containers.conf unless one is set (runc, no
// default ulimits: what podman needs on a cgroups v1 host).
func (e *Env) engineEnv() []string {
	env := os.Environ()
	if os.Getenv("CONTAINERS_CONF") == "" {
		env = append(env, "CONTAINERS_CONF="+filepath.Join(e.CI, "containers.conf"))
	}
	return env
}

// engineRun runs the container engine with args, for p's container.
func (p *listenerProc) engineRun(args ...string) error {
	cmd := exec.Command(p.engine, args...)
	cmd.Env = p.engineEnv
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("%s %s: %v: %s", p.engine, strings.Join(args, " "), err, out)
	}
	return nil
}

// stopContainer is `<engine> stop -t <grace>`: SIGTERM to the listener (the
// image's entrypoint is the listener itself, PID 1), SIGKILL once grace has
// passed. It returns how long the container took to exit, and an error when
// it did not exit 0 (a drain the grace cut short exits 137).
func (p *listenerProc) stopContainer(grace time.Duration) (time.Duration, error) {
	p.stopped.Store(true)
	began := time.Now()
	secs := int(math.Ceil(grace.Seconds()))
	if err := p.engineRun("stop", "-t", fmt.Sprint(secs), p.container); err != nil {
		return time.Since(began), err
	}
	<-p.exited
	took := p.exitedAt.Sub(began)
	if p.err != nil {
		return took, fmt.Errorf("%s exited with %v after %s stop -t %d (%v)", p.name, p.err, p.engine, secs, took.Round(100*time.Millisecond))
	}
	return took, nil
}

// killContainer is `<engine> kill`: SIGKILL, as a node or OOM kill would.
func (p *listenerProc) killContainer() error {
	p.stopped.Store(true)
	err := p.engineRun("kill", "--signal", "KILL", p.container)
	<-p.exited
	return err
}
