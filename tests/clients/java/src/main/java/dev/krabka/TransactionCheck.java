package dev.krabka;

import java.time.Duration;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.ListConsumerGroupOffsetsOptions;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerGroupMetadata;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.ProducerFencedException;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

/**
 * {@code transactions BOOTSTRAP TOPIC PARTITIONS}: a transactional producer commits COUNT
 * records over every partition, aborts as many, and commits again; then a second producer with
 * the same transactional.id fences the first in the middle of a transaction (the first's
 * commit fails with ProducerFencedException) and commits its own. A read_committed consumer
 * must read exactly the committed records, in order per partition; a read_uncommitted one
 * must also see the aborted and fenced ones (they are in the log, filtered by the markers).
 * Prints {"committed":N,"aborted":M,"read_committed":N,"read_uncommitted":N+M}.
 */
final class TransactionCheck {
    private static final int COUNT = 50;

    private TransactionCheck() {}

    static String run(String bootstrap, String topic, int partitions) {
        List<String> committed = new ArrayList<>();
        List<String> aborted = new ArrayList<>();
        try (KafkaProducer<String, String> producer = producer(bootstrap)) {
            producer.initTransactions();
            committed.addAll(transaction(producer, topic, partitions, "first", true));
            aborted.addAll(transaction(producer, topic, partitions, "aborted", false));
            committed.addAll(transaction(producer, topic, partitions, "second", true));
            // The zombie: its transaction is open when a new instance starts.
            producer.beginTransaction();
            aborted.addAll(send(producer, topic, partitions, "zombie"));
            producer.flush();
            try (KafkaProducer<String, String> successor = producer(bootstrap)) {
                successor.initTransactions();
                try {
                    producer.commitTransaction();
                    throw new CheckFailed("a fenced producer committed its transaction");
                } catch (ProducerFencedException expected) {
                    // as Kafka: the newer instance fenced it
                } catch (KafkaException e) {
                    if (!(e.getCause() instanceof ProducerFencedException)) {
                        throw e;
                    }
                }
                committed.addAll(transaction(successor, topic, partitions, "successor", true));
            }
        }
        long groupOffset = offsetsInTransactions(bootstrap, topic);
        List<String> readCommitted = readAll(bootstrap, topic, partitions, "read_committed");
        List<String> readUncommitted = readAll(bootstrap, topic, partitions, "read_uncommitted");
        if (!new HashSet<>(readCommitted).equals(new HashSet<>(committed)) || readCommitted.size() != committed.size()) {
            throw new CheckFailed("read_committed read " + readCommitted.size() + " records, "
                    + committed.size() + " were committed; first read: " + readCommitted.stream().limit(5).toList());
        }
        Set<String> everything = new HashSet<>(committed);
        everything.addAll(aborted);
        if (!new HashSet<>(readUncommitted).equals(everything)) {
            throw new CheckFailed("read_uncommitted read " + readUncommitted.size() + " records, "
                    + everything.size() + " were written");
        }
        Map<String, String> summary = new LinkedHashMap<>();
        summary.put("committed", String.valueOf(committed.size()));
        summary.put("aborted", String.valueOf(aborted.size()));
        summary.put("read_committed", String.valueOf(readCommitted.size()));
        summary.put("read_uncommitted", String.valueOf(readUncommitted.size()));
        summary.put("group_offset", String.valueOf(groupOffset));
        return Json.object(summary);
    }

    /**
     * Offsets committed with sendOffsetsToTransaction (AddOffsetsToTxn, TxnOffsetCommit): 42 in a
     * committed transaction, then 99 in an aborted one; the group's committed offset, read with
     * requireStable, must be 42.
     */
    private static long offsetsInTransactions(String bootstrap, String topic) {
        TopicPartition tp = new TopicPartition(topic, 0);
        ConsumerGroupMetadata group = new ConsumerGroupMetadata("client-check-copier");
        try (KafkaProducer<String, String> producer = producer(bootstrap)) {
            producer.initTransactions();
            producer.beginTransaction();
            producer.sendOffsetsToTransaction(Map.of(tp, new OffsetAndMetadata(42)), group);
            producer.commitTransaction();
            producer.beginTransaction();
            producer.sendOffsetsToTransaction(Map.of(tp, new OffsetAndMetadata(99)), group);
            producer.abortTransaction();
        }
        Properties props = new Properties();
        props.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        try (Admin admin = Admin.create(props)) {
            ListConsumerGroupOffsetsOptions stable = new ListConsumerGroupOffsetsOptions().requireStable(true);
            OffsetAndMetadata committed = admin.listConsumerGroupOffsets("client-check-copier", stable)
                    .partitionsToOffsetAndMetadata().get().get(tp);
            if (committed == null) {
                throw new CheckFailed("no offset committed for " + tp + " by the committed transaction");
            }
            return committed.offset();
        } catch (InterruptedException | java.util.concurrent.ExecutionException e) {
            throw new CheckFailed("listing the group's offsets: " + ClientCheck.describe(e));
        }
    }

