package sluice.txn;

import java.time.Duration;
import java.util.Arrays;
import java.util.Properties;
import java.util.concurrent.CountDownLatch;

import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.errors.StreamsUncaughtExceptionHandler;
import org.apache.kafka.streams.kstream.Consumed;
import org.apache.kafka.streams.kstream.Grouped;
import org.apache.kafka.streams.kstream.Materialized;
import org.apache.kafka.streams.kstream.Produced;

/**
 * Kafka Streams word count, run as its own process until SIGTERM. Usage:
 * {@code WordCount <application id> <input topic> <output topic> <exactly_once_v2|at_least_once>
 * <state dir> <replication factor>} with $BOOTSTRAP.
 *
 * Topology: lines of space-separated words -> flatMapValues (words) -> groupBy(word) (a
 * repartition topic, which Streams purges with DeleteRecords) -> count (a state store with a
 * compacted changelog topic) -> output topic (word, count as a big-endian long).
 * Each state change is printed as {@code STATE <new>}; a stream thread that dies of an
 * exception is replaced (the broker is killed under it), the exception printed as
 * {@code THREAD-ERROR <exception>}.
 */
public final class WordCount {
    public static void main(String[] args) throws Exception {
        String appId = args[0], input = args[1], output = args[2], guarantee = args[3];
        String stateDir = args[4], rf = args[5];

        Properties p = new Properties();
        p.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, System.getenv().getOrDefault("BOOTSTRAP", "127.0.0.1:9092"));
        p.put(StreamsConfig.APPLICATION_ID_CONFIG, appId);
        p.put(StreamsConfig.PROCESSING_GUARANTEE_CONFIG, guarantee);
        p.put(StreamsConfig.STATE_DIR_CONFIG, stateDir);
        p.put(StreamsConfig.REPLICATION_FACTOR_CONFIG, rf);
        p.put(StreamsConfig.NUM_STREAM_THREADS_CONFIG, "2");
        p.put(StreamsConfig.COMMIT_INTERVAL_MS_CONFIG, "500");
        p.put(StreamsConfig.DEFAULT_KEY_SERDE_CLASS_CONFIG, Serdes.StringSerde.class.getName());
        p.put(StreamsConfig.DEFAULT_VALUE_SERDE_CLASS_CONFIG, Serdes.StringSerde.class.getName());
        // the internal topics on a cluster: as durable as the input
        p.put(StreamsConfig.topicPrefix("min.insync.replicas"), rf.equals("1") ? "1" : "2");
        p.put(StreamsConfig.consumerPrefix("session.timeout.ms"), "15000");

        StreamsBuilder b = new StreamsBuilder();
        b.stream(input, Consumed.with(Serdes.String(), Serdes.String()))
                .flatMapValues(line -> Arrays.asList(line.split(" ")))
                .groupBy((k, word) -> word, Grouped.with("words", Serdes.String(), Serdes.String()))
                .count(Materialized.as("counts"))
                .toStream()
                .to(output, Produced.with(Serdes.String(), Serdes.Long()));

        KafkaStreams streams = new KafkaStreams(b.build(), p);
        streams.setStateListener((now, before) -> {
            System.out.println("STATE " + now);
            System.out.flush();
        });
        streams.setUncaughtExceptionHandler(e -> {
            System.out.println("THREAD-ERROR " + String.valueOf(e).replace('\n', ' '));
            System.out.flush();
            return StreamsUncaughtExceptionHandler.StreamThreadExceptionResponse.REPLACE_THREAD;
        });
        CountDownLatch closed = new CountDownLatch(1);
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            streams.close(Duration.ofSeconds(30));
            System.out.println("CLOSED");
            System.out.flush();
            closed.countDown();
        }));
        streams.start();
        closed.await();
    }
}
