// Produce-and-consume workload for a Kafka-compatible broker, built on the
// Apache Kafka 4.3.1 Java clients. Written for krabka's performance harness;
// see packaging/performance/README.md ("BrokerPerformanceWorkload").
//
//   java -cp "target/perf-workload:target/kafka-4.3.1/libs/*" BrokerPerformanceWorkload \
//     bootstrap topic group records bytes records_per_second timeout_seconds [compression] [zeros|random]
//
// An idempotent producer (acks=all) sends `records` values of `bytes` bytes,
// paced to records_per_second (<= 0: as fast as possible), while a consumer in
// `group` reads the topic back. Every record carries its sequence number
// (8-byte big-endian key), a run id and a System.nanoTime() send stamp
// (headers "run" and "ns"), and CreateTime = System.currentTimeMillis() at
// send. One JSON line goes to stdout, progress to stderr; exit status 0 when
// no send failed and exactly the acknowledged records were consumed once.
// With -Dworkload.transactionMillis=N / -Dworkload.transactionRecords=M the
// producer is transactional (a commit every N ms or M records) and the
// consumer reads committed records only.

import java.nio.ByteBuffer;
import java.util.Arrays;
import java.util.Collection;
import java.util.List;
import java.util.Locale;
import java.util.Properties;
import java.util.SplittableRandom;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;
import java.util.concurrent.locks.LockSupport;

import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRebalanceListener;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.WakeupException;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.header.internals.RecordHeader;
import org.apache.kafka.common.header.internals.RecordHeaders;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;

public final class BrokerPerformanceWorkload {
    private static final int POOL_BYTES = 4 << 20;
    private static final long POOL_SEED = 0x6b7261626b61L; // fixed: "krabka"
    private static final String USAGE =
        "usage: BrokerPerformanceWorkload bootstrap topic group records bytes records_per_second"
        + " timeout_seconds [compression] [zeros|random]";

    // Run parameters.
    private final String bootstrap;
    private final String topic;
    private final String group;
    private final int records;
    private final int bytes;
    private final double rate;
    private final long timeoutNanos;
    private final String compression;
    private final boolean random;
    private final long runId = new SplittableRandom().nextLong();
    // -Dworkload.timeline=true: per-second produce latency to stderr at the end.
    // -Dworkload.idleMillis=N: once producer and consumer are connected, wait N ms
    // before the first send (the runner's idle-to-burst cell).
    private final long[] sendOffsetNs;
    // -Dworkload.transactionMillis=N and/or -Dworkload.transactionRecords=M: a
    // transactional producer that commits every N ms or every M records,
    // whichever comes first, read back with isolation.level=read_committed.
    private final long transactionNanos = TimeUnit.MILLISECONDS.toNanos(Long.getLong("workload.transactionMillis", 0L));
    private final long transactionRecords = Long.getLong("workload.transactionRecords", 0L);
    private final boolean transactional = transactionNanos > 0 || transactionRecords > 0;
    private long transactions;

    // Producer side: written by the producer's I/O thread (callbacks), read by
    // main after producer.close() (which joins that thread).
    private final long[] produceLatencyNs;
    private final byte[] status; // 0 = not sent, 1 = in flight, 2 = acked, 3 = failed
    private final AtomicLong sent = new AtomicLong();
    private final AtomicLong acked = new AtomicLong();
    private final AtomicLong failed = new AtomicLong();
    private volatile long lastAckNanos;
    private final AtomicReference<String> firstError = new AtomicReference<>();

    // Consumer side: owned by the consumer thread until it is joined.
    private final byte[] seenCount;
    private final long[] endToEndNs;
    private int endToEndCount;
    private final AtomicLong consumedUnique = new AtomicLong();
    private final AtomicLong consumedTotal = new AtomicLong();
    private long duplicates;
    private long foreign; // records of another run (or out of range) in the topic
    private volatile boolean producerDone;
    private volatile long deadlineNanos = Long.MAX_VALUE;

