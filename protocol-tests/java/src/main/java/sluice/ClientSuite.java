package sluice;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Properties;
import java.util.Set;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicReference;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.LogTruncationException;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.TopicExistsException;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

/**
 * Java client scenarios against the broker at $BOOTSTRAP. Usage: {@code ClientSuite <scenario>
 * <topic> <records>}; prints {@code PASS java <scenario>} or {@code FAIL java <scenario>: why}.
 *
 * <ul>
 *   <li>{@code roundtrip}: produce with default producer settings (idempotent, acks=all), read
 *       everything back, check count, order and content.
 *   <li>{@code kill9}: the same while the broker is killed with SIGKILL and restarted
 *       ($BROKER_CTL kill9; $BROKER_CTL start) mid-stream; every acknowledged record must be in
 *       the topic exactly once and in order.
 *   <li>{@code min-insync-above-rf}: a topic with min.insync.replicas=2 and one replica takes
 *       acks=all and acks=1 writes (Kafka caps min.insync.replicas at the replication factor).
 *   <li>{@code offset-validation}: seeks carrying a leader epoch are validated with
 *       OffsetsForLeaderEpoch (KIP-320): a position inside the epoch is read from, one past the
 *       epoch's end raises LogTruncationException naming that end, as does an epoch the log
 *       never had (with auto.offset.reset=none).
 * </ul>
 *
 * Both read back with the group consumer: default consumer settings except
 * auto.offset.reset=earliest (a new group must start at the beginning), subscribe(), and a
 * commitSync() of the final positions, which a second member of the group must then see.
 */
public final class ClientSuite {
    static final String BOOTSTRAP = System.getenv().getOrDefault("BOOTSTRAP", "127.0.0.1:9092");

    public static void main(String[] args) throws Exception {
        String scenario = args[0];
        String topic = args[1];
        int n = Integer.parseInt(args[2]);
        try {
            switch (scenario) {
                case "roundtrip" -> roundtrip(topic, n);
                case "kill9" -> kill9(topic, n);
                case "min-insync-above-rf" -> minInsyncAboveRf(topic, n);
                case "offset-validation" -> offsetValidation(topic, n);
                default -> throw new IllegalArgumentException("unknown scenario " + scenario);
            }
            System.out.println("PASS java " + scenario);
        } catch (Throwable t) {
            t.printStackTrace();
            System.out.println("FAIL java " + scenario + ": " + oneLine(t));
        }
        System.out.flush();
        System.exit(0);
    }

    static String oneLine(Throwable t) {
        String m = t.getClass().getSimpleName() + ": " + t.getMessage();
        return m.replace('\n', ' ');
    }

