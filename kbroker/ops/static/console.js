// kbroker console: pages by URL hash, tables from /api/*, live charts from the
// server-sent events of /api/live (one sample a second), drawn with uPlot.
"use strict";

const HISTORY = 300; // samples kept for the charts (5 minutes)
const samples = [];
const charts = {};
let topicsCache = [];
let writesEnabled = false; // operations.write.enable, from /api/overview

const $ = (sel) => document.querySelector(sel);

function esc(value) {
  return String(value ?? "").replace(/[&<>"']/g, (c) => ({
    "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" }[c]));
}

function bytes(n) {
  if (n == null) return "–";
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  let i = 0;
  while (n >= 1024 && i < units.length - 1) { n /= 1024; i += 1; }
  return `${n.toFixed(i ? 1 : 0)} ${units[i]}`;
}

async function getJSON(path) {
  const response = await fetch(path, { cache: "no-store" });
  const body = await response.json();
  if (!response.ok) throw new Error(body.error || response.statusText);
  return body;
}

// A write action (operations.write.enable): POST or DELETE with a JSON body.
async function send(method, path, body) {
  const init = { method, headers: { "Content-Type": "application/json" } };
  if (body !== undefined) init.body = JSON.stringify(body);
  const response = await fetch(path, init);
  const answer = await response.json();
  if (!response.ok) throw new Error(answer.error || response.statusText);
  return answer;
}

async function loadWritesEnabled() {
  writesEnabled = Boolean((await getJSON("/api/overview")).writes_enabled);
  for (const el of document.querySelectorAll(".write")) el.hidden = !writesEnabled;
}

// ---------------------------------------------------------------- pages

const pages = {
  overview: loadOverview,
  topics: loadTopics,
  groups: loadGroups,
  messages: loadMessagesForm,
  clients: loadClientMetrics,
  bench: loadBench,
};

function show() {
  const name = (location.hash || "#overview").slice(1).split("/")[0];
  const page = pages[name] ? name : "overview";
  for (const section of document.querySelectorAll(".page")) {
    section.hidden = section.id !== `page-${page}`;
  }
  for (const a of document.querySelectorAll("nav a")) {
    a.classList.toggle("active", a.dataset.page === page);
  }
  // loading: a page shows "Loading…" until its data is in (a screenshot never shows empty boxes)
  const section = $(`#page-${page}`);
  section.classList.add("loading");
  pages[page]().catch((e) => setStatus(`error: ${e.message}`, "down"))
    .finally(() => section.classList.remove("loading"));
  if (page === "overview") drawCharts();
}

function setStatus(text, kind) {
  const el = $("#status");
  el.textContent = text;
  el.className = `status ${kind || ""}`;
}

async function loadOverview() {
  const o = await getJSON("/api/overview");
  const cards = [
    ["broker", `${o.node_id}${o.clustered ? "" : " (single)"}`],
    ["controller", o.controller_id],
    ["topics", o.topics], ["partitions", o.partitions],
    ["consumer groups", o.groups], ["connections", o.connections],
    ["under-replicated", o.under_replicated_partitions],
    ["offline partitions", o.offline_partitions],
    ["version", o.version],
    ["signed in as", o.principal],
  ];
  // where ANONYMOUS is let in, /login asks for a name and password (console_auth)
  $("#login").hidden = !(o.authorizer && o.principal === "User:ANONYMOUS");
  $("#summary").innerHTML = cards.map(([label, value]) =>
    `<div class="card"><div class="value">${esc(value)}</div><div class="label">${esc(label)}</div></div>`).join("");
  // as `kbroker cluster status`: the live brokers, then those not alive that hold replicas
  $("#brokers tbody").innerHTML = o.brokers.map((b) => b.alive === false
    ? `<tr class="dead"><td>${b.id}</td><td>–</td><td>–</td><td class="bad">${esc(b.status)}</td></tr>`
    : `<tr><td>${b.id}${b.this ? " (this)" : ""}</td><td>${esc(b.host)}:${b.port}</td>` +
      `<td>${esc(b.rack ?? "–")}</td><td>${b.controller ? "controller" : "broker"}</td></tr>`).join("");
  document.body.dataset.loaded = "overview";
}