    private BrokerPerformanceWorkload(String[] a) {
        bootstrap = a[0];
        topic = a[1];
        group = a[2];
        records = Integer.parseInt(a[3]);
        bytes = Integer.parseInt(a[4]);
        rate = Double.parseDouble(a[5]);
        timeoutNanos = TimeUnit.SECONDS.toNanos(Long.parseLong(a[6]));
        compression = a.length > 7 ? a[7].toLowerCase(Locale.ROOT) : "lz4";
        String payload = a.length > 8 ? a[8].toLowerCase(Locale.ROOT) : "zeros";
        if (records <= 0 || bytes < 0 || timeoutNanos <= 0) {
            throw new IllegalArgumentException("records and timeout_seconds must be > 0, bytes >= 0");
        }
        if (!List.of("none", "gzip", "snappy", "lz4", "zstd").contains(compression)) {
            throw new IllegalArgumentException("compression must be none, gzip, snappy, lz4 or zstd: " + compression);
        }
        if (!payload.equals("zeros") && !payload.equals("random")) {
            throw new IllegalArgumentException("payload must be zeros or random: " + payload);
        }
        random = payload.equals("random");
        produceLatencyNs = new long[records];
        status = new byte[records];
        seenCount = new byte[records];
        endToEndNs = new long[records];
        sendOffsetNs = Boolean.getBoolean("workload.timeline") ? new long[records] : null;
    }

    public static void main(String[] args) throws Exception {
        if (args.length < 7 || args.length > 9) {
            System.err.println(USAGE);
            System.exit(2);
        }
        QuietLogging.apply();
        BrokerPerformanceWorkload w;
        try {
            w = new BrokerPerformanceWorkload(args);
        } catch (IllegalArgumentException e) {
            System.err.println(e.getMessage());
            System.err.println(USAGE);
            System.exit(2);
            return;
        }
        System.exit(w.run() ? 0 : 1);
    }

    private static void say(String msg) {
        System.err.printf(Locale.ROOT, "[workload %tT] %s%n", System.currentTimeMillis(), msg);
    }

