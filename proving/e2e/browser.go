package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"time"
)

// chromiumArgs keep a headless Chromium off the network: no background
// services, no component updates, a throwaway profile.
func chromiumArgs(profile string, extra ...string) []string {
	return append([]string{"--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
		"--disable-background-networking", "--disable-component-update", "--disable-sync", "--user-data-dir=" + profile}, extra...)
}

// partitionRow matches a row of the partitions table: its partition and
// committed offset ("none" while the group has none).
var partitionRow = regexp.MustCompile(`(?s)<tr class="partition"><td class="l">[^<]+</td><td>(\d+)</td><td>\d+</td><td>(\d+|none)</td>`)

var badVerb = regexp.MustCompile(`%!\w*\([^)]*\)`)

// checkStatusPage loads the status page in a real headless browser while
// the listener works: the partitions table must show live numbers (a
// committed offset past 0) and no value fmt could not format, and a
// screenshot is saved to shot.
func (e *Env) checkStatusPage(url, shot string) error {
	browser := e.Browser
	if browser == "" {
		return nil
	}
	profile, err := os.MkdirTemp("", "patchflow-chromium")
	if err != nil {
		return err
	}
	defer os.RemoveAll(profile)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	dom, err := exec.CommandContext(ctx, browser, chromiumArgs(profile, "--dump-dom", url)...).Output()
	if err != nil {
		return fmt.Errorf("chromium --dump-dom %s: %w", url, err)
	}
	rows := partitionRow.FindAllSubmatch(dom, -1)
	live := 0
	for _, row := range rows {
		if c, _ := strconv.ParseInt(string(row[2]), 10, 64); c > 0 {
			live++
		}
	}
	if len(rows) == 0 || live == 0 {
		return fmt.Errorf("status page shows %d partition rows, %d with a committed offset past 0", len(rows), live)
	}
	// A value the template could not format (fmt's "%!verb(type=value)").
	if bad := badVerb.Find(dom); bad != nil {
		return fmt.Errorf("status page shows a value it could not format: %s", bad)
	}
	if shot != "" {
		abs, _ := filepath.Abs(shot)
		if out, err := exec.CommandContext(ctx, browser, chromiumArgs(profile, "--screenshot="+abs, "--window-size=1400,700", url)...).CombinedOutput(); err != nil {
			return fmt.Errorf("chromium --screenshot: %w: %s", err, out)
		}
	}
	return nil
}
