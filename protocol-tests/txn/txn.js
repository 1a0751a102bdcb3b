// kafkajs transactions against $BOOTSTRAP, for test_txn.py's kafkajs-txn scenario.
// Usage: node txn.js <name prefix>; prints `OK <details>` or `FAIL <reason>` as its last line.
//
// A transactional producer (idempotent, maxInFlightRequests 1) runs three transactions on a
// 1-partition topic: commit (with sendOffsets of offset 3 for a group), abort (with
// sendOffsets of 7), commit. A plain producer then writes END. A read_committed group
// consumer (kafkajs's default, readUncommitted false) reads exactly the two committed
// transactions' records before END; a readUncommitted consumer reads all 15; the group's
// committed offset is 3, the committed transaction's.
'use strict';
const { Kafka, logLevel } = require('kafkajs');

const prefix = process.argv[2] || 'kjs';
const kafka = new Kafka({
  clientId: 'sluice-txn-kafkajs',
  brokers: (process.env.BOOTSTRAP || '127.0.0.1:9092').split(','),
  logLevel: logLevel.WARN,
  retry: { retries: 10 },
});
const topic = `${prefix}-txn`;
const offsetsGroup = `${prefix}-offsets`;

function check(cond, what) {
  if (!cond) throw new Error(what);
}

async function readUntilEnd(readUncommitted, group) {
  const consumer = kafka.consumer({ groupId: group, readUncommitted });
  const got = [];
  await consumer.connect();
  try {
    await consumer.subscribe({ topic, fromBeginning: true });
    await new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(
        `${readUncommitted ? 'read_uncommitted' : 'read_committed'} consumer did not reach END in 60s: ${got}`)), 60000);
      consumer.run({
        eachMessage: async ({ message }) => {
          const v = message.value.toString();
          if (v === 'END') {
            clearTimeout(timer);
            resolve();
          } else {
            got.push(v);
          }
        },
      }).catch(reject);
    });
  } finally {
    await consumer.disconnect();
  }
  return got;
}

async function main() {
  const admin = kafka.admin();
  await admin.connect();
  await admin.createTopics({ topics: [{ topic, numPartitions: 1 }], waitForLeaders: true });

  const producer = kafka.producer({
    transactionalId: `${prefix}-tx`, idempotent: true, maxInFlightRequests: 1,
  });
  await producer.connect();
  const committed = [];
  const all = [];
  const plan = [['commit', 3], ['abort', 7], ['commit', null]];
  for (let t = 0; t < plan.length; t++) {
    const [end, offset] = plan[t];
    const txn = await producer.transaction();
    const vals = [0, 1, 2, 3, 4].map((i) => `kjs-${t}-${i}`);
    await txn.send({ topic, messages: vals.map((value) => ({ value, partition: 0 })) });
    if (offset !== null) {
      await txn.sendOffsets({
        consumerGroupId: offsetsGroup,
        topics: [{ topic, partitions: [{ partition: 0, offset: String(offset) }] }],
      });
    }
    if (end === 'commit') {
      await txn.commit();
      committed.push(...vals);
    } else {
      await txn.abort();
    }
    all.push(...vals);
  }
  await producer.disconnect();

  const plain = kafka.producer();
  await plain.connect();
  await plain.send({ topic, messages: [{ value: 'END', partition: 0 }] });
  await plain.disconnect();

  const offs = await admin.fetchOffsets({ groupId: offsetsGroup, topics: [topic] });
  const off = offs[0].partitions.find((p) => p.partition === 0).offset;
  check(off === '3', `group offset ${off}, want 3 (the committed transaction's, not the aborted 7)`);
  await admin.disconnect();

  const rc = await readUntilEnd(false, `${prefix}-rc`);
  check(JSON.stringify(rc) === JSON.stringify(committed),
    `read_committed got [${rc}], want [${committed}]`);
  const ru = await readUntilEnd(true, `${prefix}-ru`);
  check(JSON.stringify(ru) === JSON.stringify(all), `read_uncommitted got [${ru}], want [${all}]`);
  return `committed ${committed.length}, aborted ${all.length - committed.length}, group offset ${off}`;
}

const watchdog = setTimeout(() => {
  console.log('FAIL no result within 100s');
  process.exit(1);
}, 100000);
main().then((res) => {
  clearTimeout(watchdog);
  console.log(`OK ${res}`);
  process.exit(0);
}, (err) => {
  clearTimeout(watchdog);
  console.error(err && err.stack);
  console.log(`FAIL ${String(err && err.message).replace(/\n/g, ' ')}`);
  process.exit(1);
});