    /**
     * {@code transactions-hang BOOTSTRAP TOPIC PARTITIONS TIMEOUT_MS}: opens a transaction (with
     * transaction.timeout.ms=TIMEOUT_MS), writes to every partition, and halts the JVM without
     * ending it, as a crashed producer leaves one for the coordinator to abort.
     */
    static void hang(String bootstrap, String topic, int partitions, int timeoutMs) {
        KafkaProducer<String, String> producer = producer(bootstrap, "client-check-hanging", timeoutMs);
        openAndFlush(producer, topic, partitions, "hanging");
        Runtime.getRuntime().halt(0);
    }

    /**
     * {@code transactions-commit-on-cue BOOTSTRAP TOPIC PARTITIONS}: opens a transaction, writes
     * to every partition, prints {"flushed":COUNT} and waits for a line on stdin; then commits
     * (EndTxn is answered once the commit is prepared, before its markers are written) and
     * prints {"committed":COUNT}.
     */
    static void commitOnCue(String bootstrap, String topic, int partitions) {
        try (KafkaProducer<String, String> producer = producer(bootstrap, "client-check-on-cue", 60_000)) {
            openAndFlush(producer, topic, partitions, "flushed");
            try {
                new java.io.BufferedReader(new java.io.InputStreamReader(System.in)).readLine();
            } catch (java.io.IOException e) {
                throw new CheckFailed("reading the cue: " + e);
            }
            producer.commitTransaction();
            System.out.println("{\"committed\":" + COUNT + "}");
            System.out.flush();
        }
    }

    /**
     * Opens a transaction, writes COUNT records labelled LABEL to every partition, flushes them
     * (in the log, the transaction still open) and prints {"LABEL":COUNT}.
     */
    private static void openAndFlush(KafkaProducer<String, String> producer, String topic, int partitions,
            String label) {
        producer.initTransactions();
        producer.beginTransaction();
        send(producer, topic, partitions, label);
        producer.flush();
        System.out.println("{\"" + label + "\":" + COUNT + "}");
        System.out.flush();
    }

    private static KafkaProducer<String, String> producer(String bootstrap) {
        return producer(bootstrap, "client-check-transactions", 60_000);
    }

    private static KafkaProducer<String, String> producer(String bootstrap, String transactionalId, int timeoutMs) {
        Properties props = new Properties();
        props.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        props.put(ProducerConfig.CLIENT_ID_CONFIG, transactionalId);
        props.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, transactionalId);
        props.put(ProducerConfig.TRANSACTION_TIMEOUT_CONFIG, String.valueOf(timeoutMs));
        props.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        props.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        props.put(ProducerConfig.MAX_BLOCK_MS_CONFIG, "60000");
        return new KafkaProducer<>(props);
    }

    private static List<String> transaction(KafkaProducer<String, String> producer, String topic, int partitions,
            String label, boolean commit) {
        producer.beginTransaction();
        List<String> sent = send(producer, topic, partitions, label);
        // In the log before the end: an abort would drop what is unsent.
        producer.flush();
        if (commit) {
            producer.commitTransaction();
        } else {
            producer.abortTransaction();
        }
        return sent;
    }

    private static List<String> send(KafkaProducer<String, String> producer, String topic, int partitions,
            String label) {
        List<String> sent = new ArrayList<>();
        for (int i = 0; i < COUNT; i++) {
            String value = label + "-" + i;
            producer.send(new ProducerRecord<>(topic, i % partitions, value, value));
            sent.add(value);
        }
        return sent;
    }

    /** Every record of TOPIC up to its end offsets, at ISOLATION. */
    private static List<String> readAll(String bootstrap, String topic, int partitions, String isolation) {
        Properties props = new Properties();
        props.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        props.put(ConsumerConfig.CLIENT_ID_CONFIG, "client-check-transactions-" + isolation);
        props.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, isolation);
        props.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        props.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        List<TopicPartition> assigned = new ArrayList<>();
        for (int p = 0; p < partitions; p++) {
            assigned.add(new TopicPartition(topic, p));
        }
        List<String> read = new ArrayList<>();
        try (KafkaConsumer<String, String> consumer = new KafkaConsumer<>(props)) {
            consumer.assign(assigned);
            consumer.seekToBeginning(assigned);
            // read_committed: the end offsets are the last stable offsets.
            Map<TopicPartition, Long> end = consumer.endOffsets(assigned);
            long deadline = System.currentTimeMillis() + 60_000;
            while (assigned.stream().anyMatch(tp -> consumer.position(tp) < end.get(tp))) {
                if (System.currentTimeMillis() > deadline) {
                    throw new CheckFailed(isolation + " consumer did not reach the end offsets " + end);
                }
                for (ConsumerRecord<String, String> record : consumer.poll(Duration.ofMillis(200))) {
                    read.add(record.value());
                }
            }
        }
        return read;
    }
}
