// Console suite scenarios: a real headless Chromium (Debian's /usr/bin/chromium) driven by
// playwright-core against the broker's HTTP port, with records made by kcat and offsets
// committed by a confluent-kafka consumer (helpers.py). One line per scenario on stdout:
// "PASS console <name>" or "FAIL console <name>: <reason>"; details on stderr ("# ...").
//
//   node console_test.mjs PHASE [scenario ...]
//   PHASE main   (read-only console): brokers-page topics-page topic-page messages-formats
//                messages-from-offset messages-from-time group-lag group-lag-kip848
//                produce-read-only bad-requests schemas
//   PHASE write  (sluice.console.read.only=false): produce-enabled
//   PHASE sasl   (SASL_PLAINTEXT listener): sasl-auth
//   PHASE cluster  (node 1's console on a 3-node cluster, not read-only): cluster-topic
//                cluster-messages cluster-produce cluster-group-lag
//
// Env: BOOTSTRAP, CONSOLE_URL, PY (python with confluent-kafka), SHOTS (screenshot dir),
// RUN_TAG (topic name suffix, shared by the phases).
import { execFileSync, spawn } from 'node:child_process';
import { mkdirSync } from 'node:fs';
import { createInterface } from 'node:readline';
import { chromium } from 'playwright-core';

const [phase, ...only] = process.argv.slice(2);
const URL = process.env.CONSOLE_URL;
const BOOTSTRAP = process.env.BOOTSTRAP;
const PY = process.env.PY || 'python3';
const HERE = new globalThis.URL('.', import.meta.url).pathname;
const SHOTS = process.env.SHOTS;
const TAG = process.env.RUN_TAG || Date.now().toString(16);
const T_MSGS = `console-msgs-${TAG}`;
const T_CFG = `console-cfg-${TAG}`;
const T_LAG = `console-lag-${TAG}`;
const GROUP = `console-group-${TAG}`;
const T_CL = `console-cluster-${TAG}`;
const T_AVRO = `console-avro-${TAG}`;
const T_JSON = `console-json-${TAG}`;
const T_CL_LAG = `console-cluster-lag-${TAG}`;
const SCENARIO_MS = 90_000;
mkdirSync(SHOTS, { recursive: true });

const info = (m) => process.stderr.write(`# ${m}\n`);
function check(ok, why) { if (!ok) throw new Error(why); }
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

function run(cmd, args, input) {
  try {
    return execFileSync(cmd, args, { input, timeout: 60_000, stdio: ['pipe', 'pipe', 'pipe'] });
  } catch (e) {
    const said = `${e.stderr || ''}`.trim().split('\n').slice(-5).join(' | ');
    throw new Error(`${cmd} ${args.slice(0, 3).join(' ')} ... failed (${e.status ?? e.signal}): ${said}`);
  }
}
function kcatProduce(topic, { key, headers = [], value }, partition = 0) {
  const args = ['-b', BOOTSTRAP, '-P', '-t', topic, '-p', String(partition)];
  if (key !== undefined) args.push('-k', key);
  for (const h of headers) args.push('-H', h);
  run('kcat', args, value);
}

let browser;
async function context(httpCredentials) {
  return browser.newContext({ httpCredentials, viewport: { width: 1360, height: 900 } });
}

// Opens a console page (a fresh load) and waits until the page says it has rendered it.
async function open(page, hash) {
  // From a blank page: going to the hash already shown would not load it again.
  await page.goto('about:blank');
  const resp = await page.goto(`${URL}/${hash}`);
  await page.waitForFunction(() => document.body.dataset.loaded !== undefined && document.body.dataset.loaded === (location.hash || '#/brokers'), null, { timeout: 20_000 });
  const err = await page.locator('main > p.error').allTextContents();
  check(err.length === 0, `${hash}: the page shows an error: ${err.join(' ')}`);
  return resp;
}
const shot = (page, name) => page.screenshot({ path: `${SHOTS}/${name}.png`, fullPage: true });
const cells = (page, table, col) => page.$$eval(`table.${table} tbody tr`, (rows, c) => rows.map((r) => (r.children[c] ? r.children[c].innerText.trim() : '')), col);

