package dev.krabka;

import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.Properties;

import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.record.TimestampType;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;

/**
 * {@code consume BOOTSTRAP TOPIC PARTITIONS COUNT}: assigns every partition (no group),
 * seeks to the beginning and polls until COUNT records arrived or 60 s passed.
 *
 * <p>Every record must be the contract's next index for its partition (key, value, headers,
 * CreateTime timestamp) at the next offset, the first one at the partition's log start offset.
 * After COUNT records it polls one more second and then compares each partition's end offset
 * with the position reached: any record beyond the COUNT expected fails. Prints
 * {"consumed":COUNT}. It waits for the COUNT records up to KRABKA_CHECK_TIMEOUT_S seconds
 * (60), as the Python and Go checks do.
 */
final class ConsumeCheck {
    static final Duration TIMEOUT = timeout(System.getenv("KRABKA_CHECK_TIMEOUT_S"));
    static final Duration EXTRA_POLL = Duration.ofSeconds(1);

    private final int partitions;
    private final int count;
    private final long[] nextIndex;
    private final long[] nextOffset;
    private final boolean[] started;
    private final long[] logStart;
    private long consumed;

    private ConsumeCheck(int partitions, int count, Map<TopicPartition, Long> beginning, List<TopicPartition> tps) {
        this.partitions = partitions;
        this.count = count;
        nextIndex = new long[partitions];
        nextOffset = new long[partitions];
        started = new boolean[partitions];
        logStart = new long[partitions];
        for (int p = 0; p < partitions; p++) {
            nextIndex[p] = p;
            Long b = beginning.get(tps.get(p));
            if (b == null) {
                throw new CheckFailed("no beginning offset for " + tps.get(p));
            }
            logStart[p] = b;
            nextOffset[p] = b;
        }
    }

    static String run(String bootstrap, String topic, int partitions, int count) {
        long deadline = System.nanoTime() + TIMEOUT.toNanos();
        Properties props = new Properties();
        props.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        props.put(ConsumerConfig.CLIENT_ID_CONFIG, "client-check-consume");
        props.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        props.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        props.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        props.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");

        List<TopicPartition> tps = new ArrayList<>();
        for (int p = 0; p < partitions; p++) {
            tps.add(new TopicPartition(topic, p));
        }
        try (KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(props)) {
            consumer.assign(tps);
            consumer.seekToBeginning(tps);
            Map<TopicPartition, Long> beginning = consumer.beginningOffsets(tps, remaining(deadline));
            ConsumeCheck check = new ConsumeCheck(partitions, count, beginning, tps);

            while (check.consumed < count) {
                Duration left = remaining(deadline);
                if (left.isZero()) {
                    throw new CheckFailed("timed out after " + TIMEOUT.toSeconds() + " s: consumed "
                            + check.consumed + " of " + count + " records; " + check.progress());
                }
                check.accept(consumer.poll(min(left, Duration.ofMillis(500))));
            }
            // Anything more is an extra (duplicate or unexpected) record.
            long extraUntil = System.nanoTime() + EXTRA_POLL.toNanos();
            while (System.nanoTime() < extraUntil) {
                check.accept(consumer.poll(Duration.ofMillis(250)));
            }
            Map<TopicPartition, Long> end = consumer.endOffsets(tps, Duration.ofSeconds(30));
            for (int p = 0; p < partitions; p++) {
                Long e = end.get(tps.get(p));
                if (e == null || e != check.nextOffset[p]) {
                    throw new CheckFailed("partition " + p + " end offset is " + e + " but the " + check.expected(p)
                            + " expected records end at offset " + check.nextOffset[p]
                            + (e != null && e > check.nextOffset[p] ? " (extra records)" : ""));
                }
            }
            return "{\"consumed\":" + check.consumed + "}";
        }
    }

    private long expected(int p) {
        return RecordContract.countFor(p, partitions, count);
    }

    private String progress() {
        StringBuilder b = new StringBuilder("per partition (got/expected):");
        for (int p = 0; p < partitions; p++) {
            long got = (nextIndex[p] - p) / partitions;
            b.append(' ').append(p).append('=').append(got).append('/').append(expected(p));
        }
        return b.toString();
    }

    private void accept(ConsumerRecords<byte[], byte[]> records) {
        for (ConsumerRecord<byte[], byte[]> r : records) {
            verify(r);
        }
    }

    private void verify(ConsumerRecord<byte[], byte[]> r) {
        int p = r.partition();
        if (p < 0 || p >= partitions) {
            throw new CheckFailed("record from unassigned partition " + p);
        }
        long i = nextIndex[p];
        String where = "partition " + p + " offset " + r.offset() + " (expected index " + i + "): ";
        if (i >= count) {
            throw new CheckFailed(where + "extra record beyond the " + expected(p)
                    + " expected in this partition (key " + RecordContract.show(r.key()) + ")");
        }
        if (r.offset() != nextOffset[p]) {
            throw new CheckFailed(where + "offset is not " + nextOffset[p]
                    + (started[p] ? " (not contiguous)" : " (the partition's log start offset)"));
        }
        if (!Arrays.equals(r.key(), RecordContract.key(i))) {
            throw new CheckFailed(where + "key " + RecordContract.show(r.key()) + ", expected "
                    + RecordContract.show(RecordContract.key(i)));
        }
        String bad = RecordContract.valueMismatch(i, r.value());
        if (bad != null) {
            throw new CheckFailed(where + bad);
        }
        Header[] h = r.headers().toArray();
        byte[] idx = Long.toString(i).getBytes(StandardCharsets.UTF_8);
        if (h.length != 2
                || !RecordContract.IDX_HEADER.equals(h[0].key()) || !Arrays.equals(idx, h[0].value())
                || !RecordContract.EMPTY_HEADER.equals(h[1].key())
                || h[1].value() == null || h[1].value().length != 0) {
            throw new CheckFailed(where + "headers " + showHeaders(h) + ", expected [idx=\"" + i + "\", h2=\"\"]");
        }
        if (r.timestampType() != TimestampType.CREATE_TIME || r.timestamp() != RecordContract.timestamp(i)) {
            throw new CheckFailed(where + "timestamp " + r.timestampType() + " " + r.timestamp()
                    + ", expected CreateTime " + RecordContract.timestamp(i));
        }
        started[p] = true;
        nextIndex[p] = i + partitions;
        nextOffset[p]++;
        consumed++;
    }

    private static String showHeaders(Header[] hs) {
        StringBuilder b = new StringBuilder("[");
        for (int k = 0; k < hs.length; k++) {
            if (k > 0) {
                b.append(", ");
            }
            b.append(hs[k].key()).append('=').append(RecordContract.show(hs[k].value()));
        }
        return b.append(']').toString();
    }

    private static Duration timeout(String seconds) {
        double s = seconds == null || seconds.isBlank() ? 60 : Double.parseDouble(seconds);
        return Duration.ofMillis((long) (s * 1000));
    }

    private static Duration remaining(long deadline) {
        long left = deadline - System.nanoTime();
        return left <= 0 ? Duration.ZERO : Duration.ofNanos(left);
    }

    private static Duration min(Duration a, Duration b) {
        return a.compareTo(b) <= 0 ? a : b;
    }
}