    private boolean run() throws Exception {
        long start = System.nanoTime();
        say(String.format(Locale.ROOT, "bootstrap=%s topic=%s group=%s records=%d bytes=%d rate=%s compression=%s payload=%s run=%016x",
            bootstrap, topic, group, records, bytes, rate > 0 ? String.valueOf(rate) : "unthrottled",
            compression, random ? "random" : "zeros", runId));

        // Consumer first: wait until it owns partitions, so the end-to-end
        // latency does not include the group join.
        CountDownLatch assigned = new CountDownLatch(1);
        AtomicReference<Throwable> consumerFailure = new AtomicReference<>();
        KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(consumerProps());
        Thread consumerThread = new Thread(() -> {
            try {
                consume(consumer, assigned);
            } catch (WakeupException e) {
                // stopped by main
            } catch (Throwable t) {
                consumerFailure.set(t);
                say("consumer failed: " + t);
            } finally {
                assigned.countDown();
                say("consumer metrics: " + clientMetrics(consumer.metrics(), "consumer-fetch-manager-metrics",
                    "fetch-total", "records-per-request-avg", "fetch-size-avg", "fetch-latency-avg"));
                try {
                    consumer.close();
                } catch (Throwable ignored) {
                }
            }
        }, "workload-consumer");
        consumerThread.setDaemon(true);
        consumerThread.start();
        if (!assigned.await(timeoutNanos, TimeUnit.NANOSECONDS) || consumerFailure.get() != null) {
            say("consumer got no assignment within the timeout");
        } else {
            say(String.format(Locale.ROOT, "consumer assigned after %.2f s", (System.nanoTime() - start) / 1e9));
        }

        Thread progress = new Thread(this::reportProgress, "workload-progress");
        progress.setDaemon(true);
        progress.start();

        long produceStart = 0;
        long produceEnd;
        try (KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(producerProps())) {
            int partitions = producer.partitionsFor(topic).size();
            long idleMillis = Long.getLong("workload.idleMillis", 0L);
            if (idleMillis > 0) {
                // idle-to-burst: connections are open and the consumer is
                // long-polling; the broker sits idle before the burst starts.
                say("idle for " + idleMillis + " ms before producing");
                Thread.sleep(idleMillis);
            }
            say("topic " + topic + " has " + partitions + " partitions; producing");
            byte[] pool = payloadPool();
            SplittableRandom offsets = new SplittableRandom(POOL_SEED + 1);
            int span = pool.length - bytes + 1;
            byte[] runBytes = longBytes(runId);
            double nanosPerRecord = rate > 0 ? 1e9 / rate : 0;
            if (transactional) {
                producer.initTransactions();
            }
            produceStart = System.nanoTime();
            long transactionStart = 0;
            long inTransaction = 0;
            produceStartCpuNanos = processCpuNanos();
            deadlineNanos = produceStart + timeoutNanos;
            for (int i = 0; i < records; i++) {
                if (nanosPerRecord > 0) {
                    long due = produceStart + (long) (i * nanosPerRecord);
                    long now;
                    while ((now = System.nanoTime()) < due) {
                        LockSupport.parkNanos(due - now);
                    }
                }
                if (System.nanoTime() - deadlineNanos >= 0) {
                    say("timeout: stopped after sending " + i + " of " + records + " records");
                    break;
                }
                byte[] value;
                if (random) {
                    int off = offsets.nextInt(span);
                    value = Arrays.copyOfRange(pool, off, off + bytes);
                } else {
                    value = pool; // zeros: one shared array (the serializer does not modify it)
                }
                if (transactional && inTransaction == 0) {
                    producer.beginTransaction();
                    transactionStart = System.nanoTime();
                }
                final int seq = i;
                RecordHeaders headers = new RecordHeaders();
                headers.add(new RecordHeader("run", runBytes));
                long sendNs = System.nanoTime();
                if (sendOffsetNs != null) {
                    sendOffsetNs[seq] = sendNs - produceStart;
                }
                headers.add(new RecordHeader("ns", longBytes(sendNs)));
                status[seq] = 1;
                producer.send(new ProducerRecord<>(topic, null, System.currentTimeMillis(), longBytes(seq), value, headers),
                    (metadata, exception) -> {
                        long now = System.nanoTime();
                        if (exception == null) {
                            produceLatencyNs[seq] = now - sendNs;
                            status[seq] = 2;
                            acked.incrementAndGet();
                            lastAckNanos = now;
                        } else {
                            status[seq] = 3;
                            failed.incrementAndGet();
                            if (firstError.compareAndSet(null, exception.toString())) {
                                say("send of record " + seq + " failed: " + exception);
                            }
                        }
                    });
                sent.incrementAndGet();
                inTransaction++;
                boolean full = transactionRecords > 0 && inTransaction >= transactionRecords;
                if (transactional && (full || (transactionNanos > 0 && System.nanoTime() - transactionStart >= transactionNanos))) {
                    producer.commitTransaction();
                    transactions++;
                    inTransaction = 0;
                }
            }
            if (transactional && inTransaction > 0) {
                producer.commitTransaction();
                transactions++;
            }
            producer.flush();
            say("producer metrics: " + clientMetrics(producer.metrics(), "producer-metrics",
                "request-total", "records-per-request-avg", "batch-size-avg", "record-queue-time-avg",
                "request-latency-avg", "compression-rate-avg"));
            produceEnd = System.nanoTime();
            produceCpuNanos = processCpuNanos() - produceStartCpuNanos;
        }
        // A transaction's records count once it committed: its end is then.
        if (lastAckNanos != 0 && !transactional) {
            produceEnd = lastAckNanos;
        }
        producerDone = true; // after close(): every callback has run
        say(String.format(Locale.ROOT, "produced: sent=%d acked=%d failed=%d in %.2f s",
            sent.get(), acked.get(), failed.get(), (produceEnd - produceStart) / 1e9));

        long wait = deadlineNanos - System.nanoTime();
        consumerThread.join(Math.max(1, TimeUnit.NANOSECONDS.toMillis(wait)));
        if (consumerThread.isAlive()) {
            consumer.wakeup();
            consumerThread.join(30_000);
        }
        progress.interrupt();
        if (consumerFailure.get() != null) {
            say("consumer error: " + consumerFailure.get());
        }
        if (foreign > 0) {
            say("ignored " + foreign + " records from other runs in the topic");
        }
        if (sendOffsetNs != null) {
            timeline();
        }
        return report(produceEnd - produceStart);
    }

