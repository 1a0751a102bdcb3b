// Share group scenarios with Apache Kafka's Java client (KafkaShareConsumer, KIP-932), run as
// a single-file program: java -cp 'KAFKA_LIBS/*' ShareSuite.java <scenario> <bootstrap>.
// Each scenario prints "OK <detail>" and exits 0, or prints the reason and exits 1.
//
// A share partition starts at the log end (share.auto.offset.reset=latest) when the group
// first fetches it, so every scenario first produces "warm-up" records until a consumer has
// received one: records produced after that are all delivered.

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.time.Duration;
import java.util.*;
import java.util.concurrent.*;
import java.util.concurrent.atomic.AtomicBoolean;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AlterConfigOp;
import org.apache.kafka.clients.admin.Config;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.consumer.AcknowledgeType;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaShareConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

public class ShareSuite {
    static String bootstrap;
    static final long LIMIT_MS = 90_000;

    static void fail(String why) {
        System.out.println("FAIL " + why);
        System.out.flush();
        Runtime.getRuntime().halt(1);
    }

    static KafkaShareConsumer<String, String> consumer(String group) {
        Properties p = new Properties();
        p.put("bootstrap.servers", bootstrap);
        p.put("group.id", group);
        p.put("key.deserializer", StringDeserializer.class.getName());
        p.put("value.deserializer", StringDeserializer.class.getName());
        p.put("share.acknowledgement.mode", "explicit");
        KafkaShareConsumer<String, String> c = new KafkaShareConsumer<>(p);
        return c;
    }

    static KafkaProducer<String, String> producer() {
        Properties p = new Properties();
        p.put("bootstrap.servers", bootstrap);
        p.put("key.serializer", StringSerializer.class.getName());
        p.put("value.serializer", StringSerializer.class.getName());
        p.put("linger.ms", "5");
        return new KafkaProducer<>(p);
    }

    static void createTopic(String topic) throws Exception {
        Properties p = new Properties();
        p.put("bootstrap.servers", bootstrap);
        try (Admin a = Admin.create(p)) {
            a.createTopics(List.of(new NewTopic(topic, 1, (short) 1))).all().get(30, TimeUnit.SECONDS);
        }
    }

    static void deadline(long start, String what) {
        if (System.currentTimeMillis() - start > LIMIT_MS) fail("gave up after " + LIMIT_MS + " ms: " + what);
    }

    /** Produces warm-up records (key "warm") every 200 ms until `seen` is set. */
    static Thread warmUp(String topic, AtomicBoolean seen) {
        Thread t = new Thread(() -> {
            try (KafkaProducer<String, String> pr = producer()) {
                long start = System.currentTimeMillis();
                for (int i = 0; !seen.get() && System.currentTimeMillis() - start < LIMIT_MS; i++) {
                    pr.send(new ProducerRecord<>(topic, "warm", "w-" + i)).get();
                    Thread.sleep(200);
                }
            } catch (Exception e) {
                fail("warm-up producer: " + e);
            }
        });
        t.setDaemon(true);
        t.start();
        return t;
    }

    static void produce(String topic, List<String> values) throws Exception {
        try (KafkaProducer<String, String> pr = producer()) {
            for (String v : values) pr.send(new ProducerRecord<>(topic, "rec", v));
            pr.flush();
        }
    }

    /** prefix + 0 .. prefix + (n - 1). */
    static List<String> numbered(String prefix, int n) {
        List<String> values = new ArrayList<>();
        for (int i = 0; i < n; i++) values.add(prefix + i);
        return values;
    }

    static int index(String v) {
        return Integer.parseInt(v.substring(2));
    }

    static short count(ConsumerRecord<String, String> r) {
        return r.deliveryCount().orElse((short) -1);
    }