async function apiJson(page, path) {
  return page.evaluate(async (p) => { const r = await fetch(p); return { status: r.status, body: await r.json() }; }, path);
}

// ---- scenarios ----------------------------------------------------------------------------

const S = { main: {}, write: {}, sasl: {}, cluster: {} };

S.main['brokers-page'] = async (page) => {
  await open(page, '#/brokers');
  const port = BOOTSTRAP.split(':').pop();
  const hosts = await cells(page, 'brokers', 1);
  check(hosts.includes(`127.0.0.1:${port}`), `broker hosts ${JSON.stringify(hosts)}`);
  const ids = await cells(page, 'brokers', 0);
  check(ids.length === 1 && /^1 /.test(ids[0]) && ids[0].includes('controller'), `broker ids ${JSON.stringify(ids)}`);
  await shot(page, 'brokers');
};

S.main['topics-page'] = async (page) => {
  await open(page, '#/topics');
  const names = await cells(page, 'topics', 0);
  const parts = await cells(page, 'topics', 1);
  const i = names.indexOf(T_CFG);
  check(names.includes(T_MSGS) && i >= 0, `topics listed: ${JSON.stringify(names)}`);
  check(parts[i] === '3', `${T_CFG} shows ${parts[i]} partitions`);
  await shot(page, 'topics');
};

S.main['topic-page'] = async (page) => {
  await open(page, `#/topic/${T_CFG}`);
  const parts = await cells(page, 'partitions', 0);
  const leaders = await cells(page, 'partitions', 1);
  const isr = await cells(page, 'partitions', 3);
  check(JSON.stringify(parts) === '["0","1","2"]', `partitions ${JSON.stringify(parts)}`);
  check(leaders.every((l) => l === '1') && isr.every((l) => l === '1'), `leaders ${leaders}, ISR ${isr}`);
  const names = await cells(page, 'configs', 0);
  const values = await cells(page, 'configs', 1);
  const sources = await cells(page, 'configs', 2);
  const r = names.indexOf('retention.ms');
  check(r >= 0 && values[r] === '123456789' && sources[r] === 'DYNAMIC_TOPIC_CONFIG', `retention.ms: ${values[r]} ${sources[r]}`);
  const c = names.indexOf('cleanup.policy');
  check(c >= 0 && values[c] === 'delete' && sources[c] === 'DEFAULT_CONFIG', `cleanup.policy: ${values[c]} ${sources[c]}`);
  await shot(page, 'topic');
};

S.main['messages-formats'] = async (page) => {
  kcatProduce(T_MSGS, { key: 'k-json', headers: ['trace=abc', 'origin=kcat'], value: '{"name":"sluice","n":1}' });
  kcatProduce(T_MSGS, { key: 'k-text', value: 'hello console' });
  kcatProduce(T_MSGS, { key: 'k-bin', value: Buffer.from([0xde, 0xad, 0xbe, 0xef]) });
  const base = `#/messages?topic=${T_MSGS}&partition=0&mode=earliest`;
  await open(page, `${base}&format=auto`);
  const offsets = await cells(page, 'records', 1);
  check(JSON.stringify(offsets) === '["0","1","2"]', `offsets ${JSON.stringify(offsets)}`);
  const keys = await cells(page, 'records', 3);
  check(JSON.stringify(keys) === '["k-json","k-text","k-bin"]', `keys ${JSON.stringify(keys)}`);
  let values = await cells(page, 'records', 4);
  check(values[0] === '{\n  "n": 1,\n  "name": "sluice"\n}' || values[0] === '{\n  "name": "sluice",\n  "n": 1\n}', `JSON value shown as ${JSON.stringify(values[0])}`);
  check(values[1] === 'hello console', `text value ${JSON.stringify(values[1])}`);
  check(values[2] === 'de ad be ef', `binary value ${JSON.stringify(values[2])}`);
  const headers = await cells(page, 'records', 5);
  check(headers[0].includes('trace: abc') && headers[0].includes('origin: kcat'), `headers ${JSON.stringify(headers[0])}`);
  await shot(page, 'messages');
  await open(page, `${base}&format=hex`);
  values = await cells(page, 'records', 4);
  check(values[1] === '68 65 6c 6c 6f 20 63 6f 6e 73 6f 6c 65', `hex ${JSON.stringify(values[1])}`);
  await open(page, `${base}&format=text`);
  values = await cells(page, 'records', 4);
  check(values[0] === '{"name":"sluice","n":1}', `text of the JSON value ${JSON.stringify(values[0])}`);
};

