package offsets

import (
	"context"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"github.com/IBM/sarama"
)

// FailoverReport is what Failover saw: for each kind of read, how many
// answered and how many answered below a commit the coordinator had
// acknowledged before the read was sent.
type FailoverReport struct {
	Commits                      int64 // acknowledged commits
	StableReads, StableBelow     int
	UnstableReads, UnstableBelow int
}

// Failover measures what a group coordinator's takeover does to reads of
// committed offsets. One client commits offsets 1, 2, 3, ... of topic's
// partition 0 for group, a few milliseconds apart, each after the last was
// acknowledged; two others read the committed offset in a loop, one with
// OffsetFetch's require_stable and one without. Every `every`, the node that
// coordinates the group is killed (kill) and, after `down`, started again
// (start), rounds times. A read below a commit acknowledged before it was
// sent is a read of a state older than the group's: the report counts them.
func Failover(ctx context.Context, brokers []string, topic, group string, rounds int, every, down time.Duration,
	kill, start func(node int32) error, log io.Writer) (FailoverReport, error) {
	newClient := func() (sarama.Client, error) {
		cfg := sarama.NewConfig()
		cfg.Version = sarama.V3_6_0_0
		cfg.Net.DialTimeout = 2 * time.Second
		cfg.Net.ReadTimeout = 3 * time.Second
		cfg.Net.WriteTimeout = 2 * time.Second
		cfg.Metadata.Retry.Max = 1
		return sarama.NewClient(brokers, cfg)
	}
	began := time.Now()
	logf := func(format string, a ...any) {
		fmt.Fprintf(log, "%7.3fs "+format+"\n", append([]any{time.Since(began).Seconds()}, a...)...)
	}
	var acked atomic.Int64
	var rep FailoverReport
	var mu sync.Mutex
	stop := make(chan struct{})
	var wg sync.WaitGroup
	pause := func(d time.Duration) bool {
		select {
		case <-stop:
			return false
		case <-time.After(d):
			return true
		}
	}
	commit := func(c sarama.Client) {
		defer wg.Done()
		for n := int64(1); pause(3 * time.Millisecond); {
			co, err := c.Coordinator(group)
			if err == nil {
				req := &sarama.OffsetCommitRequest{Version: 8, ConsumerGroup: group, ConsumerGroupGeneration: -1}
				req.AddBlock(topic, 0, n, 0, "")
				var resp *sarama.OffsetCommitResponse
				if resp, err = co.CommitOffset(req); err == nil {
					err = resp.Errors[topic][0]
				}
			}
			if err != nil && err != sarama.ErrNoError {
				_ = c.RefreshCoordinator(group)
				pause(50 * time.Millisecond)
				continue
			}
			acked.Store(n)
			n++
		}
	}
	read := func(c sarama.Client, stable bool) {
		defer wg.Done()
		name := map[bool]string{true: "stable", false: "unstable"}[stable]
		for pause(2 * time.Millisecond) {
			before := acked.Load()
			co, err := c.Coordinator(group)
			var block *sarama.OffsetFetchResponseBlock
			if err == nil {
				req := sarama.NewOffsetFetchRequest(sarama.V3_6_0_0, group, map[string][]int32{topic: {0}})
				req.RequireStable = stable
				var resp *sarama.OffsetFetchResponse
				if resp, err = co.FetchOffset(req); err == nil {
					if block = resp.GetBlock(topic, 0); block == nil {
						err = resp.GroupError()
					} else if block.Err != sarama.ErrNoError {
						err = block.Err
					}
				}
			}
			if err != nil || block == nil {
				_ = c.RefreshCoordinator(group)
				pause(50 * time.Millisecond)
				continue
			}
			mu.Lock()
			below := before > 0 && block.Offset < before // nothing is stale before the first acknowledgement
			if stable {
				rep.StableReads++
				if below {
					rep.StableBelow++
				}
			} else {
				rep.UnstableReads++
				if below {
					rep.UnstableBelow++
				}
			}
			first := stable && rep.StableBelow <= 5 || !stable && rep.UnstableBelow <= 5
			mu.Unlock()
			if below && first { // the first five of each kind
				logf("%s read %d from node %d, below the acknowledged commit %d", name, block.Offset, co.ID(), before)
			}
		}
	}
	clients := make([]sarama.Client, 0, 4)
	defer func() {
		for _, c := range clients {
			c.Close()
		}
	}()
	for range 4 {
		c, err := newClient()
		if err != nil {
			return rep, err
		}
		clients = append(clients, c)
	}
	wg.Add(3)
	go commit(clients[0])
	go read(clients[1], true)
	go read(clients[2], false)
	var err error
	for round := 0; round < rounds && err == nil && ctx.Err() == nil; round++ {
		time.Sleep(every)
		var co *sarama.Broker
		if err = clients[3].RefreshCoordinator(group); err == nil {
			co, err = clients[3].Coordinator(group)
		}
		if err != nil {
			err = fmt.Errorf("round %d: coordinator: %w", round+1, err)
			break
		}
		logf("round %d: killing node %d, the coordinator, at commit %d", round+1, co.ID(), acked.Load())
		if err = kill(co.ID()); err != nil {
			break
		}
		time.Sleep(down)
		if err = start(co.ID()); err == nil {
			logf("round %d: node %d is back, at commit %d", round+1, co.ID(), acked.Load())
		}
	}
	time.Sleep(every)
	close(stop)
	wg.Wait()
	rep.Commits = acked.Load()
	if err == nil {
		err = ctx.Err()
	}
	return rep, err
}
