// Package clusterscript drives a three-node cluster that .ci/kafka-cluster
// started, for the proving drivers in cmd/ that kill and start its nodes.
package clusterscript

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
)

// Cluster is a cluster started by Script in Dir.
type Cluster struct {
	Script string // the cluster script (.ci/kafka-cluster)
	Dir    string // its directory (.ci/kafka-cluster start's answer)
}

// Brokers returns the cluster's client addresses.
func (c Cluster) Brokers() ([]string, error) {
	b, err := os.ReadFile(c.Dir + "/brokers")
	if err != nil {
		return nil, err
	}
	return strings.Fields(string(b)), nil
}

// Node returns a function running the script's verb (node-kill,
// node-start) on a node, failing with the script's output.
func (c Cluster) Node(verb string) func(int32) error {
	return func(n int32) error {
		out, err := exec.Command("bash", c.Script, verb, c.Dir, fmt.Sprint(n)).CombinedOutput()
		if err != nil {
			return fmt.Errorf("%s %d: %w: %s", verb, n, err, out)
		}
		return nil
	}
}
