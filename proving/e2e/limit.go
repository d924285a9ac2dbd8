package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"
)

// The adaptive in-flight limit through an outage: the db-outage and
// vmaas-trouble scenarios watch every listener's limit (its /status.json,
// each time the run looks at the broker) and judge that it fell during the
// trouble and rose again after it.

// limitSample is one listener's limit at one moment.
type limitSample struct {
	at                     time.Time
	limit, inFlight, floor int
	mode                   string
}

// concurrencyStatus is what the watch reads of /status.json.
type concurrencyStatus struct {
	Concurrency struct {
		Mode     string `json:"mode"`
		Limit    int    `json:"limit"`
		Floor    int    `json:"floor"`
		InFlight int    `json:"in_flight"`
	} `json:"concurrency"`
}

// watchLimits records the limit of every live listener with a status
// address.
func (r *run) watchLimits() {
	for _, p := range r.live() {
		if p.status == "" {
			continue
		}
		var st concurrencyStatus
		if err := getJSON(p.status, &st); err == nil && st.Concurrency.Mode != "" {
			p.limits = append(p.limits, limitSample{at: time.Now(), limit: st.Concurrency.Limit, inFlight: st.Concurrency.InFlight,
				floor: st.Concurrency.Floor, mode: st.Concurrency.Mode})
		}
	}
}

// markTrouble brackets a scenario's trouble, for judgeLimitThroughTrouble.
func (r *run) markTrouble(start bool) {
	if start {
		r.troubleFrom = time.Now()
	} else {
		r.troubleTo = time.Now()
	}
}

// Windows of the judge: the limit before the trouble is its mean over
// limitBefore; during, its lowest after limitReact into the trouble;
// after, its highest within limitRecover of the trouble's end.
const (
	limitBefore  = 5 * time.Second
	limitReact   = 3 * time.Second
	limitRecover = 30 * time.Second
)

// judgeLimitThroughTrouble: each listener that ran through the trouble
// with the adaptive limit shows it lower during the trouble than before
// (at most half, or at its floor) and higher again after it (at least
// twice its lowest, or back where it was), and the run prints each
// listener's limit every two seconds around the trouble.
func judgeLimitThroughTrouble(r *run, line *Line) error {
	if r.troubleFrom.IsZero() || r.troubleTo.IsZero() {
		line.Problems = append(line.Problems, "the trouble's start and end were not marked")
		return nil
	}
	judged := 0
	for i, p := range r.listeners {
		s := summarizeLimits(p.limits, r.troubleFrom, r.troubleTo)
		if !s.complete {
			continue // started or stopped inside the windows: nothing to compare
		}
		judged++
		line.Figures = append(line.Figures, fmt.Sprintf("listener %d limit %.0f before, %d lowest during, %d highest after", i, s.before, s.lowest, s.highest))
		line.Details = append(line.Details, fmt.Sprintf("listener %d limit (in flight) every 2 s from %.0f s before the trouble: %s", i, limitBefore.Seconds(), s.timeline))
		if s.mode != "adaptive" {
			line.Problems = append(line.Problems, fmt.Sprintf("listener %d ran with %s concurrency, not adaptive", i, s.mode))
			continue
		}
		if float64(s.lowest) > s.before/2 && s.lowest > s.floor {
			line.Problems = append(line.Problems, fmt.Sprintf("listener %d: the limit did not fall in the trouble (%.0f before, %d lowest)", i, s.before, s.lowest))
		}
		if s.highest < 2*s.lowest && float64(s.highest) < s.before {
			line.Problems = append(line.Problems, fmt.Sprintf("listener %d: the limit did not recover after the trouble (%d lowest, %d highest after)", i, s.lowest, s.highest))
		}
	}
	if judged == 0 {
		line.Problems = append(line.Problems, "no listener's limit was watched through the whole trouble")
	}
	return nil
}

type limitSummary struct {
	complete        bool
	mode            string
	before          float64
	floor           int
	lowest, highest int
	timeline        string
}

func summarizeLimits(samples []limitSample, from, to time.Time) limitSummary {
	s := limitSummary{lowest: -1}
	var sum, n float64
	var parts []string
	var next time.Time
	seenBefore, seenDuring, seenAfter := false, false, false
	for _, x := range samples {
		s.mode, s.floor = x.mode, x.floor
		switch {
		case !x.at.Before(from.Add(-limitBefore)) && x.at.Before(from):
			sum += float64(x.limit)
			n++
			seenBefore = true
		case !x.at.Before(from.Add(limitReact)) && !x.at.After(to):
			if s.lowest < 0 || x.limit < s.lowest {
				s.lowest = x.limit
			}
			seenDuring = true
		case x.at.After(to) && !x.at.After(to.Add(limitRecover)):
			s.highest = max(s.highest, x.limit)
			seenAfter = true
		}
		if !x.at.Before(from.Add(-limitBefore)) && !x.at.After(to.Add(limitRecover)) && !x.at.Before(next) {
			mark := ""
			if !x.at.Before(from) && !x.at.After(to) {
				mark = "*"
			}
			parts = append(parts, fmt.Sprintf("%d%s(%d)", x.limit, mark, x.inFlight))
			next = x.at.Add(2 * time.Second)
		}
	}
	s.complete = seenBefore && seenDuring && seenAfter
	if n > 0 {
		s.before = sum / n
	}
	s.timeline = strings.Join(parts, " ") + "  (* during the trouble)"
	return s
}

// getJSON decodes what url answers into v, waiting at most 2 s.
func getJSON(url string, v any) error {
	c := http.Client{Timeout: 2 * time.Second}
	resp, err := c.Get(url)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	return json.NewDecoder(resp.Body).Decode(v)
}