S.main['messages-from-offset'] = async (page) => {
  await open(page, `#/messages?topic=${T_MSGS}&partition=0&mode=offset&offset=1`);
  const offsets = await cells(page, 'records', 1);
  check(JSON.stringify(offsets) === '["1","2"]', `from offset 1: ${JSON.stringify(offsets)}`);
  await open(page, `#/messages?topic=${T_MSGS}&partition=0&mode=newest&limit=1`);
  const newest = await cells(page, 'records', 1);
  check(JSON.stringify(newest) === '["2"]', `newest 1: ${JSON.stringify(newest)}`);
};

S.main['messages-from-time'] = async (page) => {
  await open(page, '#/brokers');
  const before = (await apiJson(page, `/api/messages?topic=${T_MSGS}&partition=0&from=earliest`)).body.records;
  const last = Math.max(...before.map((r) => r.timestamp));
  // The next record's CreateTime must be later than every earlier one (bounded wait).
  for (let i = 0; i < 100 && Date.now() <= last; i++) await sleep(10);
  kcatProduce(T_MSGS, { key: 'k-later', value: 'a later record' });
  const after = (await apiJson(page, `/api/messages?topic=${T_MSGS}&partition=0&from=earliest`)).body.records;
  const later = after.find((r) => r.key && r.key.text === 'k-later');
  check(later && later.timestamp > last, `the later record: ${JSON.stringify(later)} (last before ${last})`);
  await open(page, `#/messages?topic=${T_MSGS}&partition=0&mode=timestamp&timestamp=${later.timestamp}`);
  const offsets = await cells(page, 'records', 1);
  check(JSON.stringify(offsets) === `["${later.offset}"]`, `from ${later.timestamp}: ${JSON.stringify(offsets)}`);
  const iso = new Date(later.timestamp - (later.timestamp % 1000)).toISOString().slice(0, 19);
  await open(page, `#/messages?topic=${T_MSGS}&partition=0&mode=timestamp&time=${iso}`);
  const fromSecond = await cells(page, 'records', 1);
  check(fromSecond.includes(String(later.offset)), `from ${iso}: ${JSON.stringify(fromSecond)}`);
  await shot(page, 'messages-from-time');
};

// A group's page while its consumer commits 4 of 10 records, then all 10: members with
// their assignment, committed and end offsets, lag 6 then 0.
async function groupLag(page, protocol, topic, group, shotName) {
  run('kcat', ['-b', BOOTSTRAP, '-P', '-t', topic, '-p', '0'], Array.from({ length: 10 }, (_, i) => `r${i}`).join('\n') + '\n');
  const c = spawn(PY, [`${HERE}/helpers.py`, 'consumer', BOOTSTRAP, topic, group, protocol, '4', '10'], { stdio: ['pipe', 'pipe', 'inherit'] });
  const lines = createInterface({ input: c.stdout })[Symbol.asyncIterator]();
  const next = async (want) => {
    const r = await Promise.race([lines.next(), sleep(60_000).then(() => ({ value: 'timeout' }))]);
    check(r.value === want, `consumer said ${JSON.stringify(r.value)}, not ${want}`);
  };
  try {
    await next('committed 4');
    await open(page, '#/groups');
    const groups = await cells(page, 'groups', 0);
    const types = await cells(page, 'groups', 1);
    const want = protocol === 'consumer' ? 'consumer' : 'classic';
    check(groups.includes(group) && types[groups.indexOf(group)] === want, `groups ${JSON.stringify(groups)} ${JSON.stringify(types)}`);
    await open(page, `#/group/${group}`);
    let lag = await page.locator('#total-lag').innerText();
    check(lag === '6', `lag after committing 4 of 10: ${lag}`);
    const clients = await cells(page, 'members', 1);
    const assigned = await cells(page, 'members', 3);
    check(clients.includes('console-test-consumer') && assigned.includes(`${topic}-0`), `members ${clients} ${assigned}`);
    const committed = await cells(page, 'offsets', 2);
    const ends = await cells(page, 'offsets', 3);
    check(committed[0] === '4' && ends[0] === '10', `committed ${committed}, end ${ends}`);
    await shot(page, shotName);
    c.stdin.write('\n');
    await next('committed 10');
    await open(page, `#/group/${group}`);
    lag = await page.locator('#total-lag').innerText();
    check(lag === '0', `lag after committing 10 of 10: ${lag}`);
    c.stdin.write('\n');
  } finally {
    c.stdin.end();
    setTimeout(() => c.kill(), 20_000).unref();
  }
}

