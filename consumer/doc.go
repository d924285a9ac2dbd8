// Package consumer consumes a Kafka topic with a consumer group, many
// records of each partition at once, through a Handler you write:
//
//	c, err := consumer.New(consumer.Config{
//		Brokers: []string{"kafka:9092"}, Topic: "events", Group: "my-service",
//	}, consumer.HandlerFunc(func(ctx context.Context, r *consumer.Record) error {
//		return process(ctx, r.Key, r.Value)
//	}))
//	if err != nil {
//		return err
//	}
//	return c.Run(ctx) // until ctx is done; then it drains and commits
//
// What it guarantees, each proved by a test (docs/consumer.md, "Guarantees"):
//   - No skip: the group's committed offset of a partition never passes a
//     record that is not finished (handled, skipped or dead-lettered),
//     whatever order records finish in. The commit's metadata carries the
//     records finished above it, so a new owner (after a crash or a
//     rebalance) runs only what was unfinished.
//   - Nothing lost: a record that cannot be handled is written to the
//     dead-letter topic (created at start when missing) before it counts as
//     finished; one revoked or cut short at shutdown is not committed and
//     Kafka delivers it again.
//   - Key order: records with one key run one at a time, in offset order
//     (Config.Ordering "key", the default).
//   - Bounded: at most Config.InFlightPerPartition records of a partition
//     and InFlightTotal of the process are in flight, and InFlightBytes of
//     them as the handler weighs them (RecordSizer); memory does not grow
//     with the backlog.
//   - No hostage: a record failing on its own (others served just after
//     each of its failures, at the dependency it names with FailedIn, or
//     by the handler when it names none) is dead-lettered after
//     Config.MaxAttempts; a dependency down for every record is retried
//     until it recovers, dead-lettering nothing, and its waiting records
//     retry as soon as it serves again. A failure nothing can judge holds
//     its record (reported, never dead-lettered on a guess), and so does a
//     failure to connect (a refused connection or a failed dial, not one
//     that timed out, wrapped with %w) while
//     the others are served: no record's content refuses a connection.
//   - Clean handover: at a revoke or shutdown in-flight records get
//     Config.DrainTimeout, the last finished offset is committed, and the
//     partition moves on.
//
// Offsets are committed by the consumer itself and only that way: no
// setting turns committing off or hands it to the caller.
//
// It runs on IBM/sarama and protoactor-go; neither appears in this API.
// Importing it turns off rcrowley/go-metrics for the whole process
// (metrics.UseNilMetrics): sarama's meters cost CPU on every fetch and
// start a goroutine that never ends, and the consumer reads none of them.
//
// The manual, with the model, the error table, the guarantees, tuning,
// metrics, failure modes and migration guides: docs/consumer.md.
package consumer