async function loadTopics() {
  await loadWritesEnabled();
  const topics = await getJSON("/api/topics");
  topicsCache = topics;
  $("#topics tbody").innerHTML = topics.map((t) =>
    `<tr class="clickable" data-topic="${esc(t.name)}"><td>${esc(t.name)}${t.internal ? ' <span class="muted">(internal)</span>' : ""}</td>` +
    `<td class="num">${t.partitions}</td><td class="num">${t.replication_factor}</td>` +
    `<td class="num">${t.records}</td><td class="num">${bytes(t.size_bytes)}</td>` +
    `<td class="num ${t.under_replicated ? "bad" : ""}">${t.under_replicated}</td>` +
    `<td class="num ${t.offline ? "bad" : ""}">${t.offline}</td>` +
    `<td><code>${esc(configText(t.configs))}</code></td>` +
    (writesEnabled ? `<td>${t.internal ? "" : `<button class="danger delete-topic" data-topic="${esc(t.name)}">Delete</button>`}</td>` : "") +
    "</tr>").join("");
  for (const row of document.querySelectorAll("#topics tr.clickable")) {
    row.addEventListener("click", () => loadTopic(row.dataset.topic));
  }
  for (const button of document.querySelectorAll("button.delete-topic")) {
    button.addEventListener("click", (event) => {
      event.stopPropagation();
      deleteTopic(button.dataset.topic);
    });
  }
  const wanted = location.hash.split("/")[1];
  if (wanted) await loadTopic(decodeURIComponent(wanted));
}

async function loadTopic(name) {
  const t = await getJSON(`/api/topics/${encodeURIComponent(name)}`);
  const rows = t.partitions.map((p) =>
    `<tr><td class="num">${p.partition}</td><td class="num">${p.leader}</td><td class="num">${p.leader_epoch}</td>` +
    `<td>${p.replicas.join(", ")}</td><td class="${p.isr.length < p.replicas.length ? "bad" : ""}">${p.isr.join(", ")}</td>` +
    `<td>${p.offline_replicas.join(", ") || "–"}</td>` +
    `<td class="num">${p.log_start_offset ?? "–"}</td><td class="num">${p.high_watermark ?? "–"}</td>` +
    `<td class="num">${p.log_end_offset ?? "–"}</td><td class="num">${bytes(p.size_bytes)}</td>` +
    `<td class="num">${p.segments ?? "–"}</td></tr>`).join("");
  const configs = Object.entries(t.configs || {}).map(([k, v]) => `<tr><td><code>${esc(k)}</code></td><td><code>${esc(v)}</code></td></tr>`).join("");
  $("#topic-detail").innerHTML = `<h2 id="topic-title">${esc(t.name)}</h2>` +
    `<table class="partitions"><thead><tr><th>partition</th><th>leader</th><th>epoch</th><th>replicas</th><th>ISR</th>` +
    `<th>offline</th><th>log start</th><th>high watermark</th><th>log end</th><th>size</th><th>segments</th></tr></thead>` +
    `<tbody>${rows}</tbody></table>` +
    `<h3>Configs (not default)</h3>${configs ? `<table><tbody>${configs}</tbody></table>` : `<p class="muted">${t.configs === null ? "not authorized (DESCRIBE_CONFIGS)" : "none"}</p>`}`;
}

// a topic's configs that are not default as one line (as `kbroker topics describe`);
// null: the user may not DESCRIBE_CONFIGS it
function configText(configs) {
  if (configs === null) return "(not authorized)";
  return Object.entries(configs).map(([k, v]) => `${k}=${v}`).join(", ") || "–";
}

function configsOf(text) {
  const configs = {};
  for (const pair of text.split(",").map((p) => p.trim()).filter(Boolean)) {
    const at = pair.indexOf("=");
    if (at < 1) throw new Error(`configs: expected key=value, not "${pair}"`);
    configs[pair.slice(0, at).trim()] = pair.slice(at + 1).trim();
  }
  return configs;
}

async function createTopic(event) {
  event.preventDefault();
  const info = $("#write-info");
  try {
    const body = { name: $("#create-name").value.trim(), configs: configsOf($("#create-configs").value) };
    if ($("#create-partitions").value) body.partitions = Number($("#create-partitions").value);
    if ($("#create-replication").value) body.replication_factor = Number($("#create-replication").value);
    const done = await send("POST", "/api/topics", body);
    info.textContent = `created ${done.name}: ${done.partitions} partitions, replication factor ${done.replication_factor}`;
    $("#create-topic").reset();
  } catch (e) {
    info.textContent = `create failed: ${e.message}`;
  }
  await loadTopics();
}

