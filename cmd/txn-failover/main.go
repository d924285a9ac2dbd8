// Command txn-failover runs sarama's transactional producer in a
// consume-transform-produce loop on a three-node cluster (.ci/kafka-cluster)
// while it kills, by turns, the transaction coordinator, the group
// coordinator and a partition leader, then reads the output back under
// read_committed; it fails on a record missing, duplicated or a partition
// that stopped. `make txn-failover` runs it on a cluster of its own.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/patchflow/patchflow/proving/clusterscript"
	"github.com/patchflow/patchflow/proving/transactions"
)

func main() {
	dir := flag.String("cluster", "", "the cluster's directory (.ci/kafka-cluster start)")
	script := flag.String("script", ".ci/kafka-cluster", "the cluster script")
	in := flag.String("in", "txn-in", "the input topic")
	out := flag.String("out", "txn-out", "the output topic")
	partitions := flag.Int("partitions", 4, "partitions of both topics")
	per := flag.Int64("per-partition", 12000, "input records per partition")
	batch := flag.Int("batch", 10, "input records per transaction")
	pause := flag.Duration("pause", 30*time.Millisecond, "pause between a partition's transactions")
	rounds := flag.Int("rounds", 6, "node kills")
	library := flag.Bool("library", false, "run the consumer library's transactional mode (consumer.CommitTransactional) instead of the hand-written loop")
	latency := flag.Duration("latency", 10*time.Millisecond, "with -library: the handler's wait per record")
	inFlight := flag.Int("in-flight", 8, "with -library: records in flight")
	periodic := flag.Bool("periodic", false, "with -library: its periodic mode (results at least once: duplicates counted, not failed)")
	flag.Parse()
	cluster := clusterscript.Cluster{Script: *script, Dir: *dir}
	brokers, err := cluster.Brokers()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	rep, err := transactions.Probe(context.Background(), transactions.Options{
		Brokers: brokers, In: *in, Out: *out, Group: fmt.Sprintf("txn-probe-%d", time.Now().UnixNano()),
		Partitions: int32(*partitions), PerPartition: *per, Batch: *batch, Pause: *pause,
		Every: 10 * time.Second, Down: 8 * time.Second, Rounds: *rounds,
		Kill: cluster.Node("node-kill"), Start: cluster.Node("node-start"), Stall: 90 * time.Second, Log: os.Stdout,
		Library: *library, Latency: *latency, InFlight: *inFlight, Periodic: *periodic,
	})
	fmt.Println(rep.Line())
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	if rep.Failed() {
		fmt.Fprintln(os.Stderr, "FAIL: a record lost, duplicated where it may not be, out of order, or a partition stopped")
		os.Exit(1)
	}
}
