// Sluice console: a single-page UI over /api/... (hash routes, no framework, no build step).
'use strict';

const main = document.getElementById('main');

function esc(s) {
  return String(s).replace(/[&<>"']/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' }[c]));
}

function bytes(n) {
  if (n === null || n === undefined) return '—';
  const u = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let i = 0;
  let v = n;
  while (v >= 1024 && i < u.length - 1) { v /= 1024; i++; }
  return (i === 0 ? v : v.toFixed(1)) + ' ' + u[i];
}

function time(ms) {
  if (ms === null || ms === undefined || ms < 0) return '—';
  return new Date(ms).toISOString().replace('T', ' ').replace('Z', ' UTC');
}

function dash(v) { return v === null || v === undefined ? '—' : esc(v); }

async function api(path, opts) {
  const r = await fetch(path, Object.assign({ headers: { Accept: 'application/json' } }, opts || {}));
  let body;
  try { body = await r.json(); } catch (e) { body = { error: 'HTTP ' + r.status }; }
  if (!r.ok) throw new Error(body.error || ('HTTP ' + r.status));
  return body;
}

function table(cols, rows, cls) {
  const head = cols.map((c) => `<th class="${c.num ? 'num' : ''}">${esc(c.title)}</th>`).join('');
  const body = rows.length
    ? rows.map((r) => '<tr>' + cols.map((c) => `<td class="${c.num ? 'num' : ''}">${c.html(r)}</td>`).join('') + '</tr>').join('')
    : `<tr><td colspan="${cols.length}" class="muted">none</td></tr>`;
  return `<table class="${cls || ''}"><thead><tr>${head}</tr></thead><tbody>${body}</tbody></table>`;
}

function fail(e) { main.innerHTML = `<p class="error">${esc(e.message || e)}</p>`; }

function params(hash) {
  const i = hash.indexOf('?');
  return new URLSearchParams(i < 0 ? '' : hash.slice(i + 1));
}

// ---- brokers ------------------------------------------------------------------------------

async function pageBrokers() {
  const c = await api('/api/cluster');
  document.getElementById('who').textContent = `${c.principal} · node ${c.node_id}${c.read_only ? ' · read-only' : ''}`;
  const cards = [
    ['Cluster id', c.cluster_id || '—'], ['Brokers', c.brokers.length], ['Controller', c.controller_id],
    ['Topics', c.topic_count], ['Partitions', c.partition_count],
  ].map(([k, v]) => `<div class="card"><div class="v">${esc(v)}</div><div class="k">${esc(k)}</div></div>`).join('');
  main.innerHTML = `<h1>Brokers</h1><div class="cards">${cards}</div>` + table([
    { title: 'Id', html: (b) => esc(b.id) + (b.controller ? ' <span class="badge">controller</span>' : '') + (b.this ? ' <span class="badge">this node</span>' : '') },
    { title: 'Host', html: (b) => esc(b.host + ':' + b.port) },
    { title: 'Rack', html: (b) => dash(b.rack) },
    { title: 'Leader partitions', num: true, html: (b) => esc(b.leader_count) },
    { title: 'Replicas', num: true, html: (b) => esc(b.replica_count) },
    { title: 'Leads', html: (b) => b.leads.length ? `<span class="hdr">${esc(b.leads.slice(0, 40).join(', '))}${b.leads.length > 40 ? ' …' : ''}</span>` : '<span class="muted">—</span>' },
  ], c.brokers, 'brokers');
}

// ---- topics -------------------------------------------------------------------------------

async function pageTopics() {
  const t = await api('/api/topics');
  main.innerHTML = `<h1>Topics</h1><input class="filter" id="filter" placeholder="Filter by name"><div id="list"></div>`;
  const draw = () => {
    const f = document.getElementById('filter').value.toLowerCase();
    document.getElementById('list').innerHTML = table([
      { title: 'Name', html: (x) => `<a href="#/topic/${encodeURIComponent(x.name)}">${esc(x.name)}</a>` + (x.internal ? ' <span class="badge">internal</span>' : '') },
      { title: 'Partitions', num: true, html: (x) => esc(x.partitions) },
      { title: 'Replication', num: true, html: (x) => esc(x.replication_factor) },
      { title: 'Under-replicated', num: true, html: (x) => x.under_replicated ? `<span class="badge warn">${esc(x.under_replicated)}</span>` : '0' },
      { title: 'Size (this broker)', num: true, html: (x) => bytes(x.size) },
      { title: '', html: (x) => `<a href="#/messages?topic=${encodeURIComponent(x.name)}">messages</a>` },
    ], t.topics.filter((x) => x.name.toLowerCase().includes(f)), 'topics');
  };
  document.getElementById('filter').addEventListener('input', draw);
  draw();
}

async function pageTopic(name) {
  const t = await api('/api/topic?name=' + encodeURIComponent(name));
  const total = t.partitions.reduce((a, p) => a + (typeof p.end_offset === 'number' && typeof p.start_offset === 'number' ? p.end_offset - p.start_offset : 0), 0);
  main.innerHTML = `<h1>Topic ${esc(t.name)}${t.internal ? '<span class="badge">internal</span>' : ''}</h1>
    <div class="cards">
      <div class="card"><div class="v">${t.partitions.length}</div><div class="k">Partitions</div></div>
      <div class="card"><div class="v">${total}</div><div class="k">Records (end − start)</div></div>
      <div class="card"><div class="v hdr">${esc(t.id)}</div><div class="k">Topic id</div></div>
    </div>
    <p><a href="#/messages?topic=${encodeURIComponent(t.name)}">Browse messages</a></p>
    <h2>Partitions</h2>` + table([
    { title: 'Partition', num: true, html: (p) => esc(p.partition) },
    { title: 'Leader', num: true, html: (p) => esc(p.leader) + (p.local ? '' : ' <span class="badge">other node</span>') },
    { title: 'Replicas', html: (p) => esc(p.replicas.join(', ')) },
    { title: 'ISR', html: (p) => esc(p.isr.join(', ')) + (p.isr.length < p.replicas.length ? ' <span class="badge warn">under-replicated</span>' : '') },
    { title: 'Offline', html: (p) => p.offline.length ? esc(p.offline.join(', ')) : '—' },
    { title: 'Start offset', num: true, html: (p) => dash(p.start_offset) },
    { title: 'End offset', num: true, html: (p) => dash(p.end_offset) },
    { title: 'Size', num: true, html: (p) => bytes(p.size) },
  ], t.partitions, 'partitions') + `<h2>Configs</h2>` + table([
    { title: 'Name', html: (c) => esc(c.name) },
    { title: 'Value', html: (c) => c.sensitive ? '<span class="null">(sensitive)</span>' : (c.value === null ? '<span class="null">null</span>' : `<span class="hdr">${esc(c.value)}</span>`) },
    { title: 'Source', html: (c) => c.default ? `<span class="muted">${esc(c.source)}</span>` : `<b>${esc(c.source)}</b>` },
  ], t.configs, 'configs');
}

// ---- messages -----------------------------------------------------------------------------

// A key or value decoded through the registry schema it names (Confluent's wire format).
function decoded(s) {
  const tag = `<div class="hdr muted">${esc(s.type)} · <a href="#/subject/${encodeURIComponent(s.subject)}">${esc(s.subject)}</a> v${esc(s.version)} · id ${esc(s.id)}</div>`;
  if (s.error !== undefined) return `${tag}<pre class="error">${esc(s.error)}</pre>`;
  return `${tag}<pre>${esc(s.json)}</pre>`;
}

function shown(v, fmt) {
  if (v === null || v === undefined) return '<span class="null">null</span>';
  if (v.schema && (fmt === 'auto' || fmt === 'schema')) return decoded(v.schema);
  let body;
  if (fmt === 'hex') body = v.hex;
  else if (fmt === 'json') body = v.json !== null ? v.json : (v.text !== null ? v.text : v.hex);
  else if (fmt === 'text') body = v.text !== null ? v.text : v.hex;
  else body = v.json !== null ? v.json : (v.text !== null ? v.text : v.hex);
  return `<pre>${esc(body)}${v.truncated ? '\n… (' + v.size + ' bytes)' : ''}</pre>`;
}

async function pageMessages(q) {
  const topics = (await api('/api/topics')).topics;
  const topic = q.get('topic') || (topics.find((t) => !t.internal) || topics[0] || {}).name || '';
  let parts = [];
  if (topic) {
    try { parts = (await api('/api/topic?name=' + encodeURIComponent(topic))).partitions.map((p) => p.partition); } catch (e) { parts = []; }
  }
  const mode = q.get('mode') || 'newest';
  const fmt = q.get('format') || 'auto';
  const opt = (v, label, cur) => `<option value="${esc(v)}"${String(v) === String(cur) ? ' selected' : ''}>${esc(label)}</option>`;
  main.innerHTML = `<h1>Messages</h1>
  <form class="bar" id="browse">
    <label>Topic<select name="topic">${topics.map((t) => opt(t.name, t.name, topic)).join('')}</select></label>
    <label>Partition<select name="partition">${opt('all', 'all', q.get('partition') || 'all')}${parts.map((p) => opt(p, p, q.get('partition'))).join('')}</select></label>
    <label>Start<select name="mode">${opt('newest', 'newest', mode)}${opt('earliest', 'earliest', mode)}${opt('offset', 'offset', mode)}${opt('timestamp', 'time', mode)}</select></label>
    <label>Offset<input name="offset" size="8" value="${esc(q.get('offset') || '')}"></label>
    <label>Time (UTC)<input name="time" type="datetime-local" step="1" value="${esc(q.get('time') || '')}"></label>
    <label>or ms<input name="timestamp" size="14" value="${esc(q.get('timestamp') || '')}"></label>
    <label>Limit<input name="limit" size="4" value="${esc(q.get('limit') || '50')}"></label>
    <label>Show as<select name="format">${['auto', 'schema', 'text', 'json', 'hex'].map((f) => opt(f, f, fmt)).join('')}</select></label>
    <button type="submit">Show</button>
  </form><div id="result"></div>`;
  const form = document.getElementById('browse');
  form.addEventListener('submit', (ev) => {
    ev.preventDefault();
    const p = new URLSearchParams();
    for (const [k, v] of new FormData(form).entries()) if (v !== '') p.set(k, v);
    location.hash = '#/messages?' + p.toString();
  });
  form.elements.topic.addEventListener('change', () => { location.hash = '#/messages?topic=' + encodeURIComponent(form.elements.topic.value); });
  form.elements.format.addEventListener('change', () => form.requestSubmit());
  if (!topic) return;
  const a = new URLSearchParams({ topic, partition: q.get('partition') || 'all', limit: q.get('limit') || '50' });
  if (mode === 'earliest') a.set('from', 'earliest');
  if (mode === 'offset') a.set('offset', q.get('offset') || '0');
  if (mode === 'timestamp') {
    let ms = q.get('timestamp');
    if (!ms && q.get('time')) ms = String(Date.parse(q.get('time') + 'Z'));
    a.set('timestamp', ms || '0');
  }
  const res = document.getElementById('result');
  let m;
  try { m = await api('/api/messages?' + a.toString()); } catch (e) { res.innerHTML = `<p class="error">${esc(e.message)}</p>`; return; }
  const notes = m.partitions.filter((p) => p.error || (p.undecodable && p.undecodable.length)).map((p) =>
    `<p class="error">partition ${esc(p.partition)} (leader ${esc(p.leader)}): ${esc(p.error || p.undecodable.join('; '))}</p>`).join('');
  res.innerHTML = notes + `<p class="muted">${m.records.length} record(s)${m.more ? ' (more available)' : ''}</p>` + table([
    { title: 'Partition', num: true, html: (r) => esc(r.partition) },
    { title: 'Offset', num: true, html: (r) => esc(r.offset) },
    { title: 'Timestamp', html: (r) => `<span class="hdr">${esc(time(r.timestamp))}</span><br><span class="muted">${esc(r.timestamp_type)}</span>` },
    { title: 'Key', html: (r) => shown(r.key, fmt) },
    { title: 'Value', html: (r) => shown(r.value, fmt) },
    { title: 'Headers', html: (r) => r.headers.length ? r.headers.map((h) => `<div class="hdr"><b>${esc(h.key)}</b>: ${h.value === null ? '<span class="null">null</span>' : esc(fmt === 'hex' ? h.value.hex : (h.value.text !== null ? h.value.text : h.value.hex))}</div>`).join('') : '<span class="muted">—</span>' },
  ], m.records, 'records');
}

// ---- groups -------------------------------------------------------------------------------

async function pageGroups() {
  const g = await api('/api/groups');
  main.innerHTML = '<h1>Consumer groups</h1>' + table([
    { title: 'Group', html: (x) => `<a href="#/group/${encodeURIComponent(x.group_id)}">${esc(x.group_id)}</a>` },
    { title: 'Type', html: (x) => esc(x.type) },
    { title: 'State', html: (x) => esc(x.state) },
    { title: 'Protocol type', html: (x) => dash(x.protocol_type || null) },
  ], g.groups, 'groups');
}

async function pageGroup(id) {
  const g = await api('/api/group?id=' + encodeURIComponent(id));
  main.innerHTML = `<h1>Group ${esc(g.group_id)}</h1>
    <div class="cards">
      <div class="card"><div class="v">${esc(g.state)}</div><div class="k">State</div></div>
      <div class="card"><div class="v">${esc(g.type)}</div><div class="k">Type</div></div>
      <div class="card"><div class="v">${dash(g.protocol || null)}</div><div class="k">Protocol / assignor</div></div>
      <div class="card"><div class="v">${g.members.length}</div><div class="k">Members</div></div>
      <div class="card"><div class="v" id="total-lag">${esc(g.total_lag)}</div><div class="k">Total lag</div></div>
    </div><h2>Members</h2>` + table([
    { title: 'Member id', html: (m) => `<span class="hdr">${esc(m.member_id)}</span>` },
    { title: 'Client id', html: (m) => esc(m.client_id) },
    { title: 'Host', html: (m) => esc(m.host) },
    { title: 'Assignment', html: (m) => esc(m.assignment.join(', ')) || '<span class="muted">—</span>' },
  ], g.members, 'members') + '<h2>Offsets and lag</h2>' + table([
    { title: 'Topic', html: (o) => `<a href="#/topic/${encodeURIComponent(o.topic)}">${esc(o.topic)}</a>` },
    { title: 'Partition', num: true, html: (o) => esc(o.partition) },
    { title: 'Committed', num: true, html: (o) => dash(o.committed) },
    { title: 'Log end', num: true, html: (o) => dash(o.end_offset) },
    { title: 'Lag', num: true, html: (o) => dash(o.lag) },
    { title: 'Owner', html: (o) => dash(o.owner) },
  ], g.offsets, 'offsets');
}

// ---- produce ------------------------------------------------------------------------------

async function pageProduce(q) {
  const [topics, c] = await Promise.all([api('/api/topics'), api('/api/cluster')]);
  const cur = q.get('topic') || '';
  main.innerHTML = `<h1>Produce a test record</h1>
  ${c.read_only ? '<p class="muted">The console is read-only (sluice.console.read.only=true): the broker will refuse this.</p>' : ''}
  <form class="stack" id="produce">
    <label>Topic<select name="topic">${topics.topics.filter((t) => !t.internal).map((t) => `<option${t.name === cur ? ' selected' : ''}>${esc(t.name)}</option>`).join('')}</select></label>
    <label>Partition (empty: by key, as the Java client)<input name="partition"></label>
    <label>Key<input name="key"></label>
    <label>Value<textarea name="value"></textarea></label>
    <div id="headers"></div>
    <div><button type="button" class="plain" id="add-header">Add header</button> <button type="submit">Produce</button></div>
  </form><div id="produced"></div>`;
  const hs = document.getElementById('headers');
  const addHeader = () => {
    const d = document.createElement('div');
    d.className = 'header-row';
    d.innerHTML = '<input class="hk" placeholder="header key"> <input class="hv" placeholder="header value">';
    hs.appendChild(d);
  };
  document.getElementById('add-header').addEventListener('click', addHeader);
  const form = document.getElementById('produce');
  form.addEventListener('submit', async (ev) => {
    ev.preventDefault();
    const f = form.elements;
    const body = {
      topic: f.topic.value, partition: f.partition.value, key: f.key.value, value: f.value.value,
      headers: [...hs.querySelectorAll('.header-row')].map((r) => ({ key: r.querySelector('.hk').value, value: r.querySelector('.hv').value })),
    };
    const out = document.getElementById('produced');
    try {
      const r = await api('/api/produce', { method: 'POST', headers: { 'Content-Type': 'application/json', Accept: 'application/json' }, body: JSON.stringify(body) });
      out.innerHTML = `<p class="okmsg">Produced to ${esc(r.topic)} partition ${esc(r.partition)} at offset ${esc(r.offset)}</p>`;
    } catch (e) {
      out.innerHTML = `<p class="error">${esc(e.message)}</p>`;
    }
  });
}

// ---- schema registry ----------------------------------------------------------------------

async function pageSchemas() {
  const r = await api('/api/subjects');
  if (!r.enabled) {
    main.innerHTML = '<h1>Schemas</h1><p class="muted">The schema registry is off (sluice.schema.registry.enable=false).</p>';
    return;
  }
  main.innerHTML = '<h1>Schemas</h1>' + table([
    { title: 'Subject', html: (x) => `<a href="#/subject/${encodeURIComponent(x.subject)}">${esc(x.subject)}</a>` },
    { title: 'Format', html: (x) => esc(x.type) },
    { title: 'Latest version', num: true, html: (x) => esc(x.latest_version) },
    { title: 'Versions', num: true, html: (x) => esc(x.versions) },
    { title: 'Id', num: true, html: (x) => esc(x.id) },
    { title: 'Compatibility', html: (x) => esc(x.compatibility) },
  ], r.subjects, 'subjects');
}

async function pageSubject(name) {
  const s = await api('/api/subject?name=' + encodeURIComponent(name));
  const latest = s.versions[s.versions.length - 1] || {};
  main.innerHTML = `<h1>Subject ${esc(s.subject)}</h1>
    <div class="cards">
      <div class="card"><div class="v">${esc(latest.type || '—')}</div><div class="k">Format</div></div>
      <div class="card"><div class="v">${s.versions.length}</div><div class="k">Versions</div></div>
      <div class="card"><div class="v">${esc(s.compatibility)}</div><div class="k">Compatibility</div></div>
      <div class="card"><div class="v">${esc(s.mode)}</div><div class="k">Mode</div></div>
    </div>` + table([
    { title: 'Version', num: true, html: (v) => esc(v.version) },
    { title: 'Id', num: true, html: (v) => esc(v.id) },
    { title: 'Schema', html: (v) => `<pre>${esc(v.schema)}</pre>` },
    { title: 'References', html: (v) => v.references.length ? v.references.map((r) => `<div class="hdr">${esc(r.name)} → <a href="#/subject/${encodeURIComponent(r.subject)}">${esc(r.subject)}</a> v${esc(r.version)}</div>`).join('') : '<span class="muted">—</span>' },
  ], s.versions.slice().reverse(), 'versions');
}

// ---- routing ------------------------------------------------------------------------------

async function route() {
  const hash = location.hash || '#/brokers';
  const path = hash.slice(1).split('?')[0];
  let parts;
  try { parts = path.split('/').filter(Boolean).map(decodeURIComponent); } catch (e) { parts = []; }
  const page = parts[0] || 'brokers';
  for (const a of document.querySelectorAll('header nav a')) {
    const p = a.dataset.page;
    a.classList.toggle('active', p === page || (p === 'topics' && page === 'topic') || (p === 'groups' && page === 'group') || (p === 'schemas' && page === 'subject'));
  }
  main.innerHTML = '<p class="muted">Loading…</p>';
  try {
    if (page === 'topics') await pageTopics();
    else if (page === 'topic') await pageTopic(parts.slice(1).join('/'));
    else if (page === 'messages') await pageMessages(params(hash));
    else if (page === 'groups') await pageGroups();
    else if (page === 'group') await pageGroup(parts.slice(1).join('/'));
    else if (page === 'produce') await pageProduce(params(hash));
    else if (page === 'schemas') await pageSchemas();
    else if (page === 'subject') await pageSubject(parts.slice(1).join('/'));
    else await pageBrokers();
    document.body.dataset.loaded = hash;
  } catch (e) {
    fail(e);
    document.body.dataset.loaded = hash;
  }
}

window.addEventListener('hashchange', route);
api('/api/cluster').then((c) => {
  document.getElementById('who').textContent = `${c.principal} · node ${c.node_id}${c.read_only ? ' · read-only' : ''}`;
}).catch(() => {});
route();
