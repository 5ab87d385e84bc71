package krabka.capture;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.File;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collection;
import java.util.HashMap;
import java.util.HexFormat;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.concurrent.TimeUnit;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.AlterConfigOp;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.clients.admin.NewPartitions;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.clients.admin.RecordsToDelete;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerGroupMetadata;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.header.internals.RecordHeaders;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;

/**
 * Drives Apache Kafka's Java clients through the recording proxy: admin,
 * an idempotent producer per compression codec (records from plan.json),
 * assign/seek consumer, list offsets, transactions, classic and KIP-848
 * consumer groups, delete records, delete topics. Fails loudly if anything
 * read back differs from what was sent.
 *
 * Usage: Capture BOOTSTRAP PLAN_JSON
 */
public final class Capture {
  private static final HexFormat HEX = HexFormat.of();
  private static final Duration TIMEOUT = Duration.ofSeconds(30);

  record Planned(String topic, int partition, long timestamp, byte[] key, byte[] value, List<Map.Entry<String, byte[]>> headers) {}

  private final String bootstrap;
  private final String client;
  private final Map<String, String> codecByTopic = new java.util.LinkedHashMap<>();
  private final List<Planned> planned = new ArrayList<>();
  private final String txnTopic;

  private Capture(String bootstrap, JsonNode plan) {
    this.bootstrap = bootstrap;
    this.client = plan.get("client").asText();
    this.txnTopic = client + "-txn";
    for (JsonNode t : plan.get("topics")) {
      codecByTopic.put(t.get("topic").asText(), t.get("codec").asText());
      for (JsonNode r : t.get("records")) {
        List<Map.Entry<String, byte[]>> headers = new ArrayList<>();
        for (JsonNode h : r.get("headers")) {
          headers.add(new java.util.AbstractMap.SimpleEntry<>(h.get(0).asText(), hex(h.get(1))));
        }
        planned.add(new Planned(t.get("topic").asText(), r.get("partition").asInt(),
            r.get("timestamp").asLong(), hex(r.get("key")), hex(r.get("value")), headers));
      }
    }
  }

  private static byte[] hex(JsonNode n) {
    return n == null || n.isNull() ? null : HEX.parseHex(n.asText());
  }

  public static void main(String[] args) throws Exception {
    if (args.length != 2) {
      System.err.println("usage: Capture BOOTSTRAP PLAN_JSON");
      System.exit(2);
    }
    new Capture(args[0], new ObjectMapper().readTree(new File(args[1]))).run();
    System.out.println("capture: java client done");
  }

  private static void step(String what) {
    System.out.println("capture: " + what);
  }

  private Properties base() {
    Properties p = new Properties();
    p.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
    p.put(AdminClientConfig.CLIENT_ID_CONFIG, "krabka-corpus-" + client);
    return p;
  }

