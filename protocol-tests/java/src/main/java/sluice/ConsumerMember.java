package sluice;

import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.List;
import java.util.Properties;
import java.util.TreeSet;

import org.apache.kafka.clients.consumer.CommitFailedException;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRebalanceListener;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.SubscriptionPattern;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.StringDeserializer;

/**
 * One group member for the groups-consumer suite, run as its own process so the suite can
 * kill -9 it. Subscribes (topic list, or a regex with --regex) with the given group.protocol,
 * polls until stdin closes or --max records were read, and reports on stdout, one line each:
 *   ASSIGNED t-0,t-1     its whole assignment after each change (empty: "ASSIGNED ")
 *   READ n               records read so far (after each poll that read some)
 *   COMMITTED            after each commitSync
 *   EPOCH n              its member epoch (the group metadata's generation), whenever it
 *                        changed, after a poll
 *   LOST t-0,t-1         the client gave up partitions as lost (it was fenced or its
 *                        member was unknown to the coordinator: it rejoins)
 *   FENCED <msg>         a commitSync failed because the group no longer knows this member
 *                        (CommitFailedException): as an application would, it keeps polling,
 *                        rejoins and reads again from the last committed offsets
 *   ERROR <class>: <msg> a poll failed (the member then exits 3)
 * Args: bootstrap group protocol topics|--regex=RE [key=value consumer properties...]
 */
public final class ConsumerMember {
    public static void main(String[] args) throws Exception {
        String bootstrap = args[0];
        String group = args[1];
        String protocol = args[2];
        String subscription = args[3];
        Properties p = new Properties();
        p.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(ConsumerConfig.GROUP_ID_CONFIG, group);
        p.put(ConsumerConfig.GROUP_PROTOCOL_CONFIG, protocol);
        p.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        p.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        p.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        p.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        long max = Long.MAX_VALUE;
        for (int i = 4; i < args.length; i++) {
            String[] kv = args[i].split("=", 2);
            if (kv[0].equals("max")) {
                max = Long.parseLong(kv[1]);
            } else {
                p.put(kv[0], kv[1]);
            }
        }
        TreeSet<String> owned = new TreeSet<>();
        ConsumerRebalanceListener listener = new ConsumerRebalanceListener() {
            @Override
            public void onPartitionsRevoked(Collection<TopicPartition> parts) {
                for (TopicPartition tp : parts) owned.remove(tp.toString());
                say("ASSIGNED " + String.join(",", owned));
            }

            @Override
            public void onPartitionsAssigned(Collection<TopicPartition> parts) {
                for (TopicPartition tp : parts) owned.add(tp.toString());
                say("ASSIGNED " + String.join(",", owned));
            }

            @Override
            public void onPartitionsLost(Collection<TopicPartition> parts) {
                TreeSet<String> lost = new TreeSet<>();
                for (TopicPartition tp : parts) lost.add(tp.toString());
                say("LOST " + String.join(",", lost));
                onPartitionsRevoked(parts);
            }
        };
        Thread stdin = new Thread(() -> {
            try {
                while (System.in.read() >= 0) { }
            } catch (Exception e) { }
        });
        stdin.setDaemon(true);
        stdin.start();
        long read = 0;
        int epoch = -1;
        try (KafkaConsumer<String, String> c = new KafkaConsumer<>(p)) {
            if (subscription.startsWith("--regex=")) {
                c.subscribe(new SubscriptionPattern(subscription.substring(8)), listener);
            } else {
                c.subscribe(List.of(subscription.split(",")), listener);
            }
            while (stdin.isAlive() && read < max) {
                ConsumerRecords<String, String> rs;
                try {
                    rs = c.poll(Duration.ofMillis(200));
                } catch (Exception e) {
                    say("ERROR " + e.getClass().getName() + ": " + e.getMessage());
                    System.exit(3);
                    return;
                }
                int now = c.groupMetadata().generationId();
                if (now != epoch) {
                    epoch = now;
                    say("EPOCH " + epoch);
                }
                if (rs.isEmpty()) continue;
                read += rs.count();
                try {
                    c.commitSync();
                } catch (CommitFailedException e) {
                    say("FENCED " + e.getMessage());
                    continue;
                }
                say("READ " + read);
                say("COMMITTED");
            }
        }
        say("CLOSED");
    }

    private static synchronized void say(String line) {
        System.out.println(line);
        System.out.flush();
    }
}
