package e2e

import (
	"fmt"
	"time"
)

// imageGrace is the grace the image scenario gives `stop`, as a pod's
// terminationGracePeriodSeconds would (deploy/kubernetes sets 30 s): the
// listener must drain, commit and exit 0 inside it.
const imageGrace = 30 * time.Second

// imageScenario runs the listeners from the image (Env.Image): three
// start together against the scenario's empty database; one is
// stopped by the container engine mid-run and must drain and exit 0 inside
// the grace, logging its final totals; a replacement starts; later one is
// killed (SIGKILL, as the node or the OOM killer would) and the next one
// recovers its partitions. The usual independent check judges the rest.
func imageScenario() Scenario {
	stop := func(r *run) error {
		live := r.live()
		if len(live) == 0 {
			return errorf("no listener to stop")
		}
		p := live[0]
		took, err := p.stopContainer(imageGrace)
		if err != nil {
			return err
		}
		if _, drained, err := p.skippedByReason(); err != nil || !drained {
			return errorf("%s exited 0 after stop without logging its totals (consumer stopped): %v", p.name, err)
		}
		r.note(fmt.Sprintf("%s stopped in %.1fs (grace %v), exit 0", p.name, took.Seconds(), imageGrace))
		return nil
	}
	kill := func(r *run) error {
		live := r.live()
		if len(live) == 0 {
			return errorf("no listener to kill")
		}
		r.note(live[0].name + " killed")
		return live[0].killContainer()
	}
	start := func(r *run) error { return r.startListener() }
	return Scenario{Name: "image", Events: 8000, Hosts: 2000, Listeners: 3, Container: true, Judge: judgeImage, Faults: []Fault{
		{0.25, "stop a container (grace 30 s)", stop}, {0.30, "start a container", start},
		{0.55, "kill a container", kill}, {0.60, "start a container", start},
	}}
}

// judgeImage: the three replicas that started together against an empty
// database migrated it once (one logged "schema migrated", every other
// listener "schema current"), and every listener became ready.
func judgeImage(r *run, line *Line) error {
	migrated, current := 0, 0
	for _, p := range r.listeners {
		entries, err := p.logEntries()
		if err != nil {
			return err
		}
		ready := false
		for _, e := range entries {
			switch e.Msg {
			case "database ready; schema migrated":
				migrated++
			case "database ready; schema current":
				current++
			case "readiness: ready":
				ready = true
			}
		}
		if !ready {
			line.Problems = append(line.Problems, p.name+" never became ready")
		}
	}
	if migrated != 1 || migrated+current != len(r.listeners) {
		line.Problems = append(line.Problems, fmt.Sprintf("%d listeners migrated the schema and %d found it current, want 1 and %d", migrated, current, len(r.listeners)-1))
	}
	line.Figures = append(line.Figures, fmt.Sprintf("%d listeners from the image; the schema migrated by 1, found current by %d", len(r.listeners), current))
	return nil
}