S.main['group-lag'] = (page) => groupLag(page, 'classic', T_LAG, GROUP, 'group');
S.main['group-lag-kip848'] = (page) => groupLag(page, 'consumer', `${T_LAG}-848`, `${GROUP}-848`, 'group-kip848');

S.main['produce-read-only'] = async (page) => {
  await open(page, `#/produce?topic=${T_MSGS}`);
  await page.fill('textarea[name=value]', 'refused');
  await page.click('#produce button[type=submit]');
  await page.waitForSelector('#produced p', { timeout: 10_000 });
  const msg = await page.locator('#produced p').innerText();
  check(/read-only/.test(msg) && (await page.locator('#produced p.error').count()) === 1, `the form said ${JSON.stringify(msg)}`);
  const status = await page.evaluate(async (t) => (await fetch('/api/produce', { method: 'POST', body: JSON.stringify({ topic: t, value: 'x' }) })).status, T_MSGS);
  check(status === 403, `POST /api/produce: ${status}`);
  await shot(page, 'produce-read-only');
};

S.main['bad-requests'] = async (page) => {
  await open(page, '#/brokers');
  const cases = [
    [`/api/messages?topic=${T_MSGS}&offset=abc`, 400], ['/api/messages', 400],
    [`/api/messages?topic=${T_MSGS}&partition=99`, 404], ['/api/topic?name=no-such-topic', 404],
    ['/api/group?id=no-such-group', 404], ['/api/messages?topic=%ff%fe&limit=-1', 400],
  ];
  for (const [path, want] of cases) {
    const got = await page.evaluate(async (p) => (await fetch(p)).status, path);
    check(got === want, `${path}: ${got}, not ${want}`);
  }
  const health = await page.evaluate(async () => (await fetch('/health')).status);
  check(health === 200, `/health after bad requests: ${health}`);
};

// Records written with Confluent's serializers through the broker's own schema registry: the
// Schemas page lists their subjects, a subject's page its schema, and the message browser
// shows the records decoded through the schema they name (raw bytes still in hex).
S.main['schemas'] = async (page) => {
  const out = run(PY, [`${HERE}/helpers.py`, 'schemas', BOOTSTRAP, URL, T_AVRO, T_JSON]).toString();
  const ids = Object.fromEntries(out.trim().split('\n').map((l) => l.split(' ')));
  check(ids.avro && ids.json, `the helper said ${JSON.stringify(out)}`);
  await open(page, '#/schemas');
  const subjects = await cells(page, 'subjects', 0);
  const formats = await cells(page, 'subjects', 1);
  const idCol = await cells(page, 'subjects', 4);
  const a = subjects.indexOf(`${T_AVRO}-value`);
  const j = subjects.indexOf(`${T_JSON}-value`);
  check(a >= 0 && j >= 0, `subjects listed: ${JSON.stringify(subjects)}`);
  check(formats[a] === 'AVRO' && formats[j] === 'JSON', `formats ${formats[a]} ${formats[j]}`);
  check(idCol[a] === ids.avro && idCol[j] === ids.json, `ids ${idCol[a]} ${idCol[j]}, registered ${JSON.stringify(ids)}`);
  await shot(page, 'schemas');
  await open(page, `#/subject/${T_AVRO}-value`);
  const schema = (await cells(page, 'versions', 2))[0] || '';
  check(schema.includes('"User"') && schema.includes('"namespace": "console.test"'), `the schema shown: ${JSON.stringify(schema)}`);
  await shot(page, 'subject');
  const base = `#/messages?topic=${T_AVRO}&partition=0&mode=earliest`;
  await open(page, `${base}&format=auto`);
  let values = await cells(page, 'records', 4);
  check(values.length === 2, `records ${JSON.stringify(values)}`);
  check(values[0].includes(`AVRO · ${T_AVRO}-value v1 · id ${ids.avro}`), `the first value names its schema: ${JSON.stringify(values[0])}`);
  check(values[0].includes('"name": "ada"') && values[0].includes('"n": 1') && values[1].includes('"name": "bob"'), `decoded values ${JSON.stringify(values)}`);
  await shot(page, 'messages-schema');
  await open(page, `${base}&format=hex`);
  values = await cells(page, 'records', 4);
  const idHex = Number(ids.avro).toString(16).padStart(8, '0').match(/../g).join(' ');
  check(values[0].startsWith(`00 ${idHex} `), `raw value ${JSON.stringify(values[0])}`);
  await open(page, `#/messages?topic=${T_JSON}&partition=0&mode=earliest`);
  values = await cells(page, 'records', 4);
  check(values.length === 2 && values[0].includes(`JSON · ${T_JSON}-value v1`) && values[0].includes('"city": "Lisbon"'), `JSON value ${JSON.stringify(values)}`);
  check(values[1].includes(`PROTOBUF · ${T_JSON}-point v1 · id ${ids.protobuf}`) && values[1].includes('"x": 150'), `Protobuf value ${JSON.stringify(values[1])}`);
  const missing = await page.evaluate(async () => (await fetch('/api/subject?name=no-such-subject')).status);
  check(missing === 404, `an unknown subject: ${missing}`);
};

