package dev.krabka;

import java.util.Arrays;
import java.util.Locale;
import java.util.Properties;
import java.util.concurrent.CountDownLatch;

import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.Topology;
import org.apache.kafka.streams.kstream.Consumed;
import org.apache.kafka.streams.kstream.Grouped;
import org.apache.kafka.streams.kstream.Materialized;
import org.apache.kafka.streams.kstream.Produced;

/**
 * {@code word-count BOOTSTRAP INPUT OUTPUT APP_ID STATE_DIR}: Kafka's word-count example,
 * at-least-once: each line of INPUT split into words, re-keyed by word (a repartition topic),
 * counted in a persistent (RocksDB) store backed by a changelog topic, every new count written
 * to OUTPUT. Runs until SIGTERM, on which it closes cleanly (committing what it processed);
 * prints {"running":APP_ID} once it processes.
 */
final class WordCount {
    private WordCount() {}

    static void run(String bootstrap, String input, String output, String appId, String stateDir) {
        KafkaStreams streams = new KafkaStreams(topology(input, output), props(bootstrap, appId, stateDir));
        CountDownLatch done = StreamsCount.announceRunning(streams, appId);
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            streams.close();
            done.countDown();
        }));
        streams.start();
        try {
            done.await();
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }

    /** At-least-once (the default), commits every second, no record cache. */
    static Properties props(String bootstrap, String appId, String stateDir) {
        return StreamsProps.base(bootstrap, appId, stateDir, 1000);
    }

    static Topology topology(String input, String output) {
        StreamsBuilder builder = new StreamsBuilder();
        builder.stream(input, Consumed.with(Serdes.String(), Serdes.String()))
                .flatMapValues(line -> Arrays.asList(line.toLowerCase(Locale.ROOT).split("\\W+")))
                .filter((key, word) -> !word.isEmpty())
                .groupBy((key, word) -> word, Grouped.with("words", Serdes.String(), Serdes.String()))
                .count(Materialized.as("word-counts"))
                .toStream()
                .to(output, Produced.with(Serdes.String(), Serdes.Long()));
        return builder.build();
    }
}
