// kafkajs through a leader kill: node failover.js TOPIC N RATE GROUP
// Produces N values ("0".."N-1", one per send, ~RATE/s) with kafkajs's default producer
// (acks=-1, retries 5) while a consumer in GROUP reads the topic. Prints one JSON line
// {"acked":[partition, offset, value]} per acknowledged send, then, once the consumer has read
// every acknowledged record or 90 s have passed, {"summary":true,"consumed":[[p,o,v],...],
// "errors":[first few send errors]}. Env: BOOTSTRAP (comma-separated brokers).
const { Kafka, logLevel } = require('kafkajs')

const [topic, n, rate, groupId] = [process.argv[2], +process.argv[3], +process.argv[4], process.argv[5]]
const kafka = new Kafka({ clientId: 'cluster-failover', brokers: process.env.BOOTSTRAP.split(','), logLevel: logLevel.NOTHING })
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms))

async function main () {
  const producer = kafka.producer()
  const consumer = kafka.consumer({ groupId })
  const consumed = []
  const acked = new Set()
  const errors = []
  await producer.connect()
  await consumer.connect()
  await consumer.subscribe({ topic, fromBeginning: true })
  await consumer.run({
    eachMessage: async ({ partition, message }) => {
      consumed.push([partition, Number(message.offset), message.value.toString()])
    }
  })
  const t0 = Date.now()
  for (let i = 0; i < n; i++) {
    const wait = t0 + (i * 1000) / rate - Date.now()
    if (wait > 0) await sleep(wait)
    try {
      const [md] = await producer.send({ topic, messages: [{ value: String(i) }] })
      const rec = [md.partition, Number(md.baseOffset), String(i)]
      acked.add(rec.join(':'))
      process.stdout.write(JSON.stringify({ acked: rec }) + '\n')
    } catch (e) {
      errors.push(String(e && e.message))
    }
  }
  const deadline = Date.now() + 90000
  while (Date.now() < deadline) {
    const seen = new Set(consumed.map((r) => r.join(':')))
    if ([...acked].every((k) => seen.has(k))) break
    await sleep(500)
  }
  process.stdout.write(JSON.stringify({ summary: true, consumed, errors: errors.slice(0, 5), error_count: errors.length }) + '\n')
  await consumer.disconnect()
  await producer.disconnect()
}

main().then(() => process.exit(0), (e) => { console.error(e); process.exit(1) })