    // Produce latency by the second in which records were sent (stderr).
    private void timeline() {
        int seconds = 0;
        for (int i = 0; i < records; i++) {
            if (status[i] == 2) {
                seconds = Math.max(seconds, (int) (sendOffsetNs[i] / 1_000_000_000L) + 1);
            }
        }
        long[] lat = new long[records];
        for (int sec = 0; sec < seconds; sec++) {
            int n = 0;
            for (int i = 0; i < records; i++) {
                if (status[i] == 2 && sendOffsetNs[i] / 1_000_000_000L == sec) {
                    lat[n++] = produceLatencyNs[i];
                }
            }
            say("timeline second " + sec + ": records=" + n + " produce_latency_ms=" + percentiles(lat, n));
        }
    }

    private void consume(KafkaConsumer<byte[], byte[]> consumer, CountDownLatch assigned) {
        consumer.subscribe(List.of(topic), new ConsumerRebalanceListener() {
            @Override
            public void onPartitionsRevoked(Collection<TopicPartition> partitions) {
                if (!partitions.isEmpty()) {
                    say("consumer: revoked " + partitions.size() + " partitions");
                }
            }

            @Override
            public void onPartitionsAssigned(Collection<TopicPartition> partitions) {
                say("consumer: assigned " + partitions.size() + " partitions");
                if (!partitions.isEmpty()) {
                    assigned.countDown();
                }
            }
        });
        long remaining = -1; // acked-but-unseen, known once the producer is done
        // Until the producer starts (and sets deadlineNanos): the assignment
        // wait plus one produce timeout.
        long fallbackDeadline = System.nanoTime() + 2 * timeoutNanos;
        while (true) {
            long now = System.nanoTime();
            long deadline = deadlineNanos == Long.MAX_VALUE ? fallbackDeadline : deadlineNanos;
            if (now - deadline >= 0) {
                say("consumer: timeout");
                return;
            }
            ConsumerRecords<byte[], byte[]> batch = consumer.poll(java.time.Duration.ofMillis(100));
            long received = System.nanoTime();
            for (ConsumerRecord<byte[], byte[]> r : batch) {
                consumedTotal.incrementAndGet();
                Header run = r.headers().lastHeader("run");
                Header ns = r.headers().lastHeader("ns");
                byte[] key = r.key();
                if (run == null || ns == null || key == null || key.length != 8 || run.value().length != 8
                    || ByteBuffer.wrap(run.value()).getLong() != runId) {
                    foreign++;
                    continue;
                }
                long seq = ByteBuffer.wrap(key).getLong();
                if (seq < 0 || seq >= records) {
                    foreign++;
                    continue;
                }
                int s = (int) seq;
                if (seenCount[s] != 0) {
                    duplicates++;
                    if (seenCount[s] < Byte.MAX_VALUE) {
                        seenCount[s]++;
                    }
                    if (duplicates <= 5) {
                        say("duplicate: seq " + s + " at " + r.topic() + "-" + r.partition() + "@" + r.offset());
                    }
                    continue;
                }
                seenCount[s] = 1;
                consumedUnique.incrementAndGet();
                endToEndNs[endToEndCount++] = received - ByteBuffer.wrap(ns.value()).getLong();
                if (remaining > 0 && status[s] == 2) {
                    remaining--;
                }
            }
            if (remaining < 0 && producerDone) {
                remaining = 0;
                for (int i = 0; i < records; i++) {
                    if (status[i] == 2 && seenCount[i] == 0) {
                        remaining++;
                    }
                }
            }
            if (remaining == 0) {
                return;
            }
        }
    }

