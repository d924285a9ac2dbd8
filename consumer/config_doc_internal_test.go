package consumer

import (
	"go/ast"
	"go/parser"
	"go/token"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// fieldDocs reads the doc comments of Config's and HTTPLimits' fields from
// config.go, by field name ("HTTP.MaxConns" for HTTPLimits').
func fieldDocs(t *testing.T) map[string]string {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), "config.go", nil, parser.ParseComments)
	if err != nil {
		t.Fatal(err)
	}
	docs := map[string]string{}
	for _, decl := range f.Decls {
		g, ok := decl.(*ast.GenDecl)
		if !ok {
			continue
		}
		for _, spec := range g.Specs {
			ts, ok := spec.(*ast.TypeSpec)
			if !ok {
				continue
			}
			st, ok := ts.Type.(*ast.StructType)
			if !ok || (ts.Name.Name != "Config" && ts.Name.Name != "HTTPLimits") {
				continue
			}
			prefix := ""
			if ts.Name.Name == "HTTPLimits" {
				prefix = "HTTP."
			}
			for _, field := range st.Fields.List {
				for _, n := range field.Names {
					docs[prefix+n.Name] = strings.Join(strings.Fields(field.Doc.Text()+" "+field.Comment.Text()), " ")
				}
			}
		}
	}
	return docs
}

// number reads a number as the docs write it ("1,024", "16,384", "4").
func number(t *testing.T, s string) float64 {
	t.Helper()
	v, err := strconv.ParseFloat(strings.ReplaceAll(s, ",", ""), 64)
	if err != nil {
		t.Fatalf("%q is not a number", s)
	}
	return v
}

