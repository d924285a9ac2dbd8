package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"time"
)

// phases writes how long each phase of a scenario took to
// <work>/<scenario>-phases.log, so the suite's time can be read per phase.
type phases struct {
	f    *os.File
	last time.Time
}

func newPhases(work, scenario string) *phases {
	p := &phases{last: time.Now()}
	if work != "" {
		p.f, _ = os.Create(filepath.Join(work, scenario+"-phases.log"))
	}
	return p
}

// mark records the phase that ends now.
func (p *phases) mark(name string) {
	now := time.Now()
	if p.f != nil {
		fmt.Fprintf(p.f, "%7.1fs  %s\n", now.Sub(p.last).Seconds(), name)
	}
	p.last = now
}

func (p *phases) close() {
	if p.f != nil {
		p.mark("the rest")
		p.f.Close()
	}
}
