package demo_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/patchflow/patchflow/cmd/internal/demo"
	"github.com/patchflow/patchflow/cmd/internal/listener"
)

// The demo runs end to end on the embedded broker and returns nil only when
// every partition was committed to its end; its summary accounts for every
// malformed record in the dead-letter count.
func TestDemoEndToEnd(t *testing.T) {
	env := map[string]string{"KAFKA_BROKERS": "embedded", "LISTENER_SIMULATED_LATENCY": "5ms", "EMBEDDED_PARTITIONS": "4", "LISTENER_PROGRESS_INTERVAL": "0"}
	cfg, _, err := listener.Parse(nil, func(k string) (string, bool) { v, ok := env[k]; return v, ok })
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	err = demo.Run(ctx, cfg, demo.Options{Records: 3000, Hosts: 300, PoisonRate: 0.02}, &out, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatalf("demo: %v\n%s", err, out.String())
	}
	var produced, malformed int
	if _, err := fmt.Sscanf(out.String()[strings.Index(out.String(), "produced "):], "produced %d records for 300 hosts (%d malformed)", &produced, &malformed); err != nil {
		t.Fatalf("no production line: %v\n%s", err, out.String())
	}
	if produced != 3000 || malformed == 0 {
		t.Fatalf("produced %d, malformed %d", produced, malformed)
	}
	want := fmt.Sprintf("dead-lettered %d of %d malformed", malformed, malformed)
	if !strings.Contains(out.String(), want) {
		t.Fatalf("summary lacks %q:\n%s", want, out.String())
	}
}
