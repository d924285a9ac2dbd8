package consumer

import (
	"fmt"
	"log/slog"

	"github.com/IBM/sarama"

	"github.com/patchflow/patchflow/actors"
)

// links are the clients Run opens before it consumes: the dead-letter
// producers, the probe client (settle probe, committed-offset reader, and
// the reader past batches over the decompression limit) and
// the group members, with the settings the brokers' limits adjusted.
type links struct {
	kafka    actors.KafkaSettings // DeadLetterMaxBytes read from the topic
	settings actors.Settings      // CommitMetadataMaxBytes lowered to the brokers'
	dead     *actors.KafkaDeadLetters
	probe    sarama.Client
	// lag reads the group's lag per topic, on a client of its own: a
	// request the brokers hold keeps its connection, and the probe's
	// checks must not wait behind it.
	lag       sarama.Client
	isolation sarama.IsolationLevel
	groups    []sarama.ConsumerGroup
	// window is the bytes of a partition one fetch of the members asks
	// for (Consumer.Fetch.Default).
	window int32
}

// connect reaches the brokers: it checks the topic, creates or checks the
// dead-letter topic, reads the brokers' commit metadata limit, and opens
// the dead-letter producers, the probe client and one consumer group per
// member. On an error it closes what it opened.
func (c *Consumer) connect(logger *slog.Logger) (_ *links, err error) {
	l := &links{kafka: c.cfg.kafka, settings: c.cfg.pipeline}
	defer func() {
		if err != nil {
			l.close()
		}
	}()
	k := &l.kafka
	pcfg, err := actors.NewProducerConfig(*k)
	if err != nil {
		return nil, err
	}
	admin, err := sarama.NewClusterAdmin(k.Brokers, pcfg)
	if err != nil {
		return nil, fmt.Errorf("connect to Kafka at %v: %w", k.Brokers, err)
	}
	// Each dead-letter topic once, for every source topic it takes.
	k.DeadLetterLimits = map[string]int{}
	var dlqs []string
	sourcesOf := map[string][]string{}
	for _, t := range k.SourceTopics() {
		dlq := k.DeadLetterTopicOf(t)
		if sourcesOf[dlq] == nil {
			dlqs = append(dlqs, dlq)
		}
		sourcesOf[dlq] = append(sourcesOf[dlq], t)
	}
	for _, dlq := range dlqs {
		var limit int
		if limit, err = ensureSharedDeadLetterTopic(admin, sourcesOf[dlq], dlq, logger); err != nil {
			break
		}
		k.DeadLetterLimits[dlq] = limit
		if limit > 0 && (k.DeadLetterMaxBytes == 0 || limit < k.DeadLetterMaxBytes) {
			k.DeadLetterMaxBytes = limit // batches fit the strictest one; an unknown limit (0) is no bound
		}
	}
	if err == nil && l.settings.CommitMetadataMaxBytes > 0 {
		l.settings.CommitMetadataMaxBytes = commitMetadataLimit(admin, l.settings.CommitMetadataMaxBytes, logger)
	}
	_ = admin.Close()
	if err != nil {
		return nil, err
	}
	// The producers' record limit follows the dead-letter topic's.
	if l.dead, err = actors.NewKafkaDeadLetters(*k); err != nil {
		return nil, err
	}
	// The settle probe asks the broker, with the consumers' isolation level,
	// whether an idle partition has anything left to deliver; the committed
	// reader lets a new owner skip what the last one finished.
	probeCfg, err := actors.NewConsumerConfig(*k, l.settings)
	if err != nil {
		return nil, err
	}
	probeCfg.ClientID = k.ClientID + "-probe"
	l.isolation = probeCfg.Consumer.IsolationLevel
	l.window = probeCfg.Consumer.Fetch.Default
	if l.probe, err = sarama.NewClient(k.Brokers, probeCfg); err != nil {
		return nil, fmt.Errorf("connect to Kafka at %v: %w", k.Brokers, err)
	}
	lagCfg, err := actors.NewConsumerConfig(*k, l.settings)
	if err != nil {
		return nil, err
	}
	lagCfg.ClientID = k.ClientID + "-lag"
	lagCfg.Net.DialTimeout, lagCfg.Net.WriteTimeout, lagCfg.Net.ReadTimeout = lagTimeout, lagTimeout, lagTimeout
	lagCfg.Metadata.Retry.Max = 0 // the next read is the retry
	if l.lag, err = sarama.NewClient(k.Brokers, lagCfg); err != nil {
		return nil, fmt.Errorf("connect to Kafka at %v: %w", k.Brokers, err)
	}
	for i := 0; i < c.cfg.members; i++ {
		ccfg, err := actors.NewConsumerConfig(*k, l.settings)
		if err != nil {
			return nil, err
		}
		ccfg.ClientID = fmt.Sprintf("%s-%d", k.ClientID, i)
		g, err := newMember(k.Brokers, k.Group, ccfg)
		if err != nil {
			return nil, fmt.Errorf("join consumer group %q: %w", k.Group, err)
		}
		l.groups = append(l.groups, g)
	}
	return l, nil
}

// close closes what connect opened. A group member RunMember ran is closed
// already; closing it again only reports that it is.
func (l *links) close() {
	for _, g := range l.groups {
		_ = g.Close()
	}
	if l.probe != nil {
		_ = l.probe.Close()
	}
	if l.lag != nil {
		_ = l.lag.Close()
	}
	if l.dead != nil {
		_ = l.dead.Close()
	}
}