  @SuppressWarnings("removal") // ConsumerGroupMetadata(String): the simplest way to exercise TxnOffsetCommit
  private void run() throws Exception {
    Set<String> codecTopics = codecByTopic.keySet();
    try (Admin admin = Admin.create(base())) {
      step("admin: create topics");
      List<NewTopic> topics = new ArrayList<>();
      for (String t : codecTopics) {
        topics.add(new NewTopic(t, 3, (short) 1));
      }
      topics.add(new NewTopic(txnTopic, 1, (short) 1).configs(Map.of("retention.ms", "86400000")));
      admin.createTopics(topics).all().get(30, TimeUnit.SECONDS);
      step("admin: describe cluster, list and describe topics, describe configs");
      admin.describeCluster().clusterId().get();
      admin.describeCluster().nodes().get();
      admin.listTopics().names().get();
      admin.describeTopics(codecTopics).allTopicNames().get();
      admin.describeConfigs(List.of(
          new ConfigResource(ConfigResource.Type.TOPIC, txnTopic),
          new ConfigResource(ConfigResource.Type.BROKER, "1"))).all().get();
      admin.describeFeatures().featureMetadata().get();
    }

    for (String topic : codecTopics) {
      String codec = codecByTopic.get(topic);
      step("producer: idempotent, acks=all, compression.type=" + codec);
      Properties p = base();
      p.put(ProducerConfig.CLIENT_ID_CONFIG, "krabka-corpus-" + client + "-producer-" + codec);
      p.put(ProducerConfig.COMPRESSION_TYPE_CONFIG, codec);
      p.put(ProducerConfig.ACKS_CONFIG, "all");
      p.put(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, "true");
      p.put(ProducerConfig.LINGER_MS_CONFIG, "200");
      try (KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(p, new ByteArraySerializer(), new ByteArraySerializer())) {
        producer.partitionsFor(topic); // metadata first, so one produce request carries every partition
        for (Planned r : planned) {
          if (r.topic.equals(topic)) {
            RecordHeaders headers = new RecordHeaders();
            for (Map.Entry<String, byte[]> h : r.headers) {
              headers.add(h.getKey(), h.getValue());
            }
            producer.send(new ProducerRecord<>(topic, r.partition, r.timestamp, r.key, r.value, headers));
          }
        }
        producer.flush();
      }
    }

    step("transactional producer: one committed and one aborted transaction, with offsets");
    Properties tp = base();
    tp.put(ProducerConfig.CLIENT_ID_CONFIG, "krabka-corpus-" + client + "-txn");
    tp.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, "krabka-corpus-" + client + "-txn");
    try (KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(tp, new ByteArraySerializer(), new ByteArraySerializer())) {
      producer.initTransactions();
      producer.beginTransaction();
      producer.send(new ProducerRecord<>(txnTopic, 0, bytes("committed-1"), bytes("in a committed transaction")));
      producer.sendOffsetsToTransaction(
          Map.of(new TopicPartition(txnTopic, 0), new OffsetAndMetadata(0)),
          new ConsumerGroupMetadata("krabka-corpus-" + client + "-txn-group"));
      producer.commitTransaction();
      producer.beginTransaction();
      producer.send(new ProducerRecord<>(txnTopic, 0, bytes("aborted-1"), bytes("in an aborted transaction")));
      producer.flush();
      producer.abortTransaction();
      producer.beginTransaction();
      producer.send(new ProducerRecord<>(txnTopic, 0, bytes("committed-2"), bytes("in a second committed transaction")));
      producer.commitTransaction();
    }

    step("consumer: assign, seek to the start, read everything back");
    List<TopicPartition> all = new ArrayList<>();
    for (String t : codecTopics) {
      for (int i = 0; i < 3; i++) {
        all.add(new TopicPartition(t, i));
      }
    }
    Properties cp = base();
    cp.put(ConsumerConfig.CLIENT_ID_CONFIG, "krabka-corpus-" + client + "-assign");
    cp.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
    try (KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(cp, new ByteArrayDeserializer(), new ByteArrayDeserializer())) {
      consumer.assign(all);
      consumer.seekToBeginning(all);
      for (TopicPartition tpn : all) {
        consumer.seek(tpn, 0);
      }
      verify(readAll(consumer, planned.size()));
      step("list offsets: earliest, latest, by timestamp, max timestamp");
      consumer.beginningOffsets(all);
      consumer.endOffsets(all);
      Map<TopicPartition, Long> times = new HashMap<>();
      for (TopicPartition tpn : all) {
        times.put(tpn, 1_700_000_000_000L);
      }
      consumer.offsetsForTimes(times);
    }
    try (Admin admin = Admin.create(base())) {
      Map<TopicPartition, OffsetSpec> specs = new HashMap<>();
      specs.put(new TopicPartition(client + "-none", 0), OffsetSpec.maxTimestamp());
      specs.put(new TopicPartition(client + "-gzip", 0), OffsetSpec.earliest());
      admin.listOffsets(specs).all().get();
    }

