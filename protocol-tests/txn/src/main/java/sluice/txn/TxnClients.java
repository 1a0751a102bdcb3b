package sluice.txn;

import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.ProducerFencedException;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

/**
 * The Java client's transactions against the broker at $BOOTSTRAP. Usage:
 * {@code TxnClients <scenario> <topic>}; prints one line {@code OK <details>} or
 * {@code FAIL <reason>} (the Python driver turns it into the suite's PASS/FAIL line).
 *
 * <ul>
 *   <li>{@code produce-consume}: a transactional producer runs 12 transactions of 30 records
 *       over 3 partitions and aborts every third; a read_committed group consumer (subscribe)
 *       reads exactly the committed records, in send order per partition, and its position
 *       reaches the read_committed end offsets; its commitSync is what a new member sees; a
 *       read_uncommitted consumer reads every record, aborted ones included, up to the high
 *       watermark.
 *   <li>{@code zombie}: two producers with one transactional id. The first opens a transaction
 *       and writes; the second's initTransactions fences it (and aborts its transaction) and
 *       commits its own records; the first's next send/commit fails with
 *       ProducerFencedException. read_committed sees only the second's records; the first's
 *       writes after the fence are in the log not even uncommitted.
 * </ul>
 */
public final class TxnClients {
    static final String BOOTSTRAP = System.getenv().getOrDefault("BOOTSTRAP", "127.0.0.1:9092");
    static final Duration POLL = Duration.ofMillis(200);
    static final long READ_DEADLINE_MS = 60_000;

    public static void main(String[] args) {
        String scenario = args[0];
        String topic = args[1];
        String result;
        try {
            result = switch (scenario) {
                case "produce-consume" -> produceConsume(topic);
                case "zombie" -> zombie(topic);
                default -> throw new IllegalArgumentException("unknown scenario " + scenario);
            };
            System.out.println("OK " + result);
        } catch (Throwable t) {
            t.printStackTrace();
            System.out.println("FAIL " + (t.getClass().getSimpleName() + ": " + t.getMessage()).replace('\n', ' '));
        }
        System.out.flush();
        System.exit(0);
    }

    static void check(boolean cond, String what) {
        if (!cond) throw new AssertionError(what);
    }

