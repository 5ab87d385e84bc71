package dev.krabka;

import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.concurrent.Callable;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.Future;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.TimeUnit;
import java.util.function.Predicate;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.AlterConfigOp;
import org.apache.kafka.clients.admin.Config;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.clients.admin.CreateTopicsResult;
import org.apache.kafka.clients.admin.DescribeClusterResult;
import org.apache.kafka.clients.admin.ListOffsetsResult;
import org.apache.kafka.clients.admin.LogDirDescription;
import org.apache.kafka.clients.admin.NewPartitions;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.clients.admin.ProducerState;
import org.apache.kafka.clients.admin.RecordsToDelete;
import org.apache.kafka.clients.admin.ReplicaInfo;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.KafkaFuture;
import org.apache.kafka.common.Node;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.TopicPartitionInfo;
import org.apache.kafka.common.Uuid;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.errors.InvalidPartitionsException;
import org.apache.kafka.common.errors.InvalidReplicationFactorException;
import org.apache.kafka.common.errors.InvalidTopicException;
import org.apache.kafka.common.errors.OffsetOutOfRangeException;
import org.apache.kafka.common.errors.TopicExistsException;
import org.apache.kafka.common.errors.UnknownTopicOrPartitionException;
import org.apache.kafka.common.serialization.ByteArraySerializer;

/**
 * {@code admin BOOTSTRAP}: an Admin client scenario on a fresh topic, asserting the result of
 * each call (see ../README.md for the list). Prints {"admin":"ok","checks":N}.
 *
 * <p>Metadata written through the controller (topics, partitions, configs) reaches the broker
 * asynchronously in KRaft, so reads that follow a write are retried for up to 15 s.
 */
final class AdminCheck {
    static final Duration CALL_TIMEOUT = Duration.ofSeconds(30);
    static final Duration SETTLE_TIMEOUT = Duration.ofSeconds(15);
    static final String DEFAULT_SEGMENT_BYTES = "1073741824";
    static final String DEFAULT_RETENTION_MS = "604800000";

    private final Admin admin;
    private final String bootstrap;
    private int checks;

    private AdminCheck(Admin admin, String bootstrap) {
        this.admin = admin;
        this.bootstrap = bootstrap;
    }

    static String run(String bootstrap) throws Exception {
        Properties props = new Properties();
        props.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        props.put(AdminClientConfig.CLIENT_ID_CONFIG, "client-check-admin");
        props.put(AdminClientConfig.REQUEST_TIMEOUT_MS_CONFIG, "15000");
        props.put(AdminClientConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, "30000");
        try (Admin admin = Admin.create(props)) {
            AdminCheck c = new AdminCheck(admin, bootstrap);
            String topic = String.format("client-check-admin-%x-%04x", System.currentTimeMillis(),
                    ThreadLocalRandom.current().nextInt(0x10000));
            boolean deleted = false;
            try {
                c.scenario(topic);
                deleted = true;
            } finally {
                if (!deleted) {
                    try {
                        admin.deleteTopics(List.of(topic)).all().get(10, TimeUnit.SECONDS);
                    } catch (Exception ignored) {
                        // best-effort cleanup after a failure; the failure is what gets reported
                    }
                }
            }
            return "{\"admin\":\"ok\",\"checks\":" + c.checks + "}";
        }
    }