    /** Several consumers on one partition: distinct records, their union is everything. */
    static void distinct(String topic) throws Exception {
        createTopic(topic);
        String group = "sg-distinct-" + topic;
        int n = 3000, members = 3;
        AtomicBoolean warm = new AtomicBoolean();
        ConcurrentHashMap<String, Integer> owner = new ConcurrentHashMap<>();
        List<String> dups = Collections.synchronizedList(new ArrayList<>());
        AtomicBoolean stop = new AtomicBoolean();
        int[] perMember = new int[members];
        List<Thread> threads = new ArrayList<>();
        for (int m = 0; m < members; m++) {
            final int me = m;
            Thread t = new Thread(() -> {
                try (KafkaShareConsumer<String, String> c = consumer(group)) {
                    c.subscribe(List.of(topic));
                    while (!stop.get()) {
                        ConsumerRecords<String, String> rs = c.poll(Duration.ofMillis(500));
                        for (ConsumerRecord<String, String> r : rs) {
                            if (r.key().equals("warm")) warm.set(true);
                            else {
                                Integer prev = owner.putIfAbsent(r.value(), me);
                                if (prev != null) dups.add(r.value() + " to " + prev + " and " + me);
                                else synchronized (perMember) { perMember[me]++; }
                            }
                            c.acknowledge(r, AcknowledgeType.ACCEPT);
                        }
                        c.commitSync();
                    }
                } catch (Exception e) {
                    fail("member " + me + ": " + e);
                }
            });
            t.start();
            threads.add(t);
        }
        long start = System.currentTimeMillis();
        warmUp(topic, warm);
        while (!warm.get()) { deadline(start, "no warm-up record reached a member"); Thread.sleep(100); }
        List<String> values = new ArrayList<>();
        for (int i = 0; i < n; i++) values.add("r-" + i);
        produce(topic, values);
        while (owner.size() < n && dups.isEmpty()) {
            deadline(start, owner.size() + " of " + n + " records consumed");
            Thread.sleep(100);
        }
        stop.set(true);
        for (Thread t : threads) t.join(30_000);
        if (!dups.isEmpty()) fail("delivered twice though accepted: " + dups.subList(0, Math.min(5, dups.size())));
        System.out.println("OK " + n + " records, each once; per member " + Arrays.toString(perMember));
    }

    /** Released records come back (delivery count 2), rejected ones never do. */
    static void releaseReject(String topic) throws Exception {
        createTopic(topic);
        String group = "sg-release-" + topic;
        int n = 30;
        Map<Integer, List<Short>> seen = new TreeMap<>();
        AtomicBoolean warm = new AtomicBoolean();
        long start = System.currentTimeMillis();
        try (KafkaShareConsumer<String, String> c = consumer(group)) {
            c.subscribe(List.of(topic));
            warmUp(topic, warm);
            boolean produced = false;
            int quietPolls = 0;
            while (true) {
                deadline(start, "seen " + seen);
                ConsumerRecords<String, String> rs = c.poll(Duration.ofMillis(500));
                for (ConsumerRecord<String, String> r : rs) {
                    if (r.key().equals("warm")) { warm.set(true); c.acknowledge(r, AcknowledgeType.ACCEPT); continue; }
                    int i = index(r.value());
                    seen.computeIfAbsent(i, k -> new ArrayList<>()).add(count(r));
                    AcknowledgeType t = AcknowledgeType.ACCEPT;
                    if (count(r) == 1 && i % 3 == 0) t = AcknowledgeType.REJECT;
                    if (count(r) == 1 && i % 3 == 1) t = AcknowledgeType.RELEASE;
                    c.acknowledge(r, t);
                }
                c.commitSync();
                if (warm.get() && !produced) {
                    List<String> values = new ArrayList<>();
                    for (int i = 0; i < n; i++) values.add("r-" + i);
                    produce(topic, values);
                    produced = true;
                }
                boolean complete = produced && seen.size() == n;
                for (int i = 1; complete && i < n; i += 3) complete = seen.get(i).size() >= 2;
                if (complete && rs.isEmpty() && ++quietPolls >= 4) break;
            }
        }
        for (var e : seen.entrySet()) {
            int i = e.getKey();
            List<Short> want = i % 3 == 1 ? List.of((short) 1, (short) 2) : List.of((short) 1);
            if (!e.getValue().equals(want)) fail("record r-" + i + " delivered with counts " + e.getValue() + ", expected " + want);
        }
        System.out.println("OK released came back once with delivery count 2, rejected and accepted never");
    }

