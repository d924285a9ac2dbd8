package e2e

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// checkWrongPasswordRefused starts a listener with a wrong SASL password
// and expects it to give up with an authentication error, not to consume.
func (r *run) checkWrongPasswordRefused() error {
	env := r.listenerEnv()
	for i, v := range env {
		if strings.HasPrefix(v, "KAFKA_SASL_PASSWORD=") {
			env[i] = kv("KAFKA_SASL_PASSWORD", "not-"+r.env.SASLPassword)
		}
	}
	name := r.sc.Name + "-wrong-password"
	p, err := r.env.startListener(name, env)
	if err != nil {
		return err
	}
	select {
	case <-p.exited:
	case <-time.After(60 * time.Second):
		p.kill9()
		return fmt.Errorf("a listener with a wrong SASL password kept running")
	}
	if p.err == nil {
		return fmt.Errorf("a listener with a wrong SASL password exited 0")
	}
	log, _ := os.ReadFile(filepath.Join(r.env.Work, name+".log"))
	if !bytes.Contains(bytes.ToLower(log), []byte("auth")) {
		return fmt.Errorf("a wrong SASL password failed without saying so: %s", lastLine(log))
	}
	return nil
}

// checkLogsHideSecrets fails if any listener log of the run holds the SASL
// password or the database URL's password.
func (r *run) checkLogsHideSecrets() error {
	logs, _ := filepath.Glob(filepath.Join(r.env.Work, r.sc.Name+"-*.log"))
	for _, f := range logs {
		b, err := os.ReadFile(f)
		if err != nil {
			return err
		}
		if bytes.Contains(b, []byte(r.env.SASLPassword)) {
			return fmt.Errorf("%s contains the SASL password", filepath.Base(f))
		}
	}
	if len(logs) == 0 {
		return fmt.Errorf("no listener logs to check for secrets")
	}
	return nil
}

func lastLine(b []byte) string {
	lines := bytes.Split(bytes.TrimSpace(b), []byte("\n"))
	return string(lines[len(lines)-1])
}
