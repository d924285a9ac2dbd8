package telemetry

import (
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/patchflow/patchflow/actors"
)

// TopicStatus is one topic's line on /status: the group's lag over every
// partition of the topic, claimed by a member or not.
type TopicStatus struct {
	Topic        string `json:"topic"`
	Partitions   int    `json:"partitions"`
	Unclaimed    int    `json:"unclaimed_partitions"`
	Lag          int64  `json:"lag"`
	UnclaimedLag int64  `json:"unclaimed_lag"`
	// ReadSecondsAgo is the age of the oldest of the topics' last good
	// reads (the same on every line; a topic read later is fresher).
	ReadSecondsAgo float64 `json:"read_seconds_ago"`
}

// TopicLagSource returns the latest good read of the group's lag per topic
// and when it was made; before the first, no lags and when the reading
// began, so that the read's age grows from the start while reads fail.
type TopicLagSource func() (lags []actors.TopicLag, at time.Time)

// topicLag holds the attached source.
type topicLag struct {
	src atomic.Pointer[TopicLagSource]
}

// AttachTopicLag adds the group's lag per topic (patchflow_topic_*) and
// the topics' lines on /status, read from src; detach removes them.
func (m *Metrics) AttachTopicLag(src TopicLagSource) (detach func(), err error) {
	c := &topicCollector{m: m}
	if err := m.Registry.Register(c); err != nil {
		return nil, err
	}
	m.topics.src.Store(&src)
	return func() {
		m.Registry.Unregister(c)
		m.topics.src.Store(nil)
	}, nil
}

// topicStatus is the topics' lines for /status; nil without a source or
// before its first read.
func (m *Metrics) topicStatus() []TopicStatus {
	src := m.topics.src.Load()
	if src == nil {
		return nil
	}
	lags, at := (*src)()
	if len(lags) == 0 {
		return nil
	}
	age := time.Since(at).Seconds()
	out := make([]TopicStatus, 0, len(lags))
	for _, l := range lags {
		out = append(out, TopicStatus{Topic: l.Topic, Partitions: l.Partitions, Unclaimed: l.Unclaimed, Lag: l.Lag,
			UnclaimedLag: l.UnclaimedLag, ReadSecondsAgo: age})
	}
	return out
}

var (
	topicLabels         = []string{"topic"}
	topicPartitionsDesc = prometheus.NewDesc("patchflow_topic_partitions",
		"The topic's partitions in the cluster's metadata, claimed or not (read every 10 s).", topicLabels, nil)
	topicUnclaimedDesc = prometheus.NewDesc("patchflow_topic_unclaimed_partitions",
		"Partitions of the topic no member of the group holds: added and not yet claimed, or no member can take them (read every 10 s).", topicLabels, nil)
	topicLagDesc = prometheus.NewDesc("patchflow_topic_lag_records",
		"Records past the group's committed offsets over every partition of the topic, claimed or not (a partition never committed counts from its oldest record; read every 10 s). Every replica reads the same group: take max by topic.", topicLabels, nil)
	topicUnclaimedLagDesc = prometheus.NewDesc("patchflow_topic_unclaimed_lag_records",
		"The part of patchflow_topic_lag_records in partitions no member holds.", topicLabels, nil)
	topicReadAgeDesc = prometheus.NewDesc("patchflow_topic_lag_read_age_seconds",
		"Age of the read patchflow_topic_* come from (before the first good one, time since the reading began): it grows while the reads fail.", nil, nil)
)

type topicCollector struct{ m *Metrics }

func (c *topicCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{topicPartitionsDesc, topicUnclaimedDesc, topicLagDesc, topicUnclaimedLagDesc, topicReadAgeDesc} {
		ch <- d
	}
}

func (c *topicCollector) Collect(ch chan<- prometheus.Metric) {
	if src := c.m.topics.src.Load(); src != nil {
		if _, at := (*src)(); !at.IsZero() {
			ch <- prometheus.MustNewConstMetric(topicReadAgeDesc, prometheus.GaugeValue, time.Since(at).Seconds())
		}
	}
	lines := c.m.topicStatus()
	for _, t := range lines {
		ch <- prometheus.MustNewConstMetric(topicPartitionsDesc, prometheus.GaugeValue, float64(t.Partitions), t.Topic)
		ch <- prometheus.MustNewConstMetric(topicUnclaimedDesc, prometheus.GaugeValue, float64(t.Unclaimed), t.Topic)
		ch <- prometheus.MustNewConstMetric(topicLagDesc, prometheus.GaugeValue, float64(t.Lag), t.Topic)
		ch <- prometheus.MustNewConstMetric(topicUnclaimedLagDesc, prometheus.GaugeValue, float64(t.UnclaimedLag), t.Topic)
	}
}