    private void scenario(String topic) throws Exception {
        // describeCluster
        DescribeClusterResult cluster = admin.describeCluster();
        Collection<Node> nodes = get(cluster.nodes(), "describeCluster nodes");
        check(nodes.size() == 1, "describeCluster: expected 1 node, got " + nodes);
        Node node = nodes.iterator().next();
        String clusterId = get(cluster.clusterId(), "describeCluster clusterId");
        check(clusterId != null && !clusterId.isEmpty(), "describeCluster: empty cluster id");
        Node controller = get(cluster.controller(), "describeCluster controller");
        check(controller != null && !controller.isEmpty(), "describeCluster: no controller");
        check(controller.id() == node.id(), "describeCluster: controller " + controller + " is not the node " + node);

        // createTopics, and the errors it must report
        ConfigResource topicRes = new ConfigResource(ConfigResource.Type.TOPIC, topic);
        CreateTopicsResult created = admin.createTopics(List.of(
                new NewTopic(topic, 3, (short) 1).configs(Map.of("retention.ms", "123456789"))));
        get(created.all(), "createTopics " + topic);
        checkEq(get(created.numPartitions(topic), "numPartitions"), 3, "createTopics numPartitions");
        checkEq(get(created.replicationFactor(topic), "replicationFactor"), 1, "createTopics replicationFactor");
        Uuid topicId = get(created.topicId(topic), "createTopics topicId");
        check(topicId != null && !Uuid.ZERO_UUID.equals(topicId), "createTopics: no topic id");
        ConfigEntry createdRetention = get(created.config(topic), "createTopics config").get("retention.ms");
        check(createdRetention != null && "123456789".equals(createdRetention.value()),
                "createTopics: returned config retention.ms=" + createdRetention);
        expectFailure(admin.createTopics(List.of(new NewTopic(topic, 3, (short) 1))).all(),
                TopicExistsException.class, "createTopics of an existing topic");
        expectFailure(admin.createTopics(List.of(new NewTopic("bad/name", 1, (short) 1))).all(),
                InvalidTopicException.class, "createTopics \"bad/name\"");
        String rf3 = topic + "-rf3";
        expectFailure(admin.createTopics(List.of(new NewTopic(rf3, 1, (short) 3))).all(),
                InvalidReplicationFactorException.class, "createTopics with replication factor 3 on one node");

        // listTopics
        Set<String> names = eventually("listTopics contains " + topic,
                () -> get(admin.listTopics().names(), "listTopics"), n -> n.contains(topic));
        check(names.contains(topic), "listTopics: " + topic + " missing");
        check(!names.contains(rf3) && !names.contains("bad/name"), "listTopics: a rejected topic exists: " + names);

        // describeTopics
        TopicDescription desc = describeTopic(topic, 3);
        check(!desc.isInternal(), "describeTopics: topic is internal");
        checkEq(desc.topicId(), topicId, "describeTopics topicId");
        checkPartitions(desc, 3, node);

        // describeConfigs: topic and broker
        Config tc = describeConfigs(topicRes);
        checkEntry(tc, "retention.ms", "123456789", ConfigEntry.ConfigSource.DYNAMIC_TOPIC_CONFIG);
        checkInherited(tc, "segment.bytes", DEFAULT_SEGMENT_BYTES);
        ConfigResource brokerRes = new ConfigResource(ConfigResource.Type.BROKER, Integer.toString(node.id()));
        Config bc = describeConfigs(brokerRes);
        ConfigEntry nodeId = bc.get("node.id");
        check(nodeId != null && Integer.toString(node.id()).equals(nodeId.value()),
                "describeConfigs broker " + node.id() + ": node.id=" + nodeId);

        // incrementalAlterConfigs: SET then DELETE
        get(admin.incrementalAlterConfigs(Map.of(topicRes, List.of(new AlterConfigOp(
                new ConfigEntry("retention.ms", "1000000"), AlterConfigOp.OpType.SET)))).all(),
                "incrementalAlterConfigs SET retention.ms");
        awaitEntry(topicRes, "retention.ms", "1000000", ConfigEntry.ConfigSource.DYNAMIC_TOPIC_CONFIG);
        get(admin.incrementalAlterConfigs(Map.of(topicRes, List.of(new AlterConfigOp(
                new ConfigEntry("retention.ms", ""), AlterConfigOp.OpType.DELETE)))).all(),
                "incrementalAlterConfigs DELETE retention.ms");
        Config afterDelete = eventually("retention.ms override removed", () -> describeConfigs(topicRes),
                c -> c.get("retention.ms") != null
                        && c.get("retention.ms").source() != ConfigEntry.ConfigSource.DYNAMIC_TOPIC_CONFIG);
        checkInherited(afterDelete, "retention.ms", DEFAULT_RETENTION_MS);

        // legacy alterConfigs: replaces the whole set of topic overrides
        legacyAlter(node, topicRes, Map.of("retention.ms", "2222222", "segment.ms", "3600000"));
        awaitEntry(topicRes, "retention.ms", "2222222", ConfigEntry.ConfigSource.DYNAMIC_TOPIC_CONFIG);
        Config legacy1 = describeConfigs(topicRes);
        checkEntry(legacy1, "segment.ms", "3600000", ConfigEntry.ConfigSource.DYNAMIC_TOPIC_CONFIG);
        legacyAlter(node, topicRes, Map.of("retention.ms", "3333333"));
        Config legacy2 = awaitEntry(topicRes, "retention.ms", "3333333", ConfigEntry.ConfigSource.DYNAMIC_TOPIC_CONFIG);
        ConfigEntry segMs = legacy2.get("segment.ms");
        check(segMs != null && segMs.source() != ConfigEntry.ConfigSource.DYNAMIC_TOPIC_CONFIG,
                "legacy alterConfigs without segment.ms left the override: " + segMs);

        // createPartitions
        get(admin.createPartitions(Map.of(topic, NewPartitions.increaseTo(5))).all(), "createPartitions to 5");
        checkPartitions(describeTopic(topic, 5), 5, node);
        expectFailure(admin.createPartitions(Map.of(topic, NewPartitions.increaseTo(4))).all(),
                InvalidPartitionsException.class, "createPartitions down to 4");

        // produce 10 records to partition 0; the one at offset 6 has the largest timestamp
        TopicPartition tp0 = new TopicPartition(topic, 0);
        long base = System.currentTimeMillis() - 60_000;
        long[] ts = new long[10];
        for (int k = 0; k < 10; k++) {
            ts[k] = k == 6 ? base + 5_000 : base + 100L * k;
        }
        produceTen(tp0, ts);

        // listOffsets
        checkEq(listOffset(tp0, OffsetSpec.earliest()).offset(), 0L, "listOffsets earliest");
        checkEq(listOffset(tp0, OffsetSpec.latest()).offset(), 10L, "listOffsets latest");
        ListOffsetsResult.ListOffsetsResultInfo max = listOffset(tp0, OffsetSpec.maxTimestamp());
        checkEq(max.offset(), 6L, "listOffsets maxTimestamp offset");
        checkEq(max.timestamp(), ts[6], "listOffsets maxTimestamp timestamp");
        ListOffsetsResult.ListOffsetsResultInfo at3 = listOffset(tp0, OffsetSpec.forTimestamp(ts[3]));
        checkEq(at3.offset(), 3L, "listOffsets forTimestamp(ts[3]) offset");
        checkEq(at3.timestamp(), ts[3], "listOffsets forTimestamp(ts[3]) timestamp");
        checkEq(listOffset(tp0, OffsetSpec.forTimestamp(base + 3_600_000)).offset(), -1L,
                "listOffsets forTimestamp after every record");

        // deleteRecords
        long low = get(admin.deleteRecords(Map.of(tp0, RecordsToDelete.beforeOffset(4))).lowWatermarks().get(tp0),
                "deleteRecords before 4").lowWatermark();
        checkEq(low, 4L, "deleteRecords low watermark");
        checkEq(listOffset(tp0, OffsetSpec.earliest()).offset(), 4L, "listOffsets earliest after deleteRecords");
        checkEq(listOffset(tp0, OffsetSpec.latest()).offset(), 10L, "listOffsets latest after deleteRecords");
        expectFailure(admin.deleteRecords(Map.of(tp0, RecordsToDelete.beforeOffset(11))).all(),
                OffsetOutOfRangeException.class, "deleteRecords beyond the high watermark");

        // describeLogDirs
        Map<String, LogDirDescription> dirs = get(admin.describeLogDirs(List.of(node.id())).allDescriptions(),
                "describeLogDirs").get(node.id());
        check(dirs != null && !dirs.isEmpty(), "describeLogDirs: no log dirs for node " + node.id());
        Set<Integer> seen = new HashSet<>();
        long size0 = -1;
        for (Map.Entry<String, LogDirDescription> d : dirs.entrySet()) {
            check(d.getValue().error() == null, "describeLogDirs: " + d.getKey() + " has error " + d.getValue().error());
            check(d.getValue().totalBytes().isPresent() && d.getValue().usableBytes().isPresent(),
                    "describeLogDirs: " + d.getKey() + " without total/usable bytes");
            for (Map.Entry<TopicPartition, ReplicaInfo> r : d.getValue().replicaInfos().entrySet()) {
                if (r.getKey().topic().equals(topic)) {
                    seen.add(r.getKey().partition());
                    if (r.getKey().partition() == 0) {
                        size0 = r.getValue().size();
                    }
                }
            }
        }
        checkEq(seen, Set.of(0, 1, 2, 3, 4), "describeLogDirs partitions of " + topic);
        check(size0 > 0, "describeLogDirs: partition 0 size " + size0 + ", expected > 0");

        // describeProducers
        List<ProducerState> producers = get(admin.describeProducers(List.of(tp0)).partitionResult(tp0),
                "describeProducers").activeProducers();
        checkEq(producers.size(), 1, "describeProducers: active producers on partition 0 " + producers);
        ProducerState ps = producers.get(0);
        check(ps.producerId() >= 0 && ps.producerEpoch() >= 0, "describeProducers: bad producer id/epoch " + ps);
        checkEq(ps.lastSequence(), 9, "describeProducers lastSequence");
        check(ps.lastTimestamp() >= ts[0] && ps.lastTimestamp() <= ts[6], "describeProducers lastTimestamp " + ps);
        check(ps.currentTransactionStartOffset().isEmpty(), "describeProducers: open transaction " + ps);

        // deleteTopics
        get(admin.deleteTopics(List.of(topic)).all(), "deleteTopics");
        Set<String> after = eventually("listTopics no longer contains " + topic,
                () -> get(admin.listTopics().names(), "listTopics"), n -> !n.contains(topic));
        check(!after.contains(topic), "listTopics still contains " + topic);
        eventually("describeTopics of the deleted topic fails", () -> {
            try {
                get(admin.describeTopics(List.of(topic)).allTopicNames(), "describeTopics deleted");
                return false;
            } catch (UnknownTopicOrPartitionException e) {
                return true;
            }
        }, ok -> ok);
        checks++;
        expectFailure(admin.deleteTopics(List.of(topic)).all(), UnknownTopicOrPartitionException.class,
                "deleteTopics of a deleted topic");
    }

