package patchflow.peer;

import io.confluent.parallelconsumer.ParallelConsumerOptions;
import io.confluent.parallelconsumer.ParallelConsumerOptions.CommitMode;
import io.confluent.parallelconsumer.ParallelConsumerOptions.ProcessingOrder;
import io.confluent.parallelconsumer.ParallelStreamProcessor;
import java.lang.management.ManagementFactory;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.atomic.AtomicLong;
import java.util.stream.Collectors;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;

/**
 * Runs one workload with Parallel Consumer and prints one JSON line: the
 * records, the seconds from the first record handled to the last offset
 * committed, and the process's CPU seconds over the same window.
 *
 * <p>Arguments: brokers topic out group mode records concurrency latencyMs
 * batchSize. Modes: results (pollAndProduce, PERIODIC_CONSUMER_ASYNCHRONOUS),
 * results-txn (pollAndProduce, PERIODIC_TRANSACTIONAL_PRODUCER), batch (poll
 * with batchSize records a call, one wait per call).
 */
public final class PeerBench {
  public static void main(String[] args) throws Exception {
    String brokers = args[0], topic = args[1], out = args[2], group = args[3], mode = args[4];
    long records = Long.parseLong(args[5]);
    int concurrency = Integer.parseInt(args[6]);
    long latency = Long.parseLong(args[7]);
    int batch = Integer.parseInt(args[8]);

    Properties cp = new Properties();
    cp.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, brokers);
    cp.put(ConsumerConfig.GROUP_ID_CONFIG, group);
    cp.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, false);
    cp.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
    cp.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, "read_committed");
    KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(cp, new ByteArrayDeserializer(), new ByteArrayDeserializer());
    Properties pp = new Properties();
    pp.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, brokers);
    pp.put(ProducerConfig.ACKS_CONFIG, "all");
    pp.put(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, true);
    pp.put(ProducerConfig.COMPRESSION_TYPE_CONFIG, "snappy");
    if (mode.equals("results-txn")) {
      pp.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, group + "-txn");
    }
    KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(pp, new ByteArraySerializer(), new ByteArraySerializer());

    var options = ParallelConsumerOptions.<byte[], byte[]>builder()
        .consumer(consumer)
        .producer(producer)
        .ordering(ProcessingOrder.KEY)
        .maxConcurrency(concurrency)
        .commitMode(mode.equals("results-txn") ? CommitMode.PERIODIC_TRANSACTIONAL_PRODUCER : CommitMode.PERIODIC_CONSUMER_ASYNCHRONOUS)
        .batchSize(mode.equals("batch") ? batch : 1)
        .build();
    ParallelStreamProcessor<byte[], byte[]> pc = ParallelStreamProcessor.createEosStreamProcessor(options);
    pc.subscribe(List.of(topic));

    var os = (com.sun.management.OperatingSystemMXBean) ManagementFactory.getOperatingSystemMXBean();
    AtomicLong first = new AtomicLong(), firstCpu = new AtomicLong(), handled = new AtomicLong();
    Runnable start = () -> {
      if (first.compareAndSet(0, System.nanoTime())) {
        firstCpu.set(os.getProcessCpuTime());
      }
    };
    byte[] value = new byte[100];
    if (mode.equals("batch")) {
      pc.poll(ctx -> {
        start.run();
        sleep(latency);
        handled.addAndGet(ctx.size());
      });
    } else {
      pc.pollAndProduce(ctx -> {
        start.run();
        sleep(latency);
        handled.incrementAndGet();
        return new ProducerRecord<>(out, ctx.key(), value);
      });
    }

    Properties ap = new Properties();
    ap.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, brokers);
    try (Admin admin = Admin.create(ap)) {
      List<TopicPartition> parts = admin.describeTopics(List.of(topic)).allTopicNames().get().get(topic).partitions().stream()
          .map(p -> new TopicPartition(topic, p.partition())).collect(Collectors.toList());
      Map<TopicPartition, OffsetSpec> latest = parts.stream().collect(Collectors.toMap(p -> p, p -> OffsetSpec.latest()));
      var ends = admin.listOffsets(latest).all().get();
      while (true) {
        Thread.sleep(20);
        if (handled.get() < records) {
          continue;
        }
        Map<TopicPartition, OffsetAndMetadata> committed = admin.listConsumerGroupOffsets(group).partitionsToOffsetAndMetadata().get();
        boolean done = true;
        for (TopicPartition p : parts) {
          OffsetAndMetadata c = committed.get(p);
          if (c == null || c.offset() < ends.get(p).offset()) {
            done = false;
          }
        }
        if (done) {
          break;
        }
      }
    }
    double seconds = (System.nanoTime() - first.get()) / 1e9;
    double cpu = (os.getProcessCpuTime() - firstCpu.get()) / 1e9;
    System.out.printf("{\"records\":%d,\"seconds\":%.6f,\"cpu_seconds\":%.6f}%n", records, seconds, cpu);
    System.out.flush();
    pc.closeDontDrainFirst();
    System.exit(0);
  }

  private static void sleep(long ms) {
    try {
      Thread.sleep(ms);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new RuntimeException(e);
    }
  }
}
