package dev.krabka;

import java.util.LinkedHashMap;
import java.util.Map;
import java.util.Properties;

import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.serialization.ByteArraySerializer;

/**
 * {@code produce BOOTSTRAP TOPIC PARTITIONS COUNT CODEC}: sends the contract's COUNT records to
 * explicit partitions with a default (idempotent, acks=all) producer, compression.type=CODEC,
 * linger.ms=5, and waits for every acknowledgement.
 *
 * <p>Checks each acknowledgement: no error, the requested partition, an offset, offsets
 * strictly increasing in send order within a partition, and the CreateTime timestamp echoed
 * back. Prints {"produced":COUNT,"partitions":{"P":LAST_OFFSET,...}}.
 */
final class ProduceCheck {
    private ProduceCheck() {}

    static String run(String bootstrap, String topic, int partitions, int count, String codec) {
        Properties props = new Properties();
        props.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        props.put(ProducerConfig.CLIENT_ID_CONFIG, "client-check-produce");
        props.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        props.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        props.put(ProducerConfig.COMPRESSION_TYPE_CONFIG, codec);
        props.put(ProducerConfig.LINGER_MS_CONFIG, "5");

        Acks acks = new Acks(partitions);
        try (KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(props)) {
            for (int i = 0; i < count; i++) {
                final int idx = i;
                int p = RecordContract.partition(i, partitions);
                ProducerRecord<byte[], byte[]> rec = new ProducerRecord<>(topic, p,
                        RecordContract.timestamp(i), RecordContract.key(i), RecordContract.value(i),
                        RecordContract.headers(i));
                producer.send(rec, (md, err) -> acks.on(idx, p, md, err));
            }
            producer.flush();
        }
        return acks.summary(count);
    }

    /** Acknowledgement bookkeeping. Callbacks run on the producer's I/O thread. */
    private static final class Acks {
        private final long[] last;
        private int acked;
        private int errors;
        private String firstError;

        Acks(int partitions) {
            last = new long[partitions];
            java.util.Arrays.fill(last, -1);
        }

        synchronized void on(int i, int p, RecordMetadata md, Exception err) {
            if (err != null) {
                fail(i, p, ClientCheck.describe(err));
                return;
            }
            if (md.partition() != p) {
                fail(i, p, "acknowledged on partition " + md.partition());
            } else if (!md.hasOffset()) {
                fail(i, p, "acknowledged without an offset");
            } else if (md.offset() <= last[p]) {
                fail(i, p, "offset " + md.offset() + " not after the previous record's " + last[p]);
            } else if (md.timestamp() != RecordContract.timestamp(i)) {
                fail(i, p, "acknowledged timestamp " + md.timestamp() + ", expected CreateTime "
                        + RecordContract.timestamp(i));
            } else {
                last[p] = md.offset();
                acked++;
            }
        }

        private void fail(int i, int p, String why) {
            errors++;
            if (firstError == null) {
                firstError = "record " + i + " (partition " + p + "): " + why;
            }
        }

        synchronized String summary(int count) {
            if (errors > 0) {
                throw new CheckFailed(errors + " of " + count + " records failed; first: " + firstError);
            }
            if (acked != count) {
                throw new CheckFailed("only " + acked + " of " + count + " records were acknowledged");
            }
            Map<String, String> parts = new LinkedHashMap<>();
            for (int p = 0; p < last.length; p++) {
                if (last[p] >= 0) {
                    parts.put(Integer.toString(p), Long.toString(last[p]));
                }
            }
            Map<String, String> out = new LinkedHashMap<>();
            out.put("produced", Integer.toString(count));
            out.put("partitions", Json.object(parts));
            return Json.object(out);
        }
    }
}
