// Package prometheus holds patchflow's alerting rules (alerts.yaml, and the
// same as a PrometheusRule) and their tests: promtool's rule checks and unit
// tests (alerts_test.yaml), run from `go test`, and a check that every
// metric and label the rules and their test series use is one a live
// listener serves on /metrics. A module of its own, so the product's go.mod
// carries none of promtool's dependencies.
package prometheus