S.write['produce-enabled'] = async (page) => {
  await open(page, `#/produce?topic=${T_MSGS}`);
  await page.fill('input[name=key]', 'from-console');
  await page.fill('textarea[name=value]', 'produced by the console');
  await page.click('#add-header');
  await page.fill('.header-row .hk', 'hk');
  await page.fill('.header-row .hv', 'hv');
  await page.fill('input[name=partition]', '0');
  await page.click('#produce button[type=submit]');
  await page.waitForSelector('#produced p', { timeout: 10_000 });
  const msg = await page.locator('#produced p').innerText();
  const m = /partition 0 at offset (\d+)/.exec(msg);
  check(m, `the form said ${JSON.stringify(msg)}`);
  await shot(page, 'produce');
  const got = run('kcat', ['-b', BOOTSTRAP, '-C', '-t', T_MSGS, '-p', '0', '-o', m[1], '-c', '1', '-e', '-f', '%k|%s|%h']).toString();
  check(got === 'from-console|produced by the console|hk=hv', `kcat read ${JSON.stringify(got)}`);
};

S.sasl['sasl-auth'] = async () => {
  const status = async (creds, hash = '#/brokers') => {
    const ctx = await context(creds);
    try {
      const page = await ctx.newPage();
      const r = await page.goto(`${URL}/${hash}`);
      return { status: r.status(), auth: await r.headerValue('www-authenticate'), page, ctx };
    } catch (e) { await ctx.close(); throw e; }
  };
  // Refused credentials (none, or a wrong password): the page's answer is a 401 with a Basic
  // challenge (Chromium, having no other credentials to offer, then ends the navigation
  // with ERR_INVALID_AUTH_CREDENTIALS); the same request without a browser gets it too.
  const refused = async (creds) => {
    const who = creds ? `${creds.username} with a wrong password` : 'no credentials';
    const ctx = await context(creds);
    try {
      const page = await ctx.newPage();
      const seen = [];
      page.on('response', (x) => { if (x.url() === `${URL}/`) seen.push([x.status(), x.headers()['www-authenticate']]); });
      await page.goto(`${URL}/#/brokers`).catch((e) => check(/ERR_INVALID_AUTH_CREDENTIALS/.test(e.message), `${who}: ${e.message}`));
      check(seen.length >= 1 && seen.every(([st, h]) => st === 401 && /^Basic /.test(h || '')), `${who}: ${JSON.stringify(seen)}`);
    } finally { await ctx.close(); }
    const headers = creds ? { Authorization: `Basic ${Buffer.from(`${creds.username}:${creds.password}`).toString('base64')}` } : {};
    const direct = await fetch(`${URL}/api/cluster`, { headers });
    check(direct.status === 401 && /^Basic /.test(direct.headers.get('www-authenticate') || ''), `${who}, without a browser: ${direct.status}`);
  };
  await refused(undefined);
  await refused({ username: 'alice', password: 'wrong' });
  let r;
  r = await status({ username: 'alice', password: 'alice-secret' });
  check(r.status === 200, `alice (PLAIN): ${r.status}`);
  await open(r.page, '#/brokers');
  const who = await r.page.locator('#who').innerText();
  check(who.includes('User:alice'), `signed in as ${JSON.stringify(who)}`);
  await shot(r.page, 'sasl');
  const health = await fetch(`${URL}/health`);
  check(health.status === 200, `/health without credentials: ${health.status}`);
  const api = await fetch(`${URL}/api/topics`);
  check(api.status === 401, `/api/topics without credentials: ${api.status}`);
  await r.ctx.close();
  run(PY, [`${HERE}/helpers.py`, 'scram', BOOTSTRAP, 'admin', 'admin-secret', 'sam', 'sam-secret']);
  r = await status({ username: 'sam', password: 'sam-secret' });
  check(r.status === 200, `sam (SCRAM): ${r.status}`);
  await open(r.page, '#/topics');
  const sam = await r.page.locator('#who').innerText();
  check(sam.includes('User:sam'), `signed in as ${JSON.stringify(sam)}`);
  await r.ctx.close();
  await refused({ username: 'sam', password: 'sam-wrong' });
};

