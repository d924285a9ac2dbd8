// Package actors is the pipeline's concurrency core: the consumer-group
// bridge (a sarama ConsumerGroupHandler), one PartitionActor per claimed
// partition, and one EvaluationActor per record attempt.
//
// It is the engine behind package consumer, which is the public API: its
// exported names serve the module's own packages (consumer, and the
// proving ground's benchmarks and tests, which drive the bridge directly)
// and may change without notice. Use package consumer.
//
// Guarantees (docs/testing.md, "What it guarantees, and the tests that
// prove it", names the test of each):
//   - The committed offset of a partition never passes the lowest admitted
//     record that is not finished (handled, skipped, or dead-lettered and
//     acknowledged).
//   - In-flight records are bounded per partition and per process by credits
//     the bridge must hold before it admits a record; every credit comes back
//     exactly once, whatever stops or dies.
//   - Records with the same key run one at a time, in offset order (ordering
//     mode "key", the default).
//   - At the end of a claim (a revoke included, even while every credit is
//     held) the partition drains within a deadline, marks its final
//     watermark and stops; the bridge then fences its marker, so nothing is
//     marked for a claim that ended.
//   - A shared outage is retried without limit; a record whose failures are
//     its own is dead-lettered within Settings.OwnFailureBound; a dead-letter
//     write that cannot succeed keeps its record unfinished and reports the
//     partition blocked.
//
// What it may import: messages, its own subpackages (ledger, ordering,
// limit), sarama and protoactor, and klauspost/compress/zstd (sarama's
// zstd codec) for an error value sarama passes on. It never imports
// persistence, clients or the inventory domain: the domain arrives as a
// Handler.
package actors