    /** Legacy AlterConfigs: the request replaces the resource's whole set of overrides. */
    private void legacyAlter(Node node, ConfigResource res, Map<String, String> entries) throws Exception {
        LegacyAlterConfigs.alter(node, res, entries);
        checks++;
    }

    private void produceTen(TopicPartition tp, long[] ts) throws Exception {
        Properties props = new Properties();
        props.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        props.put(ProducerConfig.CLIENT_ID_CONFIG, "client-check-admin-producer");
        props.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        props.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        props.put(ProducerConfig.LINGER_MS_CONFIG, "5");
        try (KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(props)) {
            List<Future<RecordMetadata>> acks = new ArrayList<>();
            for (int k = 0; k < ts.length; k++) {
                acks.add(producer.send(new ProducerRecord<>(tp.topic(), tp.partition(), ts[k],
                        ("a-" + k).getBytes(StandardCharsets.UTF_8), ("admin " + k).getBytes(StandardCharsets.UTF_8))));
            }
            producer.flush();
            for (int k = 0; k < acks.size(); k++) {
                RecordMetadata md = acks.get(k).get(CALL_TIMEOUT.toMillis(), TimeUnit.MILLISECONDS);
                checkEq(md.offset(), (long) k, "produce to " + tp + ": offset of record " + k);
            }
        } catch (ExecutionException e) {
            throw new CheckFailed("produce to " + tp + " failed", e.getCause());
        }
    }