// What the doc comments say New accepts is what it accepts: each bound a
// field's comment states is read from the comment, New takes the bound and
// refuses one step past it; each default it states is the one applied.
func TestConfigDocsMatchWhatNewAccepts(t *testing.T) {
	docs := fieldDocs(t)
	base := Config{Brokers: []string{"127.0.0.1:9092"}, Topic: "t", Group: "g"}
	bounds := []struct {
		field, pattern string
		set            func(*Config, float64)
		step           float64 // past the bound: + for "at most", − for "at least"
	}{
		{"ConcurrencyFloor", `ConcurrencyTolerance \(default 1; at least 1 and at most ([0-9.]+)`, func(c *Config, v float64) { c.ConcurrencyTolerance = v }, 0.5},
		{"ConcurrencyFloor", `ConcurrencyTolerance \(default 1; at least ([0-9.]+)`, func(c *Config, v float64) { c.ConcurrencyTolerance = v }, -0.5},
		{"InFlightPerPartition", `G must not exceed MaxInFlight \(([0-9,]+)\)`, func(c *Config, v float64) { c.InFlightTotal, c.InFlightPerPartition = int(v), 1 }, 1},
		{"InFlightPerPartition", `G, default ([0-9,]+)\)`, func(c *Config, v float64) { c.InFlightPerPartition = int(v) }, 1}, // S must not exceed G
		{"Members", `at most ([0-9,]+)`, func(c *Config, v float64) { c.Members = int(v) }, 1},
		{"ConcurrencyFloor", `at most InFlightTotal\)`, nil, 0},
		{"HTTP.MaxConns", `at least ([0-9]+)\)`, func(c *Config, v float64) { c.HTTP.MaxConns = int(v) }, -1},
		{"HTTP.MaxHeaderBytes", `at least ([0-9]+) KiB`, func(c *Config, v float64) { c.HTTP.MaxHeaderBytes = int(v * 1024) }, -1.0 / 1024},
	}
	for _, b := range bounds {
		m := regexp.MustCompile(b.pattern).FindStringSubmatch(docs[b.field])
		if m == nil {
			t.Errorf("%s's doc no longer says %q: %s", b.field, b.pattern, docs[b.field])
			continue
		}
		if b.set == nil {
			continue
		}
		v := number(t, m[1])
		at, past := base, base
		b.set(&at, v)
		b.set(&past, v+b.step)
		if _, err := at.resolve(); err != nil {
			t.Errorf("%s: the documented bound %v is refused: %v", b.field, v, err)
		}
		if _, err := past.resolve(); err == nil {
			t.Errorf("%s: %v, past the documented bound %v, is accepted", b.field, v+b.step, v)
		}
	}
	for name, edit := range map[string]func(*Config){
		"a rack on Kafka 2.3":      func(c *Config) { c.Rack, c.KafkaVersion, c.Assignor = "eu-1a", "2.3.0", AssignorRange },
		"a client id with a space": func(c *Config) { c.ClientID = "my service" },
		"an unknown ordering":      func(c *Config) { c.Ordering = "by-key" },
		"an unknown assignor":      func(c *Config) { c.Assignor = "sticky-cooperative" },
	} {
		c := base
		edit(&c)
		if _, err := c.resolve(); err == nil {
			t.Errorf("%s is accepted", name)
		}
	}
	rack := base
	rack.Rack, rack.ClientID = "eu-1a", "billing-7"
	if r, err := rack.resolve(); err != nil || r.kafka.Rack != "eu-1a" || r.kafka.ClientID != "billing-7" {
		t.Errorf("rack and client id: %v, %+v", err, r.kafka)
	}
	small := base
	small.InFlightTotal = 4
	if r, err := small.resolve(); err != nil || r.pipeline.InFlightPerPartition != 4 {
		t.Errorf("InFlightTotal 4 alone: %v, per partition %d; the doc says S defaults to InFlightTotal if less", err, r.pipeline.InFlightPerPartition)
	}
	floor := base
	floor.InFlightTotal, floor.ConcurrencyFloor = 10, 11
	if _, err := floor.resolve(); err == nil {
		t.Error("a ConcurrencyFloor above InFlightTotal is accepted")
	}

	r, err := base.resolve()
	if err != nil {
		t.Fatal(err)
	}
	p := r.pipeline
	defaults := []struct {
		field, pattern string
		got            float64
	}{
		{"InFlightPerPartition", `\(S, default ([0-9,]+), or InFlightTotal if less\)`, float64(p.InFlightPerPartition)},
		{"InFlightPerPartition", `\(G, default ([0-9,]+)\)`, float64(p.InFlightTotal)},
		{"ConcurrencyFloor", `ConcurrencyFloor \(default ([0-9,]+),`, float64(p.ConcurrencyFloor)},
		{"ConcurrencyFloor", `ConcurrencyTolerance \(default ([0-9.]+);`, p.ConcurrencyTolerance},
		{"MaxAttempts", `\(default ([0-9]+)\)`, float64(p.MaxAttempts)},
		{"DrainTimeout", `Default ([0-9]+) s\.`, p.DrainTimeout.Seconds()},
		{"AttemptTimeout", `Default ([0-9]+) min;`, p.AttemptTimeout.Minutes()},
		{"CommitInterval", `Default ([0-9]+) ms`, float64(r.kafka.CommitInterval / time.Millisecond)},
		{"EvidenceWindow", `\(default ([0-9.]+) s\)`, p.EvidenceWindow.Seconds()},
		{"ReadyPinLimit", `Default ([0-9]+) min\.`, r.readyPinLimit.Minutes()},
		{"CommitMetadataMaxBytes", `Default ([0-9,]+),`, float64(p.CommitMetadataMaxBytes)},
	}
	for _, d := range defaults {
		m := regexp.MustCompile(d.pattern).FindStringSubmatch(docs[d.field])
		if m == nil {
			t.Errorf("%s's doc no longer says %q: %s", d.field, d.pattern, docs[d.field])
			continue
		}
		if want := number(t, m[1]); want != d.got {
			t.Errorf("%s: the doc says the default is %v, New applies %v", d.field, want, d.got)
		}
	}
}
