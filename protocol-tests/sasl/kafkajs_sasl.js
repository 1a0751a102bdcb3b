// kafkajs over SASL for test_sasl.py: one JSON argument
//   {bootstrap, mechanism, username, password, topic, count}
// produces `count` records to `topic` and reads them back with a consumer group; prints one
// JSON line {ok, produced, consumed} or {ok: false, name, message} (an authentication
// failure is expected to end here, with kafkajs's error name).
const { Kafka, logLevel } = require("kafkajs");

const a = JSON.parse(process.argv[2]);

async function main() {
  const kafka = new Kafka({
    clientId: "sasl-kafkajs",
    brokers: [a.bootstrap],
    sasl: { mechanism: a.mechanism, username: a.username, password: a.password },
    ssl: false,
    logLevel: logLevel.NOTHING,
    retry: { retries: a.retries === undefined ? 5 : a.retries },
    connectionTimeout: 10000,
  });
  const producer = kafka.producer({ allowAutoTopicCreation: true });
  await producer.connect();
  const messages = [];
  for (let i = 0; i < a.count; i++) messages.push({ key: "k" + i, value: "v" + i });
  await producer.send({ topic: a.topic, messages });
  await producer.disconnect();

  const consumer = kafka.consumer({ groupId: "g-" + a.topic });
  await consumer.connect();
  await consumer.subscribe({ topic: a.topic, fromBeginning: true });
  const seen = [];
  await new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error("consumed only " + seen.length)), 30000);
    consumer.run({
      eachMessage: async ({ message }) => {
        seen.push(message.value.toString());
        if (seen.length >= a.count) {
          clearTimeout(timer);
          resolve();
        }
      },
    }).catch(reject);
  });
  await consumer.disconnect();
  return { ok: true, produced: a.count, consumed: seen.length, first: seen[0] };
}

main()
  .then((r) => {
    console.log(JSON.stringify(r));
    process.exit(0);
  })
  .catch((e) => {
    console.log(JSON.stringify({ ok: false, name: e.name, message: String(e.message) }));
    process.exit(0);
  });