    /** A record released every time is delivered group.share.delivery.count.limit times. */
    static void deliveryLimit(String topic, int limit) throws Exception {
        createTopic(topic);
        String group = "sg-limit-" + topic;
        List<Short> counts = new ArrayList<>();
        AtomicBoolean warm = new AtomicBoolean();
        long start = System.currentTimeMillis();
        boolean sentinel = false;
        try (KafkaShareConsumer<String, String> c = consumer(group)) {
            c.subscribe(List.of(topic));
            warmUp(topic, warm);
            boolean produced = false, producedSentinel = false;
            int quietPolls = 0;
            while (true) {
                deadline(start, "counts " + counts);
                ConsumerRecords<String, String> rs = c.poll(Duration.ofMillis(500));
                for (ConsumerRecord<String, String> r : rs) {
                    if (r.key().equals("warm")) { warm.set(true); c.acknowledge(r, AcknowledgeType.ACCEPT); continue; }
                    if (r.value().equals("r-1")) { sentinel = true; c.acknowledge(r, AcknowledgeType.ACCEPT); continue; }
                    counts.add(count(r));
                    c.acknowledge(r, AcknowledgeType.RELEASE);
                }
                c.commitSync();
                if (warm.get() && !produced) { produce(topic, List.of("r-0")); produced = true; }
                if (counts.size() >= limit && !producedSentinel) { produce(topic, List.of("r-1")); producedSentinel = true; }
                if (sentinel && rs.isEmpty() && ++quietPolls >= 4) break;
            }
        }
        List<Short> want = new ArrayList<>();
        for (short i = 1; i <= limit; i++) want.add(i);
        if (!counts.equals(want)) fail("released record delivered with counts " + counts + ", expected " + want);
        System.out.println("OK delivered " + limit + " times, then archived");
    }

    /** Child side of kill9: holds whatever it gets, never acknowledges, waits to be killed. */
    static void hold(String topic, String group) throws Exception {
        KafkaShareConsumer<String, String> c = consumer(group);
        c.subscribe(List.of(topic));
        long start = System.currentTimeMillis();
        while (true) {
            deadline(start, "the holder got nothing");
            ConsumerRecords<String, String> rs = c.poll(Duration.ofMillis(500));
            if (rs.isEmpty()) continue;
            StringBuilder sb = new StringBuilder("HELD");
            for (ConsumerRecord<String, String> r : rs) sb.append(' ').append(r.offset());
            System.out.println(sb);
            System.out.flush();
            Thread.sleep(LIMIT_MS);
            Runtime.getRuntime().halt(2);
        }
    }

    /** Joins, accepts records until one reached it (warm-ups produced meanwhile), leaves. */
    static void drain(String topic, String group) throws Exception {
        createTopic(topic);
        AtomicBoolean got = new AtomicBoolean();
        long start = System.currentTimeMillis();
        try (KafkaShareConsumer<String, String> c = consumer(group)) {
            c.subscribe(List.of(topic));
            warmUp(topic, got);
            while (!got.get()) {
                deadline(start, "nothing reached the consumer");
                for (ConsumerRecord<String, String> r : c.poll(Duration.ofMillis(500))) {
                    got.set(true);
                    c.acknowledge(r, AcknowledgeType.ACCEPT);
                }
                c.commitSync();
            }
        }
        System.out.println("OK drained");
    }

    /** Before a restart: everything produced is accepted (warm-ups, then n records). */
    static void beforeRestart(String topic, String group, int n) throws Exception {
        createTopic(topic);
        AtomicBoolean warm = new AtomicBoolean();
        Set<String> got = new HashSet<>();
        long start = System.currentTimeMillis();
        try (KafkaShareConsumer<String, String> c = consumer(group)) {
            c.subscribe(List.of(topic));
            Thread warming = warmUp(topic, warm);
            boolean produced = false;
            while (got.size() < n) {
                deadline(start, got.size() + " of " + n + " records before the restart");
                for (ConsumerRecord<String, String> r : c.poll(Duration.ofMillis(500))) {
                    if (r.key().equals("warm")) warm.set(true);
                    else got.add(r.value());
                    c.acknowledge(r, AcknowledgeType.ACCEPT);
                }
                c.commitSync();
                if (warm.get() && !produced) {
                    warming.join();
                    produce(topic, numbered("r-", n));
                    produced = true;
                }
            }
        }
        System.out.println("OK accepted " + n);
    }

    /** After a restart: m new records come, none of those accepted before. */
    static void afterRestart(String topic, String group, int m) throws Exception {
        List<String> values = new ArrayList<>();
        for (int i = 0; i < m; i++) values.add("s-" + i);
        produce(topic, values);
        Set<String> got = new HashSet<>();
        long start = System.currentTimeMillis();
        try (KafkaShareConsumer<String, String> c = consumer(group)) {
            c.subscribe(List.of(topic));
            while (got.size() < m) {
                deadline(start, got.size() + " of " + m + " records after the restart");
                for (ConsumerRecord<String, String> r : c.poll(Duration.ofMillis(500))) {
                    if (!r.value().startsWith("s-")) fail(r.value() + " at offset " + r.offset() + " was accepted before the restart and came again");
                    got.add(r.value());
                    c.acknowledge(r, AcknowledgeType.ACCEPT);
                }
                c.commitSync();
            }
        }
        System.out.println("OK " + m + " new records after the restart, none accepted before it");
    }

