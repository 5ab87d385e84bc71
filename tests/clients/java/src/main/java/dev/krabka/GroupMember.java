package dev.krabka;

import java.io.FileOutputStream;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.time.Instant;
import java.time.ZoneOffset;
import java.time.format.DateTimeFormatter;
import java.util.Collection;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.TreeSet;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;

import org.apache.kafka.clients.consumer.CloseOptions;
import org.apache.kafka.clients.consumer.CommitFailedException;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRebalanceListener;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.RebalanceInProgressException;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;

/**
 * {@code group-member BOOTSTRAP TOPIC GROUP PROTOCOL OUTPUT_FILE [IDLE_EXIT_SECONDS]}: one member
 * of a consumer group (PROTOCOL {@code classic} or {@code consumer}, KIP-848).
 *
 * <p>Subscribes to TOPIC (auto.offset.reset=earliest, auto commit off) and loops: poll; append
 * {@code partition offset key} per record to OUTPUT_FILE, flush and fsync; then commitSync the
 * offsets of everything processed and not yet committed. Offsets whose commit failed (e.g. a
 * rebalance in progress) stay pending: the next commit retries them and onPartitionsRevoked
 * commits them before the partitions go, so a graceful rebalance redelivers nothing.
 * Rebalances are logged to stderr with a timestamp. Exits 0 after closing the consumer (leaving
 * the group) on SIGTERM, or when IDLE_EXIT_SECONDS passed without records after at least one
 * record; 1 on any other error. Prints {@code {"member":ID,"consumed":N}} on exit.
 */
final class GroupMember {
    private static final Duration POLL = Duration.ofMillis(200);
    /**
     * KRABKA_GROUP_COMMIT_DELAY_MS: a pause between writing a batch and committing it, to widen
     * the processed-but-uncommitted window (the scenarios kill a member inside it).
     */
    private static final long COMMIT_DELAY_MS = commitDelayMs();

    private static long commitDelayMs() {
        String s = System.getenv("KRABKA_GROUP_COMMIT_DELAY_MS");
        try {
            return s == null || s.isEmpty() ? 0 : Math.max(0, Long.parseLong(s));
        } catch (NumberFormatException e) {
            return 0;
        }
    }

