package dev.krabka;

import java.util.Properties;
import java.util.concurrent.CountDownLatch;

import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.Topology;
import org.apache.kafka.streams.kstream.Consumed;
import org.apache.kafka.streams.kstream.Materialized;
import org.apache.kafka.streams.kstream.Produced;
import org.apache.kafka.streams.state.Stores;

/**
 * {@code streams-count BOOTSTRAP INPUT OUTPUT APP_ID STATE_DIR}: a Kafka Streams app with
 * processing.guarantee=exactly_once_v2 that counts the records of each key of INPUT in a state
 * store (in memory, restored from its changelog) and writes every new count to OUTPUT (no
 * caching: one update per input record). Runs until killed; prints {"running":APP_ID} once
 * it processes. Under exactly-once, however often it is killed, OUTPUT read_committed holds
 * for each key exactly the counts 1, 2, ... n, in order.
 */
final class StreamsCount {
    private StreamsCount() {}

    static void run(String bootstrap, String input, String output, String appId, String stateDir) {
        KafkaStreams streams = new KafkaStreams(topology(input, output), props(bootstrap, appId, stateDir));
        CountDownLatch dead = announceRunning(streams, appId);
        streams.setUncaughtExceptionHandler(e -> {
            System.err.println("streams-count: " + ClientCheck.describe(e));
            return org.apache.kafka.streams.errors.StreamsUncaughtExceptionHandler.StreamThreadExceptionResponse
                    .SHUTDOWN_CLIENT;
        });
        streams.start();
        try {
            dead.await();
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
        streams.close();
        System.exit(1);
    }

    /**
     * Prints {"running":APP_ID} each time the app starts processing; the latch opens once it
     * stops (in error, or closed).
     */
    static CountDownLatch announceRunning(KafkaStreams streams, String appId) {
        CountDownLatch stopped = new CountDownLatch(1);
        streams.setStateListener((now, before) -> {
            if (now == KafkaStreams.State.RUNNING) {
                System.out.println("{\"running\":" + Json.str(appId) + "}");
                System.out.flush();
            }
            if (now == KafkaStreams.State.ERROR || now == KafkaStreams.State.NOT_RUNNING) {
                stopped.countDown();
            }
        });
        return stopped;
    }

    /** The app's configuration: exactly_once_v2, commits every 100 ms, no record cache. */
    static Properties props(String bootstrap, String appId, String stateDir) {
        Properties props = StreamsProps.base(bootstrap, appId, stateDir, 100);
        props.put(StreamsConfig.PROCESSING_GUARANTEE_CONFIG, StreamsConfig.EXACTLY_ONCE_V2);
        props.put(StreamsConfig.DEFAULT_KEY_SERDE_CLASS_CONFIG, Serdes.StringSerde.class.getName());
        props.put(StreamsConfig.DEFAULT_VALUE_SERDE_CLASS_CONFIG, Serdes.StringSerde.class.getName());
        return props;
    }

    /** Counts each key of INPUT in an in-memory store; every new count goes to OUTPUT. */
    static Topology topology(String input, String output) {
        StreamsBuilder builder = new StreamsBuilder();
        builder.stream(input, Consumed.with(Serdes.String(), Serdes.String()))
                .groupByKey()
                .count(Materialized.<String, Long>as(Stores.inMemoryKeyValueStore("counts"))
                        .withKeySerde(Serdes.String())
                        .withValueSerde(Serdes.Long()))
                .toStream()
                .to(output, Produced.with(Serdes.String(), Serdes.Long()));
        return builder.build();
    }
}