    /**
     * Before a broker kill -9: of 30 records, r-i with i % 3 == 0 is accepted, 1 rejected, 2
     * released once. Prints the offsets of r-0 and r-2 (r-2 is the first record not done).
     */
    static void beforeKill(String topic, String group) throws Exception {
        createTopic(topic);
        int n = 30;
        Map<Integer, List<Short>> seen = new TreeMap<>();
        AtomicBoolean warm = new AtomicBoolean();
        long start = System.currentTimeMillis(), r0 = -1, r2 = -1;
        try (KafkaShareConsumer<String, String> c = consumer(group)) {
            c.subscribe(List.of(topic));
            Thread warming = warmUp(topic, warm);
            boolean produced = false;
            while (!(produced && seen.size() == n)) {
                deadline(start, "seen before the kill " + seen);
                for (ConsumerRecord<String, String> r : c.poll(Duration.ofMillis(500))) {
                    if (r.key().equals("warm")) { warm.set(true); c.acknowledge(r, AcknowledgeType.ACCEPT); continue; }
                    int i = index(r.value());
                    seen.computeIfAbsent(i, k -> new ArrayList<>()).add(count(r));
                    if (i == 0) r0 = r.offset();
                    if (i == 2) r2 = r.offset();
                    if (seen.get(i).size() > 1) fail("r-" + i + " delivered again before the kill: " + seen.get(i));
                    c.acknowledge(r, i % 3 == 0 ? AcknowledgeType.ACCEPT : i % 3 == 1 ? AcknowledgeType.REJECT : AcknowledgeType.RELEASE);
                }
                c.commitSync();
                if (warm.get() && !produced) {
                    warming.join();
                    produce(topic, numbered("r-", n));
                    produced = true;
                }
            }
        }
        System.out.println("OK " + r0 + " " + r2);
    }

    /**
     * After the broker's kill -9 and restart: accepted and rejected records never come again;
     * each released one comes with delivery count 2 (its count survived), and released again,
     * with count 3, the limit (broker-overrides): released then, it is archived and never
     * comes again. A sentinel produced now is delivered once.
     */
    static void afterKill(String topic, String group, int limit) throws Exception {
        int n = 30;
        produce(topic, List.of("s-0"));
        Map<Integer, List<Short>> again = new TreeMap<>();
        boolean sentinel = false;
        long start = System.currentTimeMillis();
        try (KafkaShareConsumer<String, String> c = consumer(group)) {
            c.subscribe(List.of(topic));
            int quietPolls = 0;
            while (true) {
                deadline(start, "after the kill: sentinel " + sentinel + ", released ones " + again);
                ConsumerRecords<String, String> rs = c.poll(Duration.ofMillis(500));
                for (ConsumerRecord<String, String> r : rs) {
                    if (r.value().equals("s-0")) {
                        if (sentinel) fail("the sentinel came twice");
                        sentinel = true;
                        c.acknowledge(r, AcknowledgeType.ACCEPT);
                        continue;
                    }
                    if (r.key().equals("warm")) fail("warm-up " + r.value() + " at offset " + r.offset() + " was accepted before the kill and came again");
                    int i = index(r.value());
                    if (i % 3 != 2) fail("r-" + i + " at offset " + r.offset() + " was " + (i % 3 == 0 ? "accepted" : "rejected") + " before the kill and came again (count " + count(r) + ")");
                    again.computeIfAbsent(i, k -> new ArrayList<>()).add(count(r));
                    c.acknowledge(r, AcknowledgeType.RELEASE);
                }
                c.commitSync();
                boolean complete = sentinel;
                for (int i = 2; complete && i < n; i += 3) complete = again.containsKey(i) && again.get(i).size() >= limit - 1;
                if (complete && rs.isEmpty() && ++quietPolls >= 4) break;
            }
        }
        List<Short> want = new ArrayList<>();
        for (short k = 2; k <= limit; k++) want.add(k);
        for (var e : again.entrySet()) {
            if (!e.getValue().equals(want)) fail("r-" + e.getKey() + " delivered after the kill with counts " + e.getValue() + ", expected " + want);
        }
        System.out.println("OK after the kill: " + again.size() + " released records with counts " + want + ", then archived; none accepted or rejected came again");
    }