    private static void sleepQuietly(long ms) {
        try {
            Thread.sleep(ms);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }

    private final String topic;
    private final String group;
    private final String protocol;
    private final String label;
    private final KafkaConsumer<byte[], byte[]> consumer;
    private final FileOutputStream out;
    /** Processed (written and synced) but not yet committed: next offset per partition. */
    private final Map<TopicPartition, OffsetAndMetadata> pending = new HashMap<>();
    private final TreeSet<Integer> owned = new TreeSet<>();
    private String memberId = "";
    private long consumed;

    private static volatile boolean stopRequested;

    private GroupMember(String bootstrap, String topic, String group, String protocol, String outFile)
            throws IOException {
        this.topic = topic;
        this.group = group;
        this.protocol = protocol;
        this.label = "group-member[java " + protocol + " pid " + ProcessHandle.current().pid() + "]";
        Properties p = new Properties();
        p.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(ConsumerConfig.GROUP_ID_CONFIG, group);
        p.put(ConsumerConfig.GROUP_PROTOCOL_CONFIG, protocol);
        p.put(ConsumerConfig.CLIENT_ID_CONFIG, "group-member-java-" + ProcessHandle.current().pid());
        p.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        p.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        p.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        p.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        if (protocol.equals("classic")) {
            // With group.protocol=consumer the broker owns both; the client rejects them.
            p.put(ConsumerConfig.SESSION_TIMEOUT_MS_CONFIG, "6000");
            p.put(ConsumerConfig.HEARTBEAT_INTERVAL_MS_CONFIG, "1000");
        }
        this.out = new FileOutputStream(outFile, true);
        this.consumer = new KafkaConsumer<>(p);
    }

    /** Runs the member; returns the exit status after printing the summary line. */
    static int main(String bootstrap, String topic, String group, String protocol, String outFile,
            Integer idleExitSeconds) {
        CountDownLatch finished = new CountDownLatch(1);
        int[] status = {1};
        // SIGTERM: ask the loop to stop, let it close the consumer (leave the group) and print
        // its summary, then end the JVM with that status (System.exit would block here).
        Thread hook = new Thread(() -> {
            stopRequested = true;
            try {
                if (!finished.await(60, TimeUnit.SECONDS)) {
                    System.err.println(ts() + " group-member: still running 60 s after SIGTERM, giving up");
                }
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
            System.out.flush();
            System.err.flush();
            Runtime.getRuntime().halt(finished.getCount() == 0 ? status[0] : 1);
        }, "group-member-shutdown");
        Runtime.getRuntime().addShutdownHook(hook);

        GroupMember m = null;
        try {
            m = new GroupMember(bootstrap, topic, group, protocol, outFile);
            m.loop(idleExitSeconds);
            m.close();
            status[0] = 0;
        } catch (Throwable e) {
            System.err.println(ts() + " group-member: FAIL: " + ClientCheck.describe(e));
            if (System.getenv("CLIENT_CHECK_TRACE") != null) {
                e.printStackTrace();
            }
            if (m != null) {
                m.closeQuietly();
            }
            status[0] = 1;
        }
        String member = m == null ? "" : m.memberId;
        long n = m == null ? 0 : m.consumed;
        Map<String, String> summary = new LinkedHashMap<>();
        summary.put("member", Json.str(member));
        summary.put("consumed", Long.toString(n));
        System.out.println(Json.object(summary));
        System.out.flush();
        finished.countDown();
        return status[0];
    }

    private void loop(Integer idleExitSeconds) throws IOException {
        consumer.subscribe(List.of(topic), new Listener());
        System.err.println(ts() + " " + label + " subscribed to " + topic + " in group " + group);
        long lastRecord = System.nanoTime();
        while (!stopRequested) {
            ConsumerRecords<byte[], byte[]> records = consumer.poll(POLL);
            rememberMemberId();
            if (records.isEmpty()) {
                if (idleExitSeconds != null && consumed > 0
                        && System.nanoTime() - lastRecord >= TimeUnit.SECONDS.toNanos(idleExitSeconds)) {
                    System.err.println(ts() + " " + label + " idle for " + idleExitSeconds + " s, exiting");
                    return;
                }
                continue;
            }
            lastRecord = System.nanoTime();
            StringBuilder lines = new StringBuilder();
            Map<TopicPartition, OffsetAndMetadata> batch = new HashMap<>();
            for (ConsumerRecord<byte[], byte[]> r : records) {
                String key = r.key() == null ? "-" : new String(r.key(), StandardCharsets.UTF_8);
                lines.append(r.partition()).append(' ').append(r.offset()).append(' ').append(key).append('\n');
                batch.put(new TopicPartition(r.topic(), r.partition()), new OffsetAndMetadata(r.offset() + 1));
            }
            out.write(lines.toString().getBytes(StandardCharsets.UTF_8));
            out.flush();
            out.getFD().sync();
            consumed += records.count();
            pending.putAll(batch);
            if (COMMIT_DELAY_MS > 0) {
                sleepQuietly(COMMIT_DELAY_MS);
            }
            // Everything pending: also retries offsets whose earlier commit failed.
            commit(new HashMap<>(pending), "batch");
        }
        System.err.println(ts() + " " + label + " stop requested (SIGTERM)");
    }

    /**
     * commitSync of offsets that are already processed. A rebalance in progress is not fatal:
     * the offsets stay pending and onPartitionsRevoked commits them.
     */
    private void commit(Map<TopicPartition, OffsetAndMetadata> offsets, String why) {
        if (offsets.isEmpty()) {
            return;
        }
        try {
            consumer.commitSync(offsets);
            offsets.forEach((tp, o) -> pending.remove(tp, o));
        } catch (RebalanceInProgressException | CommitFailedException e) {
            System.err.println(ts() + " " + label + " commit (" + why + ") of " + describe(offsets)
                    + " failed: " + ClientCheck.describe(e) + "; kept pending");
        }
    }

    private void rememberMemberId() {
        String id = consumer.groupMetadata().memberId();
        if (id != null && !id.isEmpty()) {
            memberId = id;
        }
    }

    private void close() {
        rememberMemberId();
        // close() revokes the assignment (the listener commits anything pending) and leaves.
        consumer.close(CloseOptions.timeout(Duration.ofSeconds(30)));
        System.err.println(ts() + " " + label + " closed, consumed " + consumed);
        closeOut();
    }

    private void closeQuietly() {
        try {
            consumer.close(CloseOptions.timeout(Duration.ofSeconds(5)));
        } catch (Throwable e) {
            System.err.println(ts() + " " + label + " close: " + ClientCheck.describe(e));
        }
        closeOut();
    }

    private void closeOut() {
        try {
            out.close();
        } catch (IOException e) {
            System.err.println(ts() + " " + label + " closing the output file: " + e.getMessage());
        }
    }

    private final class Listener implements ConsumerRebalanceListener {
        @Override
        public void onPartitionsRevoked(Collection<TopicPartition> partitions) {
            Map<TopicPartition, OffsetAndMetadata> toCommit = new HashMap<>();
            for (TopicPartition tp : partitions) {
                owned.remove(tp.partition());
                OffsetAndMetadata o = pending.get(tp);
                if (o != null) {
                    toCommit.put(tp, o);
                }
            }
            System.err.println(ts() + " " + label + " revoked " + numbers(partitions) + " now " + list(owned)
                    + (toCommit.isEmpty() ? "" : ", committing pending " + describe(toCommit)));
            commit(toCommit, "revoke");
            partitions.forEach(pending::remove);
        }

        @Override
        public void onPartitionsAssigned(Collection<TopicPartition> partitions) {
            partitions.forEach(tp -> owned.add(tp.partition()));
            rememberMemberId();
            System.err.println(ts() + " " + label + " assigned " + numbers(partitions) + " now " + list(owned)
                    + " member " + memberId);
        }

        @Override
        public void onPartitionsLost(Collection<TopicPartition> partitions) {
            partitions.forEach(tp -> {
                owned.remove(tp.partition());
                pending.remove(tp);
            });
            System.err.println(ts() + " " + label + " lost " + numbers(partitions) + " now " + list(owned));
        }
    }

    private static String numbers(Collection<TopicPartition> partitions) {
        TreeSet<Integer> s = new TreeSet<>();
        partitions.forEach(tp -> s.add(tp.partition()));
        return list(s);
    }

    /** "[0,1,2]", the format every group-member program logs. */
    private static String list(TreeSet<Integer> s) {
        StringBuilder b = new StringBuilder("[");
        s.forEach(p -> b.append(b.length() > 1 ? "," : "").append(p));
        return b.append(']').toString();
    }

    private static String describe(Map<TopicPartition, OffsetAndMetadata> offsets) {
        StringBuilder b = new StringBuilder("{");
        offsets.entrySet().stream()
                .sorted(Map.Entry.comparingByKey((a, c) -> Integer.compare(a.partition(), c.partition())))
                .forEach(e -> b.append(b.length() > 1 ? "," : "").append(e.getKey().partition()).append('=')
                        .append(e.getValue().offset()));
        return b.append('}').toString();
    }

    private static final DateTimeFormatter TS =
            DateTimeFormatter.ofPattern("yyyy-MM-dd'T'HH:mm:ss.SSS'Z'").withZone(ZoneOffset.UTC);

    static String ts() {
        return TS.format(Instant.now());
    }
}