    static void createTopic(String topic, int partitions) throws Exception {
        Properties p = new Properties();
        p.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, BOOTSTRAP);
        try (Admin admin = Admin.create(p)) {
            short rf = (short) -1; // the broker's default.replication.factor (1 node or 3)
            admin.createTopics(List.of(new NewTopic(topic, java.util.Optional.of(partitions),
                    java.util.Optional.of(rf)))).all().get(30, TimeUnit.SECONDS);
        }
    }

    static KafkaProducer<String, String> txnProducer(String txnId) {
        Properties p = new Properties();
        p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, BOOTSTRAP);
        p.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, txnId);
        p.put(ProducerConfig.LINGER_MS_CONFIG, "5");
        p.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        p.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        return new KafkaProducer<>(p);
    }

    static KafkaConsumer<String, String> consumer(String group, String isolation) {
        Properties p = new Properties();
        p.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, BOOTSTRAP);
        if (group != null) p.put(ConsumerConfig.GROUP_ID_CONFIG, group);
        p.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, isolation);
        p.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        p.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        p.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        p.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        return new KafkaConsumer<>(p);
    }

    /** Polls until the position of every assigned partition reached the consumer's end offsets
     * (the LSO for read_committed, the high watermark for read_uncommitted) and at least
     * {@code want} records arrived; returns the values per partition in offset order. */
    static Map<Integer, List<String>> readToEnd(KafkaConsumer<String, String> c, int partitions, int want) {
        Map<Integer, List<String>> got = new HashMap<>();
        int total = 0;
        long deadline = System.currentTimeMillis() + READ_DEADLINE_MS;
        while (System.currentTimeMillis() < deadline) {
            for (ConsumerRecord<String, String> r : c.poll(POLL)) {
                got.computeIfAbsent(r.partition(), k -> new ArrayList<>()).add(r.value());
                total++;
            }
            Set<TopicPartition> asg = c.assignment();
            if (total >= want && asg.size() == partitions) {
                Map<TopicPartition, Long> end = c.endOffsets(asg);
                boolean atEnd = true;
                for (TopicPartition tp : asg) atEnd &= c.position(tp) >= end.get(tp);
                if (atEnd) return got;
            }
        }
        throw new AssertionError("consumer did not reach the end offsets within " + READ_DEADLINE_MS
                + " ms (" + total + " records, want " + want + ", assignment " + c.assignment() + ")");
    }

    static String produceConsume(String topic) throws Exception {
        final int parts = 3, txns = 12, perTxn = 30;
        createTopic(topic, parts);
        Map<Integer, List<String>> committed = new HashMap<>();
        Set<String> aborted = new HashSet<>();
        try (KafkaProducer<String, String> p = txnProducer("java-pc-" + topic)) {
            p.initTransactions();
            for (int t = 0; t < txns; t++) {
                boolean abort = t % 3 == 1;
                p.beginTransaction();
                List<Future<RecordMetadata>> acks = new ArrayList<>();
                List<String> values = new ArrayList<>();
                for (int i = 0; i < perTxn; i++) {
                    String v = "t" + t + "-" + i;
                    values.add(v);
                    acks.add(p.send(new ProducerRecord<>(topic, i % parts, "k" + i, v)));
                }
                p.flush();
                for (var f : acks) f.get(30, TimeUnit.SECONDS);
                if (abort) {
                    p.abortTransaction();
                    aborted.addAll(values);
                } else {
                    p.commitTransaction();
                    for (int i = 0; i < perTxn; i++) {
                        committed.computeIfAbsent(i % parts, k -> new ArrayList<>()).add(values.get(i));
                    }
                }
            }
        }
        int nCommitted = committed.values().stream().mapToInt(List::size).sum();

        String group = "java-pc-g-" + topic;
        Map<TopicPartition, Long> positions = new HashMap<>();
        try (KafkaConsumer<String, String> c = consumer(group, "read_committed")) {
            c.subscribe(List.of(topic));
            Map<Integer, List<String>> got = readToEnd(c, parts, nCommitted);
            check(got.equals(committed), "read_committed got " + got + ", want exactly the committed "
                    + committed);
            for (TopicPartition tp : c.assignment()) positions.put(tp, c.position(tp));
            c.commitSync();
        }
        try (KafkaConsumer<String, String> c = consumer(group, "read_committed")) {
            Map<TopicPartition, OffsetAndMetadata> seen = c.committed(positions.keySet(), Duration.ofSeconds(30));
            for (var e : positions.entrySet()) {
                OffsetAndMetadata om = seen.get(e.getKey());
                check(om != null && om.offset() == e.getValue(),
                        "committed offset of " + e.getKey() + " is " + om + ", want " + e.getValue());
            }
        }
        try (KafkaConsumer<String, String> c = consumer(null, "read_uncommitted")) {
            List<TopicPartition> tps = new ArrayList<>();
            for (int i = 0; i < parts; i++) tps.add(new TopicPartition(topic, i));
            c.assign(tps);
            c.seekToBeginning(tps);
            Map<Integer, List<String>> got = readToEnd(c, parts, txns * perTxn);
            Set<String> all = new HashSet<>();
            got.values().forEach(all::addAll);
            int n = got.values().stream().mapToInt(List::size).sum();
            check(n == txns * perTxn, "read_uncommitted read " + n + " records, want " + txns * perTxn);
            check(all.containsAll(aborted), "read_uncommitted misses aborted records");
        }
        return "committed=" + nCommitted + " aborted=" + aborted.size();
    }

    static String zombie(String topic) throws Exception {
        createTopic(topic, 1);
        String txnId = "java-zombie-" + topic;
        KafkaProducer<String, String> old = txnProducer(txnId);
        String fence;
        List<String> newer = new ArrayList<>();
        try {
            old.initTransactions();
            old.beginTransaction();
            for (int i = 0; i < 5; i++) old.send(new ProducerRecord<>(topic, 0, null, "old-a" + i)).get(30, TimeUnit.SECONDS);

            try (KafkaProducer<String, String> p = txnProducer(txnId)) {
                p.initTransactions(); // fences `old` and aborts its open transaction
                p.beginTransaction();
                for (int i = 0; i < 5; i++) {
                    newer.add("new" + i);
                    p.send(new ProducerRecord<>(topic, 0, null, "new" + i));
                }
                p.commitTransaction();
            }

            // What Kafka 4.4 answers: the fenced producer's produce gets INVALID_PRODUCER_EPOCH
            // (InvalidProducerEpochException, abortable), its EndTxn PRODUCER_FENCED. Whichever
            // call sees it first, the old producer must end up with ProducerFencedException.
            List<String> seen = new ArrayList<>();
            List<Future<RecordMetadata>> acks = new ArrayList<>();
            try {
                for (int i = 0; i < 5; i++) acks.add(old.send(new ProducerRecord<>(topic, 0, null, "old-b" + i)));
            } catch (ProducerFencedException e) {
                seen.add("send: ProducerFencedException");
            }
            for (var f : acks) {
                try {
                    f.get(30, TimeUnit.SECONDS);
                    seen.add("send: acknowledged");
                } catch (ExecutionException e) {
                    seen.add("send: " + e.getCause().getClass().getSimpleName());
                }
            }
            boolean fenced = seen.contains("send: ProducerFencedException");
            if (!fenced) {
                try {
                    old.commitTransaction();
                    seen.add("commit: committed");
                } catch (ProducerFencedException e) {
                    seen.add("commit: ProducerFencedException");
                    fenced = true;
                } catch (org.apache.kafka.common.KafkaException e) {
                    seen.add("commit: " + e.getClass().getSimpleName());
                }
            }
            if (!fenced) {
                try {
                    old.abortTransaction();
                    seen.add("abort: aborted");
                } catch (ProducerFencedException e) {
                    seen.add("abort: ProducerFencedException");
                    fenced = true;
                } catch (org.apache.kafka.common.KafkaException e) {
                    seen.add("abort: " + e.getClass().getSimpleName());
                }
            }
            fence = String.join(", ", new java.util.LinkedHashSet<>(seen));
            check(fenced, "the older producer was never told PRODUCER_FENCED: " + fence);
            check(!seen.contains("send: acknowledged") && !seen.contains("commit: committed"),
                    "the fenced producer's writes were accepted: " + fence);
        } finally {
            old.close(Duration.ofSeconds(5));
        }

        TopicPartition tp = new TopicPartition(topic, 0);
        try (KafkaConsumer<String, String> c = consumer(null, "read_committed")) {
            c.assign(List.of(tp));
            c.seekToBeginning(List.of(tp));
            List<String> got = readToEnd(c, 1, newer.size()).getOrDefault(0, List.of());
            check(got.equals(newer), "read_committed got " + got + ", want only the new producer's " + newer);
        }
        try (KafkaConsumer<String, String> c = consumer(null, "read_uncommitted")) {
            c.assign(List.of(tp));
            c.seekToBeginning(List.of(tp));
            List<String> got = readToEnd(c, 1, 10).getOrDefault(0, List.of());
            check(got.stream().noneMatch(v -> v.startsWith("old-b")),
                    "writes of the fenced producer are in the log: " + got);
            check(got.size() == 10, "read_uncommitted got " + got + ", want old-a0..4 (aborted) and new0..4");
        }
        return "fenced (" + fence.replace('\n', ' ') + ")";
    }
}