    private ListOffsetsResult.ListOffsetsResultInfo listOffset(TopicPartition tp, OffsetSpec spec) throws Exception {
        return get(admin.listOffsets(Map.of(tp, spec)).partitionResult(tp), "listOffsets " + tp);
    }

    private TopicDescription describeTopic(String topic, int partitions) throws Exception {
        return eventually("describeTopics " + topic + " shows " + partitions + " partitions with leaders",
                () -> get(admin.describeTopics(List.of(topic)).topicNameValues().get(topic), "describeTopics"),
                d -> d.partitions().size() == partitions
                        && d.partitions().stream().allMatch(p -> p.leader() != null && !p.leader().isEmpty()));
    }

    private void checkPartitions(TopicDescription d, int partitions, Node node) {
        checkEq(d.partitions().size(), partitions, "describeTopics partition count");
        for (int p = 0; p < partitions; p++) {
            TopicPartitionInfo info = d.partitions().get(p);
            checkEq(info.partition(), p, "describeTopics partition order");
            checkEq(info.leader().id(), node.id(), "describeTopics leader of partition " + p);
            checkEq(ids(info.replicas()), List.of(node.id()), "describeTopics replicas of partition " + p);
            checkEq(ids(info.isr()), List.of(node.id()), "describeTopics isr of partition " + p);
        }
    }

