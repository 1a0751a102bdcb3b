// The Java client (Kafka 4.4's kafka-clients) over SASL for test_sasl.py, in one JVM:
//   java SaslClients <bootstrap> <mechanism>:<user>:<password>:<topic>:<count>|fail ...
// For each argument it produces <count> records to <topic> and reads them back (assign +
// seek to the beginning), printing "OK <mechanism> <consumed>", or, for `fail`, expects the
// producer to fail with a SaslAuthenticationException and prints "AUTHFAIL <mechanism>
// <message>". Anything else prints "ERROR <mechanism> <what>".
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Properties;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;

import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.SaslAuthenticationException;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

public class SaslClients {
    static Properties props(String bootstrap, String mech, String user, String password) {
        Properties p = new Properties();
        p.put("bootstrap.servers", bootstrap);
        p.put("security.protocol", "SASL_PLAINTEXT");
        p.put("sasl.mechanism", mech);
        String module = mech.equals("PLAIN")
                ? "org.apache.kafka.common.security.plain.PlainLoginModule"
                : "org.apache.kafka.common.security.scram.ScramLoginModule";
        p.put("sasl.jaas.config", module + " required username=\"" + user + "\" password=\"" + password + "\";");
        return p;
    }

    public static void main(String[] args) throws Exception {
        String bootstrap = args[0];
        for (int i = 1; i < args.length; i++) {
            String[] f = args[i].split(":");
            String mech = f[0], user = f[1], password = f[2], topic = f[3];
            boolean expectFail = f[4].equals("fail");
            int count = expectFail ? 1 : Integer.parseInt(f[4]);
            try {
                run(bootstrap, mech, user, password, topic, count);
                System.out.println((expectFail ? "ERROR " : "OK ") + mech + " " + count);
            } catch (Exception e) {
                Throwable c = e instanceof ExecutionException ? e.getCause() : e;
                if (expectFail && c instanceof SaslAuthenticationException) {
                    System.out.println("AUTHFAIL " + mech + " " + c.getMessage());
                } else {
                    System.out.println("ERROR " + mech + " " + c);
                }
            }
            System.out.flush();
        }
    }

    static void run(String bootstrap, String mech, String user, String password, String topic, int count)
            throws Exception {
        Properties p = props(bootstrap, mech, user, password);
        p.put("key.serializer", StringSerializer.class.getName());
        p.put("value.serializer", StringSerializer.class.getName());
        p.put("max.block.ms", "20000");
        p.put("delivery.timeout.ms", "30000");
        p.put("request.timeout.ms", "15000");
        try (KafkaProducer<String, String> producer = new KafkaProducer<>(p)) {
            for (int i = 0; i < count; i++) {
                producer.send(new ProducerRecord<>(topic, "k" + i, "v" + i)).get(30, TimeUnit.SECONDS);
            }
        }
        Properties c = props(bootstrap, mech, user, password);
        c.put("key.deserializer", StringDeserializer.class.getName());
        c.put("value.deserializer", StringDeserializer.class.getName());
        try (KafkaConsumer<String, String> consumer = new KafkaConsumer<>(c)) {
            TopicPartition tp = new TopicPartition(topic, 0);
            consumer.assign(List.of(tp));
            consumer.seekToBeginning(List.of(tp));
            List<String> seen = new ArrayList<>();
            long deadline = System.currentTimeMillis() + 30000;
            while (seen.size() < count && System.currentTimeMillis() < deadline) {
                for (ConsumerRecord<String, String> r : consumer.poll(Duration.ofMillis(500))) {
                    seen.add(r.value());
                }
            }
            if (seen.size() != count || !seen.get(0).equals("v0")) {
                throw new IllegalStateException("consumed " + seen.size() + " of " + count);
            }
        }
    }
}