// On a cluster node 1's console reads what brokers 2 and 3 hold: T_CL has one replica per
// partition, partition i on broker i+1, so only partition 0 is on node 1's disk.
const clusterRecords = (p) => [0, 1, 2].map((j) => `p${p}-r${j}`);

S.cluster['cluster-topic'] = async (page) => {
  await open(page, '#/brokers');
  const ids = await cells(page, 'brokers', 0);
  check(ids.length === 3, `brokers ${JSON.stringify(ids)}`);
  for (const p of [0, 1, 2]) run('kcat', ['-b', BOOTSTRAP, '-P', '-t', T_CL, '-p', String(p)], clusterRecords(p).join('\n') + '\n');
  const t = (await apiJson(page, `/api/topic?name=${T_CL}`)).body;
  const got = t.partitions.map((p) => [p.partition, p.leader, p.end_offset, p.start_offset, p.size > 0]);
  check(JSON.stringify(got) === '[[0,1,3,0,true],[1,2,3,0,true],[2,3,3,0,true]]', `partitions (index, leader, end, start, has a size): ${JSON.stringify(got)}`);
  const topics = (await apiJson(page, '/api/topics')).body.topics;
  const listed = topics.find((x) => x.name === T_CL);
  check(listed && listed.size === t.partitions.reduce((n, p) => n + p.size, 0), `topics page size ${JSON.stringify(listed)}`);
  await open(page, `#/topic/${T_CL}`);
  const ends = await cells(page, 'partitions', 6);
  info(`topic page rows: ${JSON.stringify(await cells(page, 'partitions', 1))} ${JSON.stringify(ends)}`);
  await shot(page, 'cluster-topic');
};

S.cluster['cluster-messages'] = async (page) => {
  for (const p of [0, 1, 2]) {
    await open(page, `#/messages?topic=${T_CL}&partition=${p}&mode=earliest&format=text`);
    const values = await cells(page, 'records', 4);
    check(JSON.stringify(values) === JSON.stringify(clusterRecords(p)), `partition ${p} (broker ${p + 1}): ${JSON.stringify(values)}`);
    if (p === 2) await shot(page, 'cluster-messages');
  }
  const newest = (await apiJson(page, `/api/messages?topic=${T_CL}&partition=2&newest=1`)).body;
  check(newest.records && newest.records.length === 1 && newest.records[0].offset === 2, `newest of partition 2: ${JSON.stringify(newest).slice(0, 300)}`);
  const all = (await apiJson(page, `/api/messages?topic=${T_CL}&partition=all&from=earliest`)).body;
  const seen = (all.records || []).map((r) => `${r.partition}:${r.value && r.value.text}`).sort();
  const want = [0, 1, 2].flatMap((p) => clusterRecords(p).map((v) => `${p}:${v}`)).sort();
  check(JSON.stringify(seen) === JSON.stringify(want), `every partition at once: ${JSON.stringify(seen)}`);
};

