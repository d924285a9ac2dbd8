package e2e

import (
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/IBM/sarama"
)

// clusterSlots is how many listener processes get proxies of their own to
// every broker (.ci/kafka-cluster's client listeners); a fourth shares the
// first's.
const clusterSlots = 3

// Cluster is the three-node cluster (.ci/kafka-cluster) and the fault
// proxies in front of it, PostgreSQL and the mock.
type Cluster struct {
	Dir   string
	Tools []string // the brokers' tools listeners: the driver's, never faulted
	// clients[k][n] is (proxy address, upstream) for slot k and node n+1.
	clients [][][2]string
	net     *netFaults
	// database is the proxy in front of PostgreSQL (host:port).
	database string
}

// OpenCluster reads the cluster in dir and starts its fault proxies and one
// in front of the PostgreSQL at adminURL. Close stops them.
func OpenCluster(dir, adminURL string) (*Cluster, error) {
	c := &Cluster{Dir: dir}
	b, err := os.ReadFile(filepath.Join(dir, "brokers"))
	if err != nil {
		return nil, err
	}
	c.Tools = strings.Fields(string(b))
	for k := 0; k < clusterSlots; k++ {
		b, err := os.ReadFile(filepath.Join(dir, fmt.Sprintf("clients-%d", k)))
		if err != nil {
			return nil, err
		}
		var row [][2]string
		for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
			f := strings.Fields(line)
			if len(f) != 2 {
				return nil, fmt.Errorf("%s: %q is not 'proxy upstream'", dir, line)
			}
			row = append(row, [2]string{f[0], f[1]})
		}
		c.clients = append(c.clients, row)
	}
	if c.net, err = newNetFaults(c.clients); err != nil {
		return nil, err
	}
	u, err := url.Parse(adminURL)
	if err != nil {
		c.Close()
		return nil, err
	}
	p, err := c.net.front("database", u.Host)
	if err != nil {
		c.Close()
		return nil, err
	}
	c.net.database, c.database = p, p.Listen
	return c, nil
}

// Close stops the proxies.
func (c *Cluster) Close() { c.net.close() }

// slotBrokers is what a listener in slot k bootstraps from: its proxies.
func (c *Cluster) slotBrokers(k int) []string {
	var out []string
	for _, pair := range c.clients[k%clusterSlots] {
		out = append(out, pair[0])
	}
	return out
}

// proxyDatabaseAndMock points the run's listeners at PostgreSQL through the
// cluster's database proxy and at the mock through a proxy of the run's
// own; drop removes the latter.
func (r *run) proxyDatabaseAndMock() (drop func(), err error) {
	c := r.env.Cluster
	db, err := url.Parse(r.dbURL)
	if err != nil {
		return nil, err
	}
	db.Host = c.database
	r.listenerDB = db.String()
	mock, err := url.Parse(r.mockURL)
	if err != nil {
		return nil, err
	}
	p, err := c.net.front("platform-"+r.sc.Name, mock.Host)
	if err != nil {
		return nil, err
	}
	c.net.platform = p
	mock.Host = p.Listen
	r.listenerMock = mock.String()
	return func() { c.net.platform = nil; c.net.drop(p) }, nil
}

// node runs .ci/kafka-cluster's command on node n (1-3), looking at the
// group's progress every lookInterval while it runs: a node's start or
// graceful stop takes 10-20 s here, and a judge that stopped looking
// meanwhile would count it as the group's stall (the listeners go on).
func (r *run) node(command string, n int32) error {
	done := make(chan error, 1)
	go func() { done <- r.env.script("kafka-cluster", command, r.env.Cluster.Dir, strconv.Itoa(int(n))) }()
	for {
		select {
		case err := <-done:
			return err
		case <-time.After(lookInterval):
			r.look()
		}
	}
}

// leadership returns, for the run's topic, how many partitions each node
// leads, and the group's coordinator.
func (r *run) leadership() (leads map[int32]int, coordinator int32, err error) {
	client, err := sarama.NewClient(r.env.Brokers, r.env.saramaConfig())
	if err != nil {
		return nil, 0, err
	}
	defer client.Close()
	if err := client.RefreshMetadata(r.topic); err != nil {
		return nil, 0, err
	}
	parts, err := client.Partitions(r.topic)
	if err != nil {
		return nil, 0, err
	}
	leads = map[int32]int{}
	for _, p := range parts {
		b, err := client.Leader(r.topic, p)
		if err != nil {
			return nil, 0, err
		}
		leads[b.ID()]++
	}
	co, err := client.Coordinator(r.group)
	if err != nil {
		return nil, 0, err
	}
	return leads, co.ID(), nil
}

// underReplicated counts the partitions of the run's topics and of
// __consumer_offsets whose in-sync replicas are fewer than their replicas.
func (r *run) underReplicated() (int, error) {
	admin, err := sarama.NewClusterAdmin(r.env.Brokers, r.env.saramaConfig())
	if err != nil {
		return 0, err
	}
	defer admin.Close()
	meta, err := admin.DescribeTopics([]string{r.topic, r.topic + ".dlq", "__consumer_offsets"})
	if err != nil {
		return 0, err
	}
	n := 0
	for _, t := range meta {
		if t.Err != sarama.ErrNoError {
			return 0, fmt.Errorf("describe %s: %v", t.Name, t.Err)
		}
		for _, p := range t.Partitions {
			if len(p.Isr) < len(p.Replicas) || p.Leader < 0 {
				n++
			}
		}
	}
	return n, nil
}

// waitReplicated waits, looking at the group's progress meanwhile, until no
// partition is under-replicated, for at most limit.
func (r *run) waitReplicated(limit time.Duration) (time.Duration, error) {
	start := time.Now()
	for {
		n, err := r.underReplicated()
		if err == nil && n == 0 {
			return time.Since(start), nil
		}
		if time.Since(start) > limit {
			return time.Since(start), fmt.Errorf("%d partitions still under-replicated after %v (last error: %v)", n, limit, err)
		}
		r.wait(time.Second)
	}
}
