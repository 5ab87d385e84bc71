package dev.krabka;

import java.util.Map;
import java.util.Properties;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.StringSerializer;
import org.apache.kafka.streams.KafkaStreams;

/**
 * {@code streams-bench BOOTSTRAP INPUT OUTPUT APP_ID STATE_DIR RECORDS}: the exactly-once
 * counting app of {@link StreamsCount}, timed. Writes RECORDS keyed records (1,000 keys) to
 * INPUT first, then starts the app and measures from its RUNNING state until its committed
 * input offsets (its transactions' sendOffsetsToTransaction) cover every record. Prints
 * {"records":N,"seconds":S,"records_per_second":R,"commit_latency_ms":C,"produce_latency_ms":P}
 * (the stream thread's mean commit, the producer's mean request latency), and the clients'
 * commit, fetch and produce figures to stderr.
 */
final class StreamsBench {
    private static final int KEYS = 1000;

    private StreamsBench() {}

    static String run(String bootstrap, String input, String output, String appId, String stateDir, int records)
            throws Exception {
        produce(bootstrap, input, records);
        KafkaStreams streams = new KafkaStreams(StreamsCount.topology(input, output),
                StreamsCount.props(bootstrap, appId, stateDir));
        CountDownLatch running = new CountDownLatch(1);
        streams.setStateListener((now, before) -> {
            if (now == KafkaStreams.State.RUNNING) {
                running.countDown();
            }
        });
        Properties adminProps = new Properties();
        adminProps.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        try (Admin admin = Admin.create(adminProps)) {
            streams.start();
            if (!running.await(120, TimeUnit.SECONDS)) {
                throw new CheckFailed("the app did not reach RUNNING within 120 s");
            }
            long start = System.nanoTime();
            long deadline = start + TimeUnit.SECONDS.toNanos(600);
            long committed = 0;
            while (committed < records) {
                if (System.nanoTime() > deadline) {
                    throw new CheckFailed("committed " + committed + " of " + records + " input records in 600 s");
                }
                Thread.sleep(50);
                committed = committedInput(admin, appId, input);
            }
            double seconds = (System.nanoTime() - start) / 1e9;
            report(streams);
            return String.format(java.util.Locale.ROOT,
                    "{\"records\":%d,\"seconds\":%.2f,\"records_per_second\":%d,\"commit_latency_ms\":%.2f,"
                            + "\"produce_latency_ms\":%.2f}",
                    records, seconds, Math.round(records / seconds),
                    metric(streams, "stream-thread-metrics", "commit-latency-avg"),
                    metric(streams, "producer-metrics", "request-latency-avg"));
        } finally {
            streams.close();
        }
    }

    /** Where the time went (stderr): the clients' commit, fetch and produce figures. */
    private static void report(KafkaStreams streams) {
        java.util.Set<String> wanted = java.util.Set.of("commit-latency-avg", "commit-total", "poll-latency-avg",
                "process-rate", "txn-commit-time-ns-total", "txn-begin-time-ns-total", "txn-send-offsets-time-ns-total",
                "record-retry-total", "request-latency-avg", "fetch-latency-avg", "records-per-request-avg",
                "produce-throttle-time-avg", "flush-time-ns-total");
        streams.metrics().forEach((name, metric) -> {
            if (wanted.contains(name.name()) && !name.group().contains("node")) {
                System.err.println("streams-bench metric " + name.group() + " " + name.name() + " "
                        + name.tags().getOrDefault("client-id", "") + " = " + metric.metricValue());
            }
        });
    }

    /** Metric NAME of GROUP (the first the app has), NaN when it has none. */
    private static double metric(KafkaStreams streams, String group, String name) {
        return streams.metrics().entrySet().stream()
                .filter(e -> e.getKey().group().equals(group) && e.getKey().name().equals(name))
                .map(e -> e.getValue().metricValue())
                .filter(v -> v instanceof Double)
                .mapToDouble(v -> (Double) v)
                .findFirst()
                .orElse(Double.NaN);
    }

    /** The sum of the group's committed offsets on INPUT. */
    private static long committedInput(Admin admin, String appId, String input) throws Exception {
        Map<TopicPartition, OffsetAndMetadata> offsets =
                admin.listConsumerGroupOffsets(appId).partitionsToOffsetAndMetadata().get();
        return offsets.entrySet().stream()
                .filter(e -> e.getKey().topic().equals(input) && e.getValue() != null)
                .mapToLong(e -> e.getValue().offset())
                .sum();
    }

    private static void produce(String bootstrap, String input, int records) {
        Properties props = new Properties();
        props.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        props.put(ProducerConfig.LINGER_MS_CONFIG, "5");
        props.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        props.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        try (KafkaProducer<String, String> producer = new KafkaProducer<>(props)) {
            for (int i = 0; i < records; i++) {
                producer.send(new ProducerRecord<>(input, "key-" + (i % KEYS), "v"));
            }
        }
    }
}
