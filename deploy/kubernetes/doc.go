// Package kubernetes holds patchflow's Kubernetes manifests (a kustomize
// base and an example overlay) and their tests: every document decodes
// strictly into the official Go types (k8s.io/api, KEDA's and the
// Prometheus Operator's own), the overlay renders with kustomize's Go API,
// every variable the Deployment sets is a setting the listener parses, with
// a value it accepts, the probes, port and grace period fit the listener,
// and the NetworkPolicy lets the metrics scraper alone reach its port. A
// module of its own, so the product's go.mod carries none of it.
package kubernetes