async function deleteTopic(name) {
  if (!confirm(`Delete topic ${name} and all its records?`)) return;
  const info = $("#write-info");
  try {
    await send("DELETE", `/api/topics/${encodeURIComponent(name)}`);
    info.textContent = `deleted ${name}`;
  } catch (e) {
    info.textContent = `delete failed: ${e.message}`;
  }
  $("#topic-detail").innerHTML = "";
  await loadTopics();
}

async function resetOffsets(form) {
  const group = form.dataset.group;
  const topic = form.querySelector(".reset-topic").value;
  const choice = form.querySelector(".reset-to").value;
  const to = choice === "offset" ? Number(form.querySelector(".reset-offset").value) : choice;
  if (!confirm(`Reset the offsets of group ${group} on ${topic} to ${to}?`)) return;
  const info = $("#group-info");
  try {
    const done = await send("POST", `/api/groups/${encodeURIComponent(group)}/offsets`, { topic, to });
    info.textContent = `${group}: ${done.offsets.map((o) => `${topic}-${o.partition} → ${o.offset}`).join(", ")}`;
  } catch (e) {
    info.textContent = `reset failed: ${e.message}`;
  }
  await loadGroups();
}

function resetForm(g) {
  if (!writesEnabled) return "";
  const topics = [...new Set(g.offsets.map((o) => o.topic))].sort();
  if (!topics.length) return "";
  return `<form class="reset write" data-group="${esc(g.group_id)}">` +
    `<label>reset offsets of <select class="reset-topic">${topics.map((t) => `<option>${esc(t)}</option>`).join("")}</select></label>` +
    `<label>to <select class="reset-to"><option value="earliest">earliest</option><option value="latest">latest</option>` +
    `<option value="offset">offset</option></select></label>` +
    `<label>offset <input class="reset-offset" type="number" min="0" value="0"></label>` +
    `<button type="submit" class="danger">Reset</button></form>`;
}

async function loadGroups() {
  await loadWritesEnabled();
  const groups = await getJSON("/api/groups");
  if (!groups.length) {
    $("#groups").innerHTML = '<p class="muted">No consumer groups are coordinated by this broker.</p>';
    return;
  }
  $("#groups").innerHTML = groups.map((g) => {
    const members = g.members.map((m) =>
      `<tr><td><code>${esc(m.member_id)}</code></td><td>${esc(m.client_id)}</td><td>${esc(m.client_host)}</td>` +
      `<td>${m.assignment == null ? "(not the consumer protocol)" :
        esc(Object.entries(m.assignment).map(([t, ps]) => `${t}: ${ps.join(",")}`).join("; ") || "–")}</td></tr>`).join("");
    const offsets = g.offsets.map((o) =>
      `<tr><td>${esc(o.topic)}</td><td class="num">${o.partition}</td><td class="num">${o.committed_offset}</td>` +
      `<td class="num ${o.lag ? "bad" : ""}">${o.lag ?? "–"}</td></tr>`).join("");
    return `<h2 class="group">${esc(g.group_id)} <span class="muted">${esc(g.state)}, generation ${g.generation_id}, ` +
      `protocol ${esc(g.protocol ?? "–")}, lag ${g.lag}</span></h2>` +
      `<h3>Members</h3>${members ? `<table><thead><tr><th>member</th><th>client id</th><th>host</th><th>assignment</th></tr></thead><tbody>${members}</tbody></table>` : '<p class="muted">none</p>'}` +
      `<h3>Committed offsets and lag</h3>${offsets ? `<table class="lag"><thead><tr><th>topic</th><th>partition</th><th>committed</th><th>lag</th></tr></thead><tbody>${offsets}</tbody></table>` : '<p class="muted">none</p>'}` +
      resetForm(g);
  }).join("");
  for (const form of document.querySelectorAll("form.reset")) {
    form.addEventListener("submit", (event) => { event.preventDefault(); resetOffsets(form); });
  }
}

async function loadMessagesForm() {
  if (!topicsCache.length) topicsCache = await getJSON("/api/topics");
  const select = $("#browse-topic");
  const current = select.value;
  select.innerHTML = topicsCache.map((t) => `<option>${esc(t.name)}</option>`).join("");
  const wanted = current || (topicsCache.find((t) => !t.internal) || {}).name;
  if (wanted) select.value = wanted;
}

