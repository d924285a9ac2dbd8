package loadgen

import (
	"fmt"
	"strings"
)

// Summary describes what was sent.
func Summary(plan *Plan, res Result) string {
	var b strings.Builder
	counts := map[string]int{}
	idOnly := 0
	for _, it := range plan.Items {
		if it.Bad != "" || it.Skip != "" {
			continue
		}
		counts[it.Event.Type]++
		if it.Event.IDOnly {
			idOnly++
		}
	}
	deleted, empty, filtered := 0, 0, 0
	for _, st := range plan.Expected {
		switch {
		case st.Deleted:
			deleted++
		case st.NoPackages:
			empty++
		case st.Filtered:
			filtered++
		}
	}
	fmt.Fprintf(&b, "sent %d messages, %.1f MB, in %v (%.0f messages/s)\n", res.Messages, float64(res.Bytes)/1e6, res.Elapsed.Round(1e6), float64(res.Messages)/res.Elapsed.Seconds())
	fmt.Fprintf(&b, "  created %d, updated %d, delete %d (%d carrying only the host id)\n", counts["created"], counts["updated"], counts["delete"], idOnly)
	if n := plan.Rechecks[RecheckRepeat] + plan.Rechecks[RecheckChange]; n > 0 {
		fmt.Fprintf(&b, "  of the updated, %d re-check in: %d %s, %d with %s\n", n, plan.Rechecks[RecheckRepeat], RecheckRepeat, plan.Rechecks[RecheckChange], RecheckChange)
	}
	fmt.Fprintf(&b, "  hosts %d, of which %d end deleted, %d stored without packages, %d never stored (filtered out)\n",
		len(plan.Expected), deleted, empty, filtered)
	fmt.Fprintf(&b, "  bad messages %d (to be dead-lettered):", plan.BadCount())
	for _, k := range BadKinds {
		if n := plan.Bad[k]; n > 0 {
			fmt.Fprintf(&b, " %s %d;", k, n)
		}
	}
	b.WriteString("\n")
	fmt.Fprintf(&b, "  messages to skip %d (committed and counted, not dead-lettered):", plan.SkipCount())
	for _, k := range SkipKinds {
		if n := plan.Skipped[k]; n > 0 {
			fmt.Fprintf(&b, " %s %d;", k, n)
		}
	}
	b.WriteString("\n")
	return b.String()
}