    /** A classic consumer, then a KIP-848 one, with the id of an existing share group. */
    static void joinRefused(String topic) throws Exception {
        String group = "sg-join-" + topic;
        drain(topic, group);
        StringBuilder got = new StringBuilder();
        for (String protocol : List.of("classic", "consumer")) {
            Properties p = new Properties();
            p.put("bootstrap.servers", bootstrap);
            p.put("group.id", group);
            p.put("group.protocol", protocol);
            p.put("key.deserializer", StringDeserializer.class.getName());
            p.put("value.deserializer", StringDeserializer.class.getName());
            String error = null;
            long start = System.currentTimeMillis();
            try (var c = new org.apache.kafka.clients.consumer.KafkaConsumer<String, String>(p)) {
                c.subscribe(List.of(topic));
                while (error == null) {
                    deadline(start, protocol + " consumer of share group " + group + " was not refused");
                    try {
                        c.poll(Duration.ofMillis(500));
                    } catch (Exception e) {
                        error = e.getClass().getSimpleName() + ": " + e.getMessage();
                    }
                }
            }
            got.append(protocol).append(" -> ").append(error).append("; ");
            String want = protocol.equals("classic")
                    ? "InconsistentGroupProtocolException"
                    : "GroupIdNotFoundException: Group " + group + " is not a consumer group.";
            if (!error.startsWith(want)) fail(protocol + " consumer got " + error + ", expected " + want);
        }
        System.out.println("OK " + got);
    }

    /** A consumer killed -9 holding records: another gets them once their locks expire. */
    static void kill9(String topic, String classpath) throws Exception {
        createTopic(topic);
        System.out.println("OK " + redeliveredAfterKill(topic, "sg-kill9-" + topic, classpath));
    }

    /** A member of `group` in its own JVM takes records and is killed -9; a new member gets
     *  them again once their locks expire. Returns what was seen. */
    static String redeliveredAfterKill(String topic, String group, String classpath) throws Exception {
        String java = System.getProperty("java.home") + "/bin/java";
        String src = System.getProperty("sluice.share.source");
        Process child = new ProcessBuilder(java, "-cp", classpath, src, "hold", bootstrap, topic, group)
                .redirectErrorStream(false).redirectError(ProcessBuilder.Redirect.DISCARD).start();
        AtomicBoolean held = new AtomicBoolean();
        warmUp(topic, held);
        BufferedReader out = new BufferedReader(new InputStreamReader(child.getInputStream()));
        String line = out.readLine();
        held.set(true);
        if (line == null || !line.startsWith("HELD ")) { child.destroyForcibly(); fail("holder said " + line); }
        Set<Long> heldOffsets = new TreeSet<>();
        for (String o : line.substring(5).trim().split(" ")) heldOffsets.add(Long.parseLong(o));
        child.destroyForcibly();  // SIGKILL
        child.waitFor();
        Map<Long, Short> again = new TreeMap<>();
        long start = System.currentTimeMillis();
        try (KafkaShareConsumer<String, String> c = consumer(group)) {
            c.subscribe(List.of(topic));
            while (!again.keySet().containsAll(heldOffsets)) {
                deadline(start, "held " + heldOffsets + ", redelivered " + again);
                for (ConsumerRecord<String, String> r : c.poll(Duration.ofMillis(500))) {
                    if (heldOffsets.contains(r.offset())) again.put(r.offset(), count(r));
                    c.acknowledge(r, AcknowledgeType.ACCEPT);
                }
                c.commitSync();
            }
        }
        for (long o : heldOffsets) if (again.get(o) < 2) fail("offset " + o + " redelivered with count " + again.get(o));
        return heldOffsets.size() + " held records redelivered after the kill, delivery counts " + new TreeSet<>(again.values());
    }

    /** Sets dynamic configs of `group` (config resource GROUP) and waits until the broker
     *  describes them as the group's own. */
    static void alterGroup(String group, Map<String, String> configs) throws Exception {
        Properties p = new Properties();
        p.put("bootstrap.servers", bootstrap);
        try (Admin a = Admin.create(p)) {
            ConfigResource r = new ConfigResource(ConfigResource.Type.GROUP, group);
            List<AlterConfigOp> ops = new ArrayList<>();
            for (Map.Entry<String, String> e : configs.entrySet())
                ops.add(new AlterConfigOp(new ConfigEntry(e.getKey(), e.getValue()), AlterConfigOp.OpType.SET));
            a.incrementalAlterConfigs(Map.of(r, ops)).all().get(30, TimeUnit.SECONDS);
            long start = System.currentTimeMillis();
            while (true) {
                deadline(start, "group configs " + configs + " of " + group + " described");
                Config c = a.describeConfigs(List.of(r)).all().get(30, TimeUnit.SECONDS).get(r);
                boolean all = true;
                for (Map.Entry<String, String> e : configs.entrySet()) {
                    ConfigEntry got = c.get(e.getKey());
                    all &= got != null && e.getValue().equals(got.value())
                            && got.source() == ConfigEntry.ConfigSource.DYNAMIC_GROUP_CONFIG;
                }
                if (all) return;
                Thread.sleep(200);
            }
        }
    }