    static void createTopic(String topic) throws Exception {
        Properties p = new Properties();
        p.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, BOOTSTRAP);
        try (Admin admin = Admin.create(p)) {
            admin.createTopics(List.of(new NewTopic(topic, 1, (short) 1))).all().get(30, TimeUnit.SECONDS);
        } catch (ExecutionException e) {
            if (!(e.getCause() instanceof TopicExistsException)) throw e;
        }
    }

    static void createTopic(String topic, Map<String, String> configs) throws Exception {
        Properties p = new Properties();
        p.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, BOOTSTRAP);
        try (Admin admin = Admin.create(p)) {
            NewTopic t = new NewTopic(topic, 1, (short) 1).configs(configs);
            admin.createTopics(List.of(t)).all().get(30, TimeUnit.SECONDS);
        }
    }

    /** Sends n records and waits for each acknowledgement; returns the offsets. */
    static List<Long> sendAll(KafkaProducer<String, String> prod, String topic, int n, int from)
            throws Exception {
        List<java.util.concurrent.Future<RecordMetadata>> acks = new ArrayList<>();
        for (int i = from; i < from + n; i++) {
            acks.add(prod.send(new ProducerRecord<>(topic, 0, "k" + i, value(i))));
        }
        List<Long> offsets = new ArrayList<>();
        for (var f : acks) {
            offsets.add(f.get(30, TimeUnit.SECONDS).offset());
        }
        return offsets;
    }

    static KafkaConsumer<String, String> assignedConsumer(String resetPolicy) {
        Properties p = new Properties();
        p.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, BOOTSTRAP);
        p.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        p.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        p.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, resetPolicy);
        p.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        return new KafkaConsumer<>(p);
    }

    /** Polls until `want` records came from the consumer's position (bounded: 30 s). */
    static List<ConsumerRecord<String, String>> pollFor(KafkaConsumer<String, String> c, int want) {
        List<ConsumerRecord<String, String>> out = new ArrayList<>();
        long deadline = System.currentTimeMillis() + 30_000;
        while (out.size() < want) {
            if (System.currentTimeMillis() > deadline) {
                throw new AssertionError("read " + out.size() + " of " + want + " records");
            }
            c.poll(Duration.ofMillis(200)).forEach(out::add);
        }
        return out;
    }

    static void minInsyncAboveRf(String topic, int n) throws Exception {
        createTopic(topic, Map.of("min.insync.replicas", "2"));
        List<Long> offsets = new ArrayList<>();
        try (KafkaProducer<String, String> all = producer(Map.of(ProducerConfig.ACKS_CONFIG, "all"))) {
            offsets.addAll(sendAll(all, topic, n, 0));
        }
        try (KafkaProducer<String, String> one = producer(Map.of(ProducerConfig.ACKS_CONFIG, "1"))) {
            offsets.addAll(sendAll(one, topic, n, n));
        }
        for (int i = 0; i < 2 * n; i++) {
            if (offsets.get(i) != i) throw new AssertionError("offsets " + offsets);
        }
        TopicPartition tp = new TopicPartition(topic, 0);
        try (KafkaConsumer<String, String> c = assignedConsumer("earliest")) {
            c.assign(List.of(tp));
            List<ConsumerRecord<String, String>> got = pollFor(c, 2 * n);
            for (int i = 0; i < 2 * n; i++) {
                if (!got.get(i).value().equals(value(i))) {
                    throw new AssertionError("record " + i + " is " + got.get(i).value());
                }
            }
        }
    }

    /** The LogTruncationException the next polls raise (bounded: 30 s). */
    static LogTruncationException truncation(KafkaConsumer<String, String> c) {
        long deadline = System.currentTimeMillis() + 30_000;
        while (System.currentTimeMillis() < deadline) {
            try {
                var records = c.poll(Duration.ofMillis(200));
                if (!records.isEmpty()) {
                    throw new AssertionError("records instead of a truncation: " + records.count());
                }
            } catch (LogTruncationException e) {
                return e;
            }
        }
        throw new AssertionError("no LogTruncationException");
    }

    static void offsetValidation(String topic, int n) throws Exception {
        createTopic(topic, Map.of());
        try (KafkaProducer<String, String> prod = producer(Map.of())) {
            sendAll(prod, topic, n, 0);
        }
        TopicPartition tp = new TopicPartition(topic, 0);
        try (KafkaConsumer<String, String> c = assignedConsumer("none")) {
            c.assign(List.of(tp));
            // Inside epoch 0: validated, then read.
            c.seek(tp, new OffsetAndMetadata(n / 2, Optional.of(0), ""));
            List<ConsumerRecord<String, String>> got = pollFor(c, n - n / 2);
            if (got.get(0).offset() != n / 2 || !got.get(0).leaderEpoch().equals(Optional.of(0))) {
                throw new AssertionError("first record " + got.get(0));
            }
            // Past the end of epoch 0: the log was truncated as far as the consumer can tell.
            c.seek(tp, new OffsetAndMetadata(n + 10, Optional.of(0), ""));
            LogTruncationException e = truncation(c);
            OffsetAndMetadata divergent = e.divergentOffsets().get(tp);
            if (divergent == null || divergent.offset() != n) {
                throw new AssertionError("divergent offsets " + e.divergentOffsets());
            }
            // An epoch this log never had.
            c.seek(tp, new OffsetAndMetadata(n / 2, Optional.of(7), ""));
            e = truncation(c);
            if (!e.divergentOffsets().isEmpty()) {
                throw new AssertionError("divergent offsets " + e.divergentOffsets());
            }
        }
    }

    static KafkaProducer<String, String> producer(Map<String, Object> extra) {
        Properties p = new Properties();
        p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, BOOTSTRAP);
        p.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        p.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        p.putAll(extra);
        return new KafkaProducer<>(p);
    }

    static String value(int i) {
        return String.format("record-%09d", i);
    }

    /**
     * Every record of partition 0 of `topic` (up to the end offset at the time of the call), read
     * by a consumer in group "java-suite-<topic>" that subscribes and commits what it read.
     */
    static List<ConsumerRecord<String, String>> readAll(String topic, long expectAtLeast) {
        Properties p = new Properties();
        p.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, BOOTSTRAP);
        p.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        p.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        p.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        p.put(ConsumerConfig.GROUP_ID_CONFIG, "java-suite-" + topic);
        List<ConsumerRecord<String, String>> out = new ArrayList<>();
        TopicPartition tp = new TopicPartition(topic, 0);
        long end;
        try (KafkaConsumer<String, String> c = new KafkaConsumer<>(p)) {
            c.subscribe(List.of(topic));
            end = c.endOffsets(List.of(tp), Duration.ofSeconds(30)).get(tp);
            if (end < expectAtLeast) {
                throw new AssertionError("end offset " + end + " < " + expectAtLeast);
            }
            long deadline = System.currentTimeMillis() + 90_000;
            long pos = 0;
            while (pos < end) {
                if (System.currentTimeMillis() > deadline) {
                    throw new AssertionError("timed out reading: at " + pos + " of " + end
                            + ", assignment " + c.assignment());
                }
                for (ConsumerRecord<String, String> r : c.poll(Duration.ofMillis(500))) {
                    out.add(r);
                    pos = r.offset() + 1;
                }
            }
            c.commitSync(Duration.ofSeconds(30));
        }
        // A new member of the same group starts from the committed offset.
        try (KafkaConsumer<String, String> c = new KafkaConsumer<>(p)) {
            OffsetAndMetadata committed = c.committed(Set.of(tp), Duration.ofSeconds(30)).get(tp);
            if (committed == null || committed.offset() != end) {
                throw new AssertionError("committed offset " + committed + ", want " + end);
            }
        }
        return out;
    }

    static void roundtrip(String topic, int n) throws Exception {
        createTopic(topic);
        AtomicReference<Exception> failure = new AtomicReference<>();
        long t0 = System.nanoTime();
        try (KafkaProducer<String, String> p = producer(Map.of())) {
            for (int i = 0; i < n; i++) {
                p.send(new ProducerRecord<>(topic, 0, "k" + (i % 100), value(i)), (md, e) -> {
                    if (e != null) failure.compareAndSet(null, e);
                });
            }
            p.flush();
        }
        if (failure.get() != null) throw failure.get();
        System.err.printf("produced %d in %d ms%n", n, (System.nanoTime() - t0) / 1_000_000);
        List<ConsumerRecord<String, String>> got = readAll(topic, n);
        if (got.size() != n) throw new AssertionError("read " + got.size() + " records, want " + n);
        for (int i = 0; i < n; i++) {
            ConsumerRecord<String, String> r = got.get(i);
            if (r.offset() != i || !r.value().equals(value(i)) || !r.key().equals("k" + (i % 100))) {
                throw new AssertionError("record " + i + ": offset " + r.offset() + " " + r.key() + "=" + r.value());
            }
        }
    }

    static void broker(String action) throws Exception {
        String ctl = System.getenv("BROKER_CTL");
        Process pr = new ProcessBuilder(ctl, action).inheritIO().redirectOutput(ProcessBuilder.Redirect.to(new java.io.File("/dev/null"))).start();
        if (pr.waitFor() != 0) throw new AssertionError("broker-ctl " + action + " failed");
    }

    static void kill9(String topic, int n) throws Exception {
        createTopic(topic);
        ConcurrentLinkedQueue<Integer> acked = new ConcurrentLinkedQueue<>();
        AtomicInteger failed = new AtomicInteger();
        AtomicBoolean killed = new AtomicBoolean();
        Thread killer = null;
        Map<String, Object> conf = Map.of(
                ProducerConfig.ACKS_CONFIG, "all",
                ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, "true",
                ProducerConfig.LINGER_MS_CONFIG, "5",
                ProducerConfig.BATCH_SIZE_CONFIG, "4096",
                ProducerConfig.DELIVERY_TIMEOUT_MS_CONFIG, "180000",
                ProducerConfig.REQUEST_TIMEOUT_MS_CONFIG, "10000",
                ProducerConfig.RECONNECT_BACKOFF_MAX_MS_CONFIG, "500");
        try (KafkaProducer<String, String> p = producer(conf)) {
            for (int i = 0; i < n; i++) {
                final int idx = i;
                p.send(new ProducerRecord<>(topic, 0, null, value(i)), (md, e) -> {
                    if (e == null) acked.add(idx); else failed.incrementAndGet();
                });
                if (i == n / 3 && killer == null) {
                    // Kill while requests are in flight; restart on the same data.
                    killer = new Thread(() -> {
                        try {
                            broker("kill9");
                            killed.set(true);
                            broker("start");
                        } catch (Exception e) {
                            throw new RuntimeException(e);
                        }
                    });
                    killer.start();
                }
            }
            p.flush();
        }
        killer.join();
        if (!killed.get()) throw new AssertionError("the broker was not killed");
        System.err.printf("acked %d, failed %d%n", acked.size(), failed.get());
        List<ConsumerRecord<String, String>> got = readAll(topic, acked.size());
        // Every acknowledged record exactly once, everything in send order.
        java.util.BitSet seen = new java.util.BitSet(n);
        int last = -1;
        for (ConsumerRecord<String, String> r : got) {
            int i = Integer.parseInt(r.value().substring("record-".length()));
            if (seen.get(i)) throw new AssertionError("duplicate " + r.value() + " at offset " + r.offset());
            if (i <= last) throw new AssertionError("out of order: " + r.value() + " after " + value(last));
            seen.set(i);
            last = i;
        }
        for (int i : acked) {
            if (!seen.get(i)) throw new AssertionError("acknowledged record " + value(i) + " missing");
        }
        if (acked.size() != n) throw new AssertionError((n - acked.size()) + " records were not acknowledged");
    }
}