    step("read_committed consumer on the transactional topic");
    Properties rc = base();
    rc.put(ConsumerConfig.CLIENT_ID_CONFIG, "krabka-corpus-" + client + "-read-committed");
    rc.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, "read_committed");
    try (KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(rc, new ByteArrayDeserializer(), new ByteArrayDeserializer())) {
      TopicPartition t0 = new TopicPartition(txnTopic, 0);
      consumer.assign(List.of(t0));
      consumer.seek(t0, 0);
      List<ConsumerRecord<byte[], byte[]>> got = readAll(consumer, 2);
      List<String> keys = got.stream().map(r -> new String(r.key(), StandardCharsets.UTF_8)).toList();
      check(keys.equals(List.of("committed-1", "committed-2")), "read_committed saw " + keys);
    }

    for (String protocol : List.of("classic", "consumer")) {
      step("consumer group: group.protocol=" + protocol + ", subscribe, commit, leave");
      Properties gp = base();
      gp.put(ConsumerConfig.CLIENT_ID_CONFIG, "krabka-corpus-" + client + "-group-" + protocol);
      gp.put(ConsumerConfig.GROUP_ID_CONFIG, "krabka-corpus-" + client + "-" + protocol);
      gp.put(ConsumerConfig.GROUP_PROTOCOL_CONFIG, protocol);
      gp.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
      gp.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
      try (KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(gp, new ByteArrayDeserializer(), new ByteArrayDeserializer())) {
        consumer.subscribe(codecTopics);
        verify(readAll(consumer, planned.size()));
        consumer.commitSync();
        consumer.committed(new java.util.HashSet<>(all));
      }
    }

    try (Admin admin = Admin.create(base())) {
      step("admin: groups, configs, partitions, log dirs, delete records, delete topics");
      admin.listGroups().all().get();
      admin.describeConsumerGroups(List.of("krabka-corpus-" + client + "-classic")).all().get();
      admin.describeConsumerGroups(List.of("krabka-corpus-" + client + "-consumer")).all().get();
      admin.listConsumerGroupOffsets("krabka-corpus-" + client + "-classic").all().get();
      admin.incrementalAlterConfigs(Map.of(
          new ConfigResource(ConfigResource.Type.TOPIC, txnTopic),
          List.of(new AlterConfigOp(new ConfigEntry("retention.ms", "3600000"), AlterConfigOp.OpType.SET)))).all().get();
      admin.createPartitions(Map.of(txnTopic, NewPartitions.increaseTo(2))).all().get();
      admin.describeLogDirs(List.of(1)).allDescriptions().get();
      admin.describeProducers(List.of(new TopicPartition(client + "-none", 0))).all().get();
      admin.listTransactions().all().get();
      admin.deleteRecords(Map.of(new TopicPartition(client + "-none", 0), RecordsToDelete.beforeOffset(1))).all().get();
      admin.deleteConsumerGroups(List.of("krabka-corpus-" + client + "-classic")).all().get();
      List<String> doomed = new ArrayList<>(codecTopics);
      doomed.add(txnTopic);
      admin.deleteTopics(doomed).all().get();
    }
  }

  private static byte[] bytes(String s) {
    return s.getBytes(StandardCharsets.UTF_8);
  }

  private static void check(boolean ok, String what) {
    if (!ok) {
      throw new IllegalStateException("capture: mismatch: " + what);
    }
  }

  private static List<ConsumerRecord<byte[], byte[]>> readAll(KafkaConsumer<byte[], byte[]> consumer, int want) {
    List<ConsumerRecord<byte[], byte[]>> got = new ArrayList<>();
    long deadline = System.nanoTime() + TIMEOUT.toNanos();
    while (got.size() < want) {
      check(System.nanoTime() < deadline, "timed out with " + got.size() + " of " + want + " records");
      consumer.poll(Duration.ofMillis(500)).forEach(got::add);
    }
    return got;
  }

  /** Every planned record came back once, in partition order, byte for byte. */
  private void verify(Collection<ConsumerRecord<byte[], byte[]>> got) {
    Map<String, List<ConsumerRecord<byte[], byte[]>>> byPartition = new HashMap<>();
    for (ConsumerRecord<byte[], byte[]> r : got) {
      byPartition.computeIfAbsent(r.topic() + "/" + r.partition(), k -> new ArrayList<>()).add(r);
    }
    Map<String, Integer> next = new HashMap<>();
    for (Planned p : planned) {
      String tp = p.topic + "/" + p.partition;
      int i = next.merge(tp, 1, Integer::sum) - 1;
      List<ConsumerRecord<byte[], byte[]>> rs = byPartition.getOrDefault(tp, List.of());
      check(i < rs.size(), tp + " is missing record " + i);
      ConsumerRecord<byte[], byte[]> r = rs.get(i);
      check(r.offset() == i, tp + " offset " + r.offset() + " != " + i);
      check(r.timestamp() == p.timestamp, tp + " timestamp");
      check(Arrays.equals(r.key(), p.key), tp + " key");
      check(Arrays.equals(r.value(), p.value), tp + " value");
      Header[] hs = r.headers().toArray();
      check(hs.length == p.headers.size(), tp + " header count");
      for (int h = 0; h < hs.length; h++) {
        check(hs[h].key().equals(p.headers.get(h).getKey()), tp + " header key");
        check(Arrays.equals(hs[h].value(), p.headers.get(h).getValue()), tp + " header value");
      }
    }
    check(got.size() == planned.size(), "read " + got.size() + " records, planned " + planned.size());
  }
}