    private void reportProgress() {
        try {
            while (true) {
                Thread.sleep(2000);
                say(String.format(Locale.ROOT, "sent=%d acked=%d failed=%d consumed=%d",
                    sent.get(), acked.get(), failed.get(), consumedUnique.get()));
            }
        } catch (InterruptedException e) {
            // done
        }
    }

    // CPU time of this whole JVM (producer, consumer, GC, JIT), read when
    // producing starts and ends: over the produce window, the cores the
    // client used, which tells whether the client or the broker set the pace.
    private long produceStartCpuNanos;
    private long produceCpuNanos;

    // The client's own view of how the broker shaped its traffic (requests,
    // records per request, batch sizes), for stderr: a faster broker can mean
    // smaller batches and so more client work per record.
    private static String clientMetrics(java.util.Map<org.apache.kafka.common.MetricName, ? extends org.apache.kafka.common.Metric> metrics,
                                        String group, String... names) {
        StringBuilder line = new StringBuilder();
        for (String name : names) {
            for (var e : metrics.entrySet()) {
                if (e.getKey().group().equals(group) && e.getKey().name().equals(name) && e.getKey().tags().size() <= 1) {
                    line.append(name).append('=').append(e.getValue().metricValue()).append(' ');
                    break;
                }
            }
        }
        return line.toString().trim();
    }

    private static long processCpuNanos() {
        java.lang.management.OperatingSystemMXBean os = java.lang.management.ManagementFactory.getOperatingSystemMXBean();
        return os instanceof com.sun.management.OperatingSystemMXBean sun ? sun.getProcessCpuTime() : 0;
    }

    private boolean report(long produceNanos) {
        long missing = 0;
        long consumedOfFailed = 0;
        int ackedCount = 0;
        long[] produce = new long[records];
        for (int i = 0; i < records; i++) {
            if (status[i] == 2) {
                produce[ackedCount++] = produceLatencyNs[i];
                if (seenCount[i] == 0) {
                    missing++;
                    if (missing <= 5) {
                        say("missing: seq " + i);
                    }
                }
            } else if (seenCount[i] != 0) {
                consumedOfFailed++;
            }
        }
        if (consumedOfFailed > 0) {
            say(consumedOfFailed + " records whose send failed were consumed anyway");
        }
        // Records never sent (timeout) count as errors too.
        long errors = records - ackedCount;
        double seconds = produceNanos / 1e9;
        double rps = seconds > 0 ? ackedCount / seconds : 0;
        double mibps = seconds > 0 ? (double) ackedCount * bytes / (1 << 20) / seconds : 0;
        boolean ok = errors == 0 && duplicates == 0 && missing == 0;
        StringBuilder json = new StringBuilder(512);
        json.append('{')
            .append("\"records\":").append(records)
            .append(",\"bytes\":").append(bytes)
            .append(",\"compression\":\"").append(compression).append('"')
            .append(",\"payload\":\"").append(random ? "random" : "zeros").append('"')
            .append(",\"produce_seconds\":").append(fmt(seconds))
            .append(",\"transactions\":").append(transactions)
            .append(",\"transactions_per_second\":").append(fmt(seconds > 0 ? transactions / seconds : 0))
            .append(",\"records_per_second\":").append(fmt(rps))
            .append(",\"mib_per_second\":").append(fmt(mibps))
            .append(",\"produce_latency_ms\":").append(percentiles(produce, ackedCount))
            .append(",\"end_to_end_latency_ms\":").append(percentiles(endToEndNs, endToEndCount))
            .append(",\"errors\":").append(errors)
            .append(",\"duplicates\":").append(duplicates)
            .append(",\"missing\":").append(missing)
            .append(",\"consumed\":").append(consumedUnique.get())
            .append(",\"client_cpu_cores\":").append(fmt(produceNanos > 0 ? (double) produceCpuNanos / produceNanos : 0))
            .append(",\"ok\":").append(ok)
            .append('}');
        System.out.println(json);
        System.out.flush();
        return ok;
    }