function hex(data) {
  return esc(Array.from(data, (b) => b.toString(16).padStart(2, "0")).join(" "));
}

// A key, value or header as text, JSON or hex; in text and JSON, bytes that are not
// UTF-8 show as hex (marked), never as replacement characters.
function decode(b64, format) {
  if (b64 == null) return '<span class="muted">null</span>';
  const raw = atob(b64);
  const data = Uint8Array.from(raw, (c) => c.charCodeAt(0));
  if (format === "hex") return hex(data);
  let text;
  try {
    text = new TextDecoder("utf-8", { fatal: true }).decode(data);
  } catch (e) {
    return `<span class="muted" title="not UTF-8">hex:</span> ${hex(data)}`;
  }
  if (format === "json") {
    try { return esc(JSON.stringify(JSON.parse(text), null, 2)); } catch (e) { return esc(text); }
  }
  return esc(text);
}

async function browse(event) {
  event.preventDefault();
  const params = new URLSearchParams();
  params.set("topic", $("#browse-topic").value);
  params.set("partition", $("#browse-partition").value || "0");
  params.set("limit", $("#browse-limit").value || "20");
  if ($("#browse-offset").value !== "") params.set("offset", $("#browse-offset").value);
  const format = $("#browse-format").value;
  try {
    const r = await getJSON(`/api/messages?${params}`);
    $("#browse-info").textContent = `${r.tp}: ${r.records.length} records from offset ${r.offset} ` +
      `(log start ${r.log_start_offset}, high watermark ${r.high_watermark})`;
    $("#records tbody").innerHTML = r.records.map((rec) =>
      `<tr><td class="num">${rec.offset}</td><td>${new Date(rec.timestamp).toISOString()}</td>` +
      `<td><pre>${decode(rec.key, format)}</pre></td><td><pre>${decode(rec.value, format)}</pre></td>` +
      `<td><pre>${rec.headers.map(([k, v]) => `${esc(k)}=${decode(v, format)}`).join("\n")}</pre></td></tr>`).join("");
  } catch (e) {
    $("#browse-info").textContent = e.message;
    $("#records tbody").innerHTML = "";
  }
}

// The metrics clients push (KIP-714): the subscriptions, then each client instance's
// latest series.
async function loadClientMetrics() {
  const view = await getJSON("/api/client-metrics");
  $("#subscriptions tbody").innerHTML = view.subscriptions.length
    ? view.subscriptions.map((s) => `<tr><td>${esc(s.name)}</td><td>${esc(s.metrics.join(", "))}</td>` +
      `<td class="num">${s.interval_ms}</td><td>${esc(Object.entries(s.match).map(([k, v]) => `${k}=${v}`).join(", "))}</td></tr>`).join("")
    : '<tr><td colspan="4" class="muted">No subscriptions: clients push nothing. Add one with kafka-configs --entity-type client-metrics.</td></tr>';
  if (!view.instances.length) {
    $("#client-instances").innerHTML = '<p class="muted">No client instance has asked for its subscription.</p>';
    return;
  }
  $("#client-instances").innerHTML = view.instances.map((i) => {
    const rows = i.series.map((s) => `<tr><td>${esc(s.name)}</td>` +
      `<td>${esc(Object.entries(s.attributes).map(([k, v]) => `${k}=${v}`).join(", "))}</td>` +
      `<td class="num">${esc(Number(s.value).toLocaleString())}</td><td>${s.counter ? "counter" : "gauge"}</td></tr>`).join("") ||
      '<tr><td colspan="4" class="muted">Nothing pushed (yet).</td></tr>';
    return `<h3>${esc(i.client_id)} <span class="muted">${esc(i.client_instance_id)}</span></h3>` +
      `<p class="muted">${esc(i.client_software)} from ${esc(i.source)} · every ${i.push_interval_ms} ms · ` +
      `${i.pushes} pushes${i.terminating ? " · terminated" : ""}</p>` +
      `<table class="client-series"><thead><tr><th>metric</th><th>attributes</th><th>value</th><th>kind</th></tr></thead><tbody>${rows}</tbody></table>`;
  }).join("");
}

