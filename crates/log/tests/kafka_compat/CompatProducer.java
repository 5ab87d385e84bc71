// Produces exactly the record batches a krabka-log compatibility test asks
// for, with Apache Kafka's own Java producer (kafka-clients 4.3.1). Run as a
// single source file on the reference classpath:
//
//   tools/kafka-reference/kafka-cli crates/log/tests/kafka_compat/CompatProducer.java BOOTSTRAP TOPIC < plan
//
// The plan on stdin has one tab-separated command per line:
//
//   producer CODEC                   close the current producer (if any) and start an
//                                    idempotent one with compression.type=CODEC
//   record TS KEY VALUE [H=V|H ...]  send to partition 0 with timestamp TS; KEY "-" is
//                                    null; a header without "=" has a null value
//   flush                            flush: the records since the last flush become one
//                                    batch (linger.ms is long, batch.size large)
//
// After each flush it prints "batch FIRST LAST" with the offsets Kafka acknowledged.
// Any failure ends the program with a stack trace and a non-zero status.

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.Properties;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;

import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.header.internals.RecordHeader;
import org.apache.kafka.common.serialization.ByteArraySerializer;

public class CompatProducer {
    public static void main(String[] args) throws Exception {
        if (args.length != 2) {
            throw new IllegalArgumentException("usage: CompatProducer BOOTSTRAP TOPIC < plan");
        }
        String bootstrap = args[0];
        String topic = args[1];
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        KafkaProducer<byte[], byte[]> producer = null;
        List<Future<RecordMetadata>> pending = new ArrayList<>();
        String line;
        while ((line = in.readLine()) != null) {
            if (line.isEmpty()) {
                continue;
            }
            String[] f = line.split("\t", -1);
            switch (f[0]) {
                case "producer":
                    if (producer != null) {
                        producer.close();
                    }
                    producer = create(bootstrap, f[1]);
                    break;
                case "record":
                    long timestamp = Long.parseLong(f[1]);
                    byte[] key = f[2].equals("-") ? null : f[2].getBytes(StandardCharsets.UTF_8);
                    byte[] value = f[3].getBytes(StandardCharsets.UTF_8);
                    List<Header> headers = new ArrayList<>();
                    for (int i = 4; i < f.length; i++) {
                        int eq = f[i].indexOf('=');
                        headers.add(eq < 0
                            ? new RecordHeader(f[i], null)
                            : new RecordHeader(f[i].substring(0, eq), f[i].substring(eq + 1).getBytes(StandardCharsets.UTF_8)));
                    }
                    pending.add(producer.send(new ProducerRecord<>(topic, 0, timestamp, key, value, headers)));
                    break;
                case "flush":
                    producer.flush();
                    long first = -1;
                    long last = -1;
                    for (Future<RecordMetadata> future : pending) {
                        RecordMetadata metadata = future.get(30, TimeUnit.SECONDS);
                        if (first < 0) {
                            first = metadata.offset();
                        }
                        last = metadata.offset();
                    }
                    pending.clear();
                    System.out.println("batch " + first + " " + last);
                    break;
                default:
                    throw new IllegalArgumentException("unknown command: " + line);
            }
        }
        if (!pending.isEmpty()) {
            throw new IllegalStateException(pending.size() + " records sent but never flushed");
        }
        if (producer != null) {
            producer.close();
        }
    }

    private static KafkaProducer<byte[], byte[]> create(String bootstrap, String codec) {
        Properties props = new Properties();
        props.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        props.put(ProducerConfig.COMPRESSION_TYPE_CONFIG, codec);
        props.put(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, "true");
        props.put(ProducerConfig.ACKS_CONFIG, "all");
        // Nothing leaves before flush(), and one flush fits in one batch.
        props.put(ProducerConfig.LINGER_MS_CONFIG, "20000");
        props.put(ProducerConfig.BATCH_SIZE_CONFIG, "1048576");
        props.put(ProducerConfig.REQUEST_TIMEOUT_MS_CONFIG, "20000");
        props.put(ProducerConfig.DELIVERY_TIMEOUT_MS_CONFIG, "60000");
        props.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        props.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        return new KafkaProducer<>(props);
    }
}