    private static List<Integer> ids(List<Node> nodes) {
        List<Integer> out = new ArrayList<>();
        for (Node n : nodes) {
            out.add(n.id());
        }
        return out;
    }

    private Config describeConfigs(ConfigResource res) throws Exception {
        Config c = get(admin.describeConfigs(List.of(res)).all(), "describeConfigs " + res).get(res);
        if (c == null) {
            throw new CheckFailed("describeConfigs " + res + ": no result");
        }
        return c;
    }

    private Config awaitEntry(ConfigResource res, String name, String value, ConfigEntry.ConfigSource source)
            throws Exception {
        Config c = eventually(res + " " + name + "=" + value, () -> describeConfigs(res),
                x -> x.get(name) != null && value.equals(x.get(name).value()));
        checkEntry(c, name, value, source);
        return c;
    }

    private void checkEntry(Config c, String name, String value, ConfigEntry.ConfigSource source) {
        ConfigEntry e = c.get(name);
        check(e != null, "describeConfigs: no " + name);
        checkEq(e.value(), value, "describeConfigs " + name + " value");
        checkEq(e.source(), source, "describeConfigs " + name + " source");
    }

    /**
     * A topic config without a topic override: Kafka's default (source DEFAULT_CONFIG, value
     * {@code kafkaDefault}), or inherited from a broker setting of the broker under test.
     */
    private void checkInherited(Config c, String name, String kafkaDefault) {
        ConfigEntry e = c.get(name);
        check(e != null, "describeConfigs: no " + name);
        check(e.source() == ConfigEntry.ConfigSource.DEFAULT_CONFIG
                        || e.source() == ConfigEntry.ConfigSource.STATIC_BROKER_CONFIG
                        || e.source() == ConfigEntry.ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG,
                "describeConfigs " + name + ": source " + e.source() + ", expected a default");
        if (e.source() == ConfigEntry.ConfigSource.DEFAULT_CONFIG) {
            checkEq(e.value(), kafkaDefault, "describeConfigs " + name + " default value");
        }
    }

    private void check(boolean ok, String what) {
        checks++;
        if (!ok) {
            throw new CheckFailed(what);
        }
    }

    private void checkEq(Object actual, Object expected, String what) {
        checks++;
        if (actual == null ? expected != null : !actual.equals(expected)) {
            throw new CheckFailed(what + ": got " + actual + ", expected " + expected);
        }
    }

    private void expectFailure(KafkaFuture<?> f, Class<? extends Throwable> want, String what) throws Exception {
        checks++;
        try {
            f.get(CALL_TIMEOUT.toMillis(), TimeUnit.MILLISECONDS);
        } catch (ExecutionException e) {
            if (want.isInstance(e.getCause())) {
                return;
            }
            throw new CheckFailed(what + ": expected " + want.getSimpleName() + ", got "
                    + ClientCheck.describe(e.getCause()), e.getCause());
        }
        throw new CheckFailed(what + ": succeeded, expected " + want.getSimpleName());
    }

    /** Waits for a future; a failure becomes the cause's own exception, labelled with what. */
    private static <T> T get(KafkaFuture<T> f, String what) throws Exception {
        try {
            return f.get(CALL_TIMEOUT.toMillis(), TimeUnit.MILLISECONDS);
        } catch (ExecutionException e) {
            Throwable cause = e.getCause();
            if (cause instanceof UnknownTopicOrPartitionException u) {
                throw u; // callers of eventually() retry on it
            }
            throw new CheckFailed(what + " failed", cause);
        }
    }

    /** Retries attempt until ok holds or SETTLE_TIMEOUT passes. */
    private <T> T eventually(String what, Callable<T> attempt, Predicate<T> ok) throws Exception {
        long deadline = System.nanoTime() + SETTLE_TIMEOUT.toNanos();
        T last = null;
        Exception lastError = null;
        while (true) {
            try {
                last = attempt.call();
                lastError = null;
                if (ok.test(last)) {
                    return last;
                }
            } catch (UnknownTopicOrPartitionException | CheckFailed e) {
                lastError = e;
            }
            if (System.nanoTime() > deadline) {
                String got = lastError != null ? ClientCheck.describe(lastError) : String.valueOf(last);
                throw new CheckFailed("not true within " + SETTLE_TIMEOUT.toSeconds() + " s: " + what
                        + "; last result: " + got);
            }
            Thread.sleep(100);
        }
    }
}