async function loadBench() {
  let report;
  try {
    report = await getJSON("/api/bench");
  } catch (e) {
    $("#bench").innerHTML = `<p class="muted">${esc(e.message)}. Run <code>python bench/matrix.py --quick</code>.</p>`;
    return;
  }
  const rows = report.summary.filter((r) => ["records_per_s", "mb_per_s", "cpu_s_per_gb", "p99"].includes(r.metric))
    .map((r) => `<tr><td>${esc(r.cell)}</td><td>${esc(r.phase)}</td><td>${esc(r.metric)}</td>` +
      `<td class="num">${r.a == null ? "–" : r.a.toFixed(2)}</td><td class="num">${r.b == null ? "–" : r.b.toFixed(2)}</td>` +
      `<td class="num">${r.ratio == null ? "–" : r.ratio.toFixed(3)}</td></tr>`).join("");
  $("#bench").innerHTML = `<h2>${esc(report.file)}: A = ${esc(report.a)}, B = ${esc(report.b)}</h2>` +
    (report.image ? '<img class="bench" src="/api/bench/image" alt="matrix report">' : "") +
    `<table><thead><tr><th>cell</th><th>phase</th><th>metric</th><th>A</th><th>B</th><th>A/B</th></tr></thead><tbody>${rows}</tbody></table>`;
}

// ---------------------------------------------------------------- live charts

function series(names) {
  return [{}, ...names.map((name, i) => ({
    label: name, stroke: `hsl(${(i * 67) % 360} 65% 45%)`, width: 1.5, spanGaps: true,
  }))];
}

// The time axis ticks on whole seconds (at least 1 s apart) and reads as clock times.
const TIME_INCREMENTS = [1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600];
const clock = (seconds) => new Date(seconds * 1000).toLocaleTimeString("en-GB", { hour12: false });
const TIME_AXIS = { incrs: TIME_INCREMENTS, values: (u, splits) => splits.map(clock), space: 60 };

function chart(id, names, columns, format) {
  const el = document.getElementById(id);
  const key = names.join("\u0000");
  let entry = charts[id];
  if (!entry || entry.key !== key) {
    if (entry) entry.plot.destroy();
    const width = Math.max(el.clientWidth - 12, 300);
    const y = { size: 80, values: (u, values) => values.map((v) => (format ? format(v) : String(v))) };
    const plot = new uPlot({ width, height: 220, series: series(names), scales: { x: { time: true } },
      axes: [TIME_AXIS, y], legend: { live: false } }, columns, el);
    el.querySelector(".waiting")?.remove();
    entry = charts[id] = { key, plot };
  } else {
    entry.plot.setData(columns);
  }
}

function drawCharts() {
  if ($("#page-overview").hidden || !samples.length) return;
  const times = samples.map((s) => s.time_ms / 1000);
  const topics = [...new Set(samples.flatMap((s) => Object.keys(s.topics || {})))]
    .filter((t) => !t.startsWith("__")).sort();
  chart("chart-messages", topics.length ? topics : ["(no topic)"],
    [times, ...(topics.length ? topics : [""]).map((t) => samples.map((s) => s.topics?.[t]?.messages_in_per_s ?? null))]);
  chart("chart-bytes", ["bytes in", "bytes out"], [times,
    samples.map((s) => s.total?.bytes_in_per_s ?? null), samples.map((s) => s.total?.bytes_out_per_s ?? null)],
    (v) => `${bytes(v)}/s`);
  const apis = [...new Set(samples.flatMap((s) => Object.keys(s.requests || {})))].sort().slice(0, 6);
  const names = apis.flatMap((a) => [`${a} p50`, `${a} p99`]);
  chart("chart-latency", names.length ? names : ["(no requests)"], [times,
    ...(apis.length ? apis.flatMap((a) => ["p50_ms", "p99_ms"].map((q) => samples.map((s) => s.requests?.[a]?.[q] ?? null)))
      : [samples.map(() => null)])]);
}

function live() {
  const source = new EventSource("/api/live");
  source.onopen = () => setStatus("live", "live");
  source.onmessage = (event) => {
    const sample = JSON.parse(event.data);
    if (sample.total && sample.total.messages_in_per_s != null) {
      samples.push(sample);
      if (samples.length > HISTORY) samples.shift();
    }
    document.body.dataset.samples = String(samples.length);
    setStatus(`live · ${sample.phase}`, "live");
    drawCharts();
  };
  source.onerror = () => setStatus("disconnected, retrying…", "down");
}

$("#browse").addEventListener("submit", browse);
$("#create-topic").addEventListener("submit", createTopic);
window.addEventListener("hashchange", show);
show();
live();