S.cluster['cluster-produce'] = async (page) => {
  await open(page, `#/produce?topic=${T_CL}`);
  await page.fill('input[name=key]', 'to-broker-3');
  await page.fill('textarea[name=value]', 'produced through node 1');
  await page.fill('input[name=partition]', '2');
  await page.click('#produce button[type=submit]');
  await page.waitForSelector('#produced p', { timeout: 20_000 });
  const msg = await page.locator('#produced p').innerText();
  const m = /partition 2 at offset (\d+)/.exec(msg);
  check(m && m[1] === '3', `the form said ${JSON.stringify(msg)}`);
  const got = run('kcat', ['-b', BOOTSTRAP, '-C', '-t', T_CL, '-p', '2', '-o', '3', '-c', '1', '-e', '-f', '%k|%s']).toString();
  check(got === 'to-broker-3|produced through node 1', `kcat read ${JSON.stringify(got)}`);
  await shot(page, 'cluster-produce');
};

// A group that broker 2 or 3 coordinates, reading a topic whose only replica is on broker 3.
S.cluster['cluster-group-lag'] = async (page) => {
  const names = Array.from({ length: 12 }, (_, i) => `${GROUP}-cluster-${i}`);
  const found = run(PY, [`${HERE}/helpers.py`, 'coordinators', BOOTSTRAP, ...names]).toString().trim().split('\n').map((l) => l.split(' '));
  const elsewhere = found.find(([, node]) => node !== '1');
  check(elsewhere, `every candidate group is coordinated by broker 1: ${JSON.stringify(found)}`);
  info(`group ${elsewhere[0]} is coordinated by broker ${elsewhere[1]}`);
  await groupLag(page, 'classic', T_CL_LAG, elsewhere[0], 'cluster-group');
};

// ---- runner -------------------------------------------------------------------------------

async function main() {
  const scenarios = Object.entries(S[phase] || {}).filter(([n]) => only.length === 0 || only.includes(n));
  if (scenarios.length === 0) return 0;
  if (phase === 'main') {
    run(PY, [`${HERE}/helpers.py`, 'topics', BOOTSTRAP, `${T_MSGS}:1`, `${T_CFG}:3:retention.ms=123456789`, `${T_LAG}:1`, `${T_LAG}-848:1`, `${T_AVRO}:1`, `${T_JSON}:1`]);
  }
  if (phase === 'cluster') {
    run(PY, [`${HERE}/helpers.py`, 'placed', BOOTSTRAP, T_CL, '1,2,3']);
    run(PY, [`${HERE}/helpers.py`, 'placed', BOOTSTRAP, T_CL_LAG, '3']);
  }
  browser = await chromium.launch({ executablePath: '/usr/bin/chromium', args: ['--no-sandbox', '--disable-dev-shm-usage', '--disable-gpu'] });
  let failed = 0;
  const ctx = await context(undefined);
  for (const [name, fn] of scenarios) {
    const page = await ctx.newPage();
    const t0 = Date.now();
    try {
      let timer;
      const watchdog = new Promise((_, rej) => { timer = setTimeout(() => rej(new Error(`did not finish in ${SCENARIO_MS / 1000} s`)), SCENARIO_MS); });
      await Promise.race([fn(page), watchdog]).finally(() => clearTimeout(timer));
      console.log(`PASS console ${name}`);
    } catch (e) {
      failed++;
      console.log(`FAIL console ${name}: ${String(e.message || e).split('\n')[0]}`);
      await shot(page, `failed-${name}`).catch(() => {});
    }
    info(`${name}: ${Date.now() - t0} ms`);
    await page.close();
  }
  await browser.close();
  return failed ? 1 : 0;
}

main().then((rc) => process.exit(rc), (e) => { console.log(`FAIL console ${phase}-setup: ${e.message}`); process.exit(1); });
