// Package actors is the listener's concurrency core: the consumer-group bridge
// (a sarama ConsumerGroupHandler), one PartitionActor per claimed partition,
// and one EvaluationActor per record attempt.
//
// Guarantees, each backed by a test:
//   - The committed offset of a partition never passes the lowest admitted
//     record that is not finished (handled, or dead-lettered and acknowledged).
//   - In-flight records are bounded per partition and per process by credits
//     the bridge must hold before it admits a record.
//   - Records with the same key run one at a time, in offset order (ordering
//     mode "key", the default).
//   - At the end of a claim the partition drains within a deadline, marks its
//     final watermark and stops; late completions are dropped, never marked.
//
// What it may import: messages, its own subpackages (ledger, ordering),
// sarama and protoactor. It never imports persistence or clients: the domain
// arrives as a Handler.
package actors