    /** Per-group configs: share.auto.offset.reset=earliest makes a new group read the records
     *  produced before it joined (a group without it, latest, gets none of them); its
     *  share.record.lock.duration.ms is the lock its fetches report, and records held by a
     *  member killed -9 come to another member once those locks expire. */
    static void groupConfigs(String topic, String classpath) throws Exception {
        createTopic(topic);
        List<String> old = new ArrayList<>();
        for (int i = 0; i < 20; i++) old.add("o-" + i);
        produce(topic, old);
        String early = "sg-cfg-early-" + topic, late = "sg-cfg-late-" + topic;
        alterGroup(early, Map.of("share.auto.offset.reset", "earliest", "share.record.lock.duration.ms", "2000"));
        Set<String> got = new TreeSet<>();
        Optional<Integer> lock;
        long start = System.currentTimeMillis();
        try (KafkaShareConsumer<String, String> c = consumer(early)) {
            c.subscribe(List.of(topic));
            while (!got.containsAll(old)) {
                deadline(start, "earliest: " + got.size() + " of the " + old.size() + " records produced before joining");
                for (ConsumerRecord<String, String> r : c.poll(Duration.ofMillis(500))) {
                    got.add(r.value());
                    c.acknowledge(r, AcknowledgeType.ACCEPT);
                }
                c.commitSync();
            }
            lock = c.acquisitionLockTimeoutMs();
        }
        if (!lock.equals(Optional.of(2000))) fail("acquisition lock of " + early + ": " + lock + ", expected 2000");
        String redelivered = redeliveredAfterKill(topic, early, classpath);
        AtomicBoolean warm = new AtomicBoolean();
        start = System.currentTimeMillis();
        try (KafkaShareConsumer<String, String> c = consumer(late)) {
            c.subscribe(List.of(topic));
            warmUp(topic, warm);
            while (!warm.get()) {
                deadline(start, "latest: no warm-up record reached " + late);
                for (ConsumerRecord<String, String> r : c.poll(Duration.ofMillis(500))) {
                    if (r.value().startsWith("o-")) fail(late + " (latest) got " + r.value() + ", produced before it joined");
                    if (r.key().equals("warm")) warm.set(true);
                    c.acknowledge(r, AcknowledgeType.ACCEPT);
                }
                c.commitSync();
            }
        }
        System.out.println("OK earliest: all " + old.size() + " earlier records, lock 2000 ms, " + redelivered + "; latest: none of them");
    }

    public static void main(String[] args) throws Exception {
        String scenario = args[0];
        bootstrap = args[1];
        String tag = Long.toString(System.nanoTime() % 1_000_000);
        switch (scenario) {
            case "distinct" -> distinct("sg-distinct-" + tag);
            case "release-reject" -> releaseReject("sg-release-" + tag);
            case "delivery-limit" -> deliveryLimit("sg-limit-" + tag, Integer.parseInt(args[2]));
            case "kill9" -> kill9("sg-kill9-" + tag, System.getProperty("java.class.path"));
            case "group-configs" -> groupConfigs("sg-cfg-" + tag, System.getProperty("java.class.path"));
            case "hold" -> hold(args[2], args[3]);
            case "drain" -> drain(args[2], args[3]);
            case "before-restart" -> beforeRestart(args[2], args[3], Integer.parseInt(args[4]));
            case "after-restart" -> afterRestart(args[2], args[3], Integer.parseInt(args[4]));
            case "before-kill" -> beforeKill(args[2], args[3]);
            case "after-kill" -> afterKill(args[2], args[3], Integer.parseInt(args[4]));
            case "join-refused" -> joinRefused("sg-join-" + tag);
            default -> fail("unknown scenario " + scenario);
        }
        System.out.flush();
        Runtime.getRuntime().halt(0);
    }
}