    private static String percentiles(long[] nanos, int n) {
        if (n == 0) {
            return "{\"p50\":null,\"p95\":null,\"p99\":null,\"max\":null}";
        }
        Arrays.sort(nanos, 0, n);
        return "{\"p50\":" + ms(rank(nanos, n, 0.50)) + ",\"p95\":" + ms(rank(nanos, n, 0.95))
            + ",\"p99\":" + ms(rank(nanos, n, 0.99)) + ",\"max\":" + ms(nanos[n - 1]) + "}";
    }

    // Nearest-rank percentile of the sorted prefix nanos[0, n).
    private static long rank(long[] nanos, int n, double p) {
        int idx = (int) Math.ceil(p * n) - 1;
        return nanos[Math.max(0, Math.min(n - 1, idx))];
    }

    private static String ms(long nanos) {
        return fmt(nanos / 1e6);
    }

    private static String fmt(double v) {
        return String.format(Locale.ROOT, "%.3f", v);
    }

    private static byte[] longBytes(long v) {
        return ByteBuffer.allocate(8).putLong(v).array();
    }

    private byte[] payloadPool() {
        if (!random) {
            return new byte[bytes];
        }
        byte[] pool = new byte[Math.max(POOL_BYTES, bytes)];
        new SplittableRandom(POOL_SEED).nextBytes(pool);
        return pool;
    }

    private Properties producerProps() {
        Properties p = new Properties();
        p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(ProducerConfig.CLIENT_ID_CONFIG, "perf-workload-producer");
        p.put(ProducerConfig.ACKS_CONFIG, "all");
        p.put(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, "true");
        p.put(ProducerConfig.BATCH_SIZE_CONFIG, "65536");
        p.put(ProducerConfig.LINGER_MS_CONFIG, "5");
        p.put(ProducerConfig.COMPRESSION_TYPE_CONFIG, compression);
        if (transactional) {
            p.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, "perf-workload-" + Long.toHexString(runId));
        }
        p.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        p.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        return p;
    }

    private Properties consumerProps() {
        Properties p = new Properties();
        p.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(ConsumerConfig.CLIENT_ID_CONFIG, "perf-workload-consumer");
        p.put(ConsumerConfig.GROUP_ID_CONFIG, group);
        p.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        p.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        if (transactional) {
            p.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, "read_committed");
        }
        p.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        p.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        return p;
    }

    // The Kafka libs bind slf4j to Log4j 2, whose default configuration logs to
    // stdout. Route client logging to stderr at WARN (-Dworkload.loglevel=INFO
    // etc. to change) before any client class creates a logger. Kept in its own
    // class so a classpath without Log4j 2 core still runs.
    private static final class QuietLogging {
        static void apply() {
            try {
                Apply.run(System.getProperty("workload.loglevel", "WARN"));
            } catch (Throwable t) {
                System.err.println("[workload] could not configure Log4j 2 (" + t + "); client logging unchanged");
            }
        }

        private static final class Apply {
            static void run(String level) {
                org.apache.logging.log4j.core.config.builder.api.ConfigurationBuilder<
                    org.apache.logging.log4j.core.config.builder.impl.BuiltConfiguration> b =
                    org.apache.logging.log4j.core.config.builder.api.ConfigurationBuilderFactory.newConfigurationBuilder();
                b.setStatusLevel(org.apache.logging.log4j.Level.ERROR);
                b.setConfigurationName("workload");
                b.add(b.newAppender("stderr", "Console")
                    .addAttribute("target", "SYSTEM_ERR")
                    .add(b.newLayout("PatternLayout").addAttribute("pattern", "[%d{HH:mm:ss}] %p %m (%c)%n")));
                b.add(b.newRootLogger(org.apache.logging.log4j.Level.toLevel(level, org.apache.logging.log4j.Level.WARN))
                    .add(b.newAppenderRef("stderr")));
                org.apache.logging.log4j.core.config.Configurator.initialize(b.build());
            }
        }
    }
}
