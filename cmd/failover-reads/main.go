// Command failover-reads kills the group coordinator of a three-node cluster
// (.ci/kafka-cluster) while one client commits and two read the committed
// offset, stable and unstable, and fails if a stable read ever answered below
// an acknowledged commit. `make failover-reads` runs it on a cluster of its own.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/patchflow/patchflow/proving/clusterscript"
	"github.com/patchflow/patchflow/proving/offsets"
)

func main() {
	dir := flag.String("cluster", "", "the cluster's directory (.ci/kafka-cluster start)")
	script := flag.String("script", ".ci/kafka-cluster", "the cluster script")
	topic := flag.String("topic", "failover", "a topic of the cluster")
	rounds := flag.Int("rounds", 4, "coordinator kills")
	flag.Parse()
	cluster := clusterscript.Cluster{Script: *script, Dir: *dir}
	brokers, err := cluster.Brokers()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	group := fmt.Sprintf("failover-%d", time.Now().UnixNano())
	rep, err := offsets.Failover(context.Background(), brokers, *topic, group, *rounds,
		6*time.Second, 12*time.Second, cluster.Node("node-kill"), cluster.Node("node-start"), os.Stdout)
	fmt.Printf("%d commits acknowledged; stable reads: %d, %d below an acknowledged commit; unstable reads: %d, %d below an acknowledged commit\n",
		rep.Commits, rep.StableReads, rep.StableBelow, rep.UnstableReads, rep.UnstableBelow)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	if rep.StableBelow > 0 {
		fmt.Fprintln(os.Stderr, "FAIL: a stable read answered below an acknowledged commit")
		os.Exit(1)
	}
}
