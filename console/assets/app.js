// FastMQ console: polls /api/mesh and renders it. Plain DOM, no libraries.
"use strict";

const POLL_MS = 2000;
// LOW_DISK is the share of free space under which a host's disk is flagged.
const LOW_DISK = 0.1;

function lowDisk(d) {
  return d && !d.error && d.total_bytes > 0 && d.free_bytes / d.total_bytes < LOW_DISK;
}

// el builds an element; text children become text nodes (never HTML).
function el(tag, attrs, ...kids) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k === "class") e.className = v;
    else e.setAttribute(k, v);
  }
  for (const k of kids) {
    if (k === undefined || k === null) continue;
    e.append(k instanceof Node ? k : document.createTextNode(String(k)));
  }
  return e;
}
const num = (v, attrs) => el("td", Object.assign({ class: "num" }, attrs || {}), v);
const badge = (s) => el("span", { class: "badge s-" + s }, s);

function fmtBytes(b) {
  if (b === undefined || b === null) return "-";
  const u = ["B", "KiB", "MiB", "GiB", "TiB"];
  let i = 0;
  while (b >= 1024 && i < u.length - 1) { b /= 1024; i++; }
  return (i === 0 ? b : b.toFixed(1)) + " " + u[i];
}
function fmtDur(ns) {
  if (!ns) return "-";
  const s = ns / 1e9;
  if (s < 0.001) return (ns / 1e3).toFixed(0) + " µs";
  if (s < 1) return (s * 1e3).toFixed(1) + " ms";
  if (s < 120) return s.toFixed(1) + " s";
  if (s < 7200) return (s / 60).toFixed(1) + " min";
  if (s < 172800) return (s / 3600).toFixed(1) + " h";
  return (s / 86400).toFixed(1) + " d";
}
function fmtRate(r) { return r === undefined ? "-" : r < 10 ? r.toFixed(1) : Math.round(r).toString(); }
function fmtTime(t) {
  if (!t || t.startsWith("0001-")) return "-";
  return t.replace("T", " ").replace(/\.\d+/, "").replace("Z", " UTC");
}
function sub(a, b) { return a > b ? a - b : 0; }

function fill(tableId, rows) {
  const tb = document.querySelector("#" + tableId + " tbody");
  tb.replaceChildren(...rows);
}

let view = null;

// GROUP_SERVICE is the gossip service of a node running group members
// (group.MemberService).
const GROUP_SERVICE = "fastmq-group";

// serviceName names a member's advertised service; a node's group
// members are named by the stream/group pairs the publishers see them
// active in.
function serviceName(mesh, m, s) {
  if (s.name !== GROUP_SERVICE) return s.name + " (" + s.kind + ")";
  const gs = new Set();
  for (const p of mesh.members) {
    for (const g of (p.state && p.state.groups) || []) {
      if ((g.active_nodes || []).includes(m.name)) gs.add(g.stream + "/" + g.group);
    }
  }
  return gs.size ? "group member of " + [...gs].sort().join(", ") : "group members (idle)";
}

// memberCount shows a group's live members on a publisher, with those
// holding leases when they differ.
function memberCount(g) {
  const a = g.active_members || 0;
  return a === g.members ? String(a) : a + " (" + g.members + " holding)";
}

// pubCell names the publisher of a row; a down publisher whose last known
// state the console kept says since when it is down.
function pubCell(m) {
  if (!m.stale) return el("td", {}, m.name);
  return el("td", {}, m.name + " ", el("span", { class: "err down-since" }, "publisher down since " + fmtTime(m.down_since)));
}

function renderMembers(mesh) {
  const rows = mesh.members.map((m) => {
    const st = m.state;
    const status = m.missing ? "missing" : (m.status === "alive" && m.down ? "down" : m.status);
    const streams = (m.streams || []).join(", ") + (m.streams_partial ? ", …" : "");
    const svcs = (m.services || []).map((s) => serviceName(mesh, m, s)).join(", ");
    let disk = "-";
    if (st && st.disk) {
      disk = st.disk.error ? "?" : fmtBytes(st.disk.free_bytes) + " of " + fmtBytes(st.disk.total_bytes);
    }
    let answer = m.error ? el("span", { class: m.no_http ? "muted" : "err" }, m.error) : (m.name === mesh.node ? "this node" : fmtDur(m.took_ns));
    if (m.stale) {
      answer = el("span", { class: "err" }, "down since " + fmtTime(m.down_since) + "; last known state of " + fmtTime(st.time) + " kept until it is back or forgotten");
    }
    return el("tr", { "data-member": m.name, "data-status": status, "data-stale": m.stale ? "1" : null },
      el("td", {}, m.name),
      el("td", {}, badge(status)),
      el("td", {}, m.addr || "-"),
      num(m.name === mesh.node ? "-" : fmtDur(m.rtt_ns)),
      el("td", {}, m.http || "-"),
      el("td", {}, m.spool_endpoint || "-"),
      el("td", {}, streams || "-"),
      el("td", {}, svcs || "-"),
      num(disk, { class: "num" + (st && lowDisk(st.disk) ? " s-warn" : ""), "data-low-disk": st && lowDisk(st.disk) ? "1" : null }),
      el("td", {}, answer));
  });
  fill("members", rows);
}

function renderStreams(v) {
  const rows = [];
  for (const m of v.mesh.members) {
    if (!m.state) continue;
    const d = m.state.disk || {};
    for (const s of m.state.streams || []) {
      const key = m.name + "/" + s.name;
      if (s.error) {
        rows.push(el("tr", { "data-stream": s.name, "data-node": m.name },
          el("td", {}, s.name), el("td", {}, m.name),
          el("td", { colspan: 10, class: "err" }, "not served: " + s.error)));
        continue;
      }
      let ret = [];
      if (s.retention_age_ns) ret.push(fmtDur(s.retention_age_ns));
      if (s.retention_bytes) ret.push(fmtBytes(s.retention_bytes));
      const tr = el("tr", { "data-stream": s.name, "data-node": m.name, "data-stale": m.stale ? "1" : null },
        el("td", {}, s.name), pubCell(m),
        num(s.oldest), num(s.next), num(sub(s.next, s.oldest)), num(fmtBytes(s.bytes)),
        num(fmtRate(v.append_rate[key])),
        el("td", {}, fmtTime(s.oldest_time)), el("td", {}, fmtTime(s.newest_time)),
        el("td", {}, ret.length ? ret.join(", ") : "keep all"),
        num(fmtBytes(d.spool_bytes)), num(d.error ? "?" : fmtBytes(d.free_bytes), { class: "num" + (lowDisk(d) ? " s-warn" : "") }));
      tr.addEventListener("click", () => {
        setPeek(m.name, s.name, s.oldest);
        peek();
      });
      rows.push(tr);
    }
  }
  rows.sort((a, b) => (a.dataset.stream + "/" + a.dataset.node).localeCompare(b.dataset.stream + "/" + b.dataset.node));
  fill("streams", rows);
}

function renderConsumers(v) {
  const rows = [];
  for (const m of v.mesh.members) {
    if (!m.state) continue;
    for (const c of m.state.consumers || []) {
      for (const p of c.publishers || []) {
        const key = m.name + "/" + c.name + "/" + c.stream + "/" + p.publisher;
        const lag = sub(p.high, p.acked);
        rows.push(el("tr", { "data-consumer": c.name, "data-node": m.name, "data-publisher": p.publisher, "data-lag": lag },
          el("td", {}, m.name), el("td", {}, c.name), el("td", {}, c.stream), el("td", {}, p.publisher),
          el("td", {}, badge(p.connected ? "alive" : "down")),
          num(lag, { class: "num lag" }), num(fmtDur(p.lag_time_ns)), num(sub(p.position, p.acked)),
          num(p.acked), num(p.delivered),
          num(fmtRate(v.deliver_rate[key])), num(fmtRate(v.ack_rate[key])),
          num(p.records_skipped || 0), num(p.errors || 0)));
      }
    }
  }
  fill("consumers", rows);
}

// renderReaders lists who fetched from each publisher's spool server.
function renderReaders(v) {
  const rows = [];
  for (const m of v.mesh.members) {
    if (!m.state) continue;
    for (const r of m.state.readers || []) {
      const lag = sub(r.high, r.position);
      rows.push(el("tr", { "data-publisher": m.name, "data-stream": r.stream, "data-consumer": r.consumer || "", "data-node": r.node || "",
        "data-position": r.position, "data-lag": lag, "data-stale": m.stale ? "1" : null },
        pubCell(m), el("td", {}, r.stream), el("td", {}, r.consumer || "-"), el("td", {}, r.node || "-"),
        el("td", {}, r.peer || "-"), num(r.position), num(lag, { class: "num lag" }), el("td", {}, fmtTime(r.last_fetch)), num(r.fetches)));
    }
  }
  fill("readers", rows);
}

// renderGroups lists every consumer group on every publisher.
function renderGroups(v) {
  const rows = [];
  for (const m of v.mesh.members) {
    if (!m.state) continue;
    for (const g of m.state.groups || []) {
      const key = m.name + "/" + g.stream + "/" + g.group;
      const gd = v.group_deliver_rate || {}, ga = v.group_ack_rate || {};
      rows.push(el("tr", {
        "data-group": g.group, "data-stream": g.stream, "data-publisher": m.name,
        "data-lag": g.lag_records, "data-in-flight": g.in_flight, "data-acked": g.acked,
        "data-redelivered": g.redelivered, "data-dead": g.dead_lettered, "data-stale": m.stale ? "1" : null,
      },
        el("td", {}, g.group), el("td", {}, g.stream), pubCell(m),
        num(g.lag_records, { class: "num lag" }), num(fmtDur(g.lag_time_ns)),
        num(g.in_flight), num(g.waiting), num(memberCount(g), { "data-active": g.active_members || 0 }), num(g.delivered), num(g.redelivered),
        num(g.acked), num(g.naked), num(g.expired),
        num(g.dead_lettered, { class: "num" + (g.dead_lettered ? " s-warn" : "") }),
        num(fmtRate(gd[key])), num(fmtRate(ga[key]))));
    }
  }
  rows.sort((a, b) => (a.dataset.group + "/" + a.dataset.stream + "/" + a.dataset.publisher)
    .localeCompare(b.dataset.group + "/" + b.dataset.stream + "/" + b.dataset.publisher));
  fill("groups", rows);
}

// chart draws one series of the history as a line on a canvas.
function chart(id, samples, field) {
  const c = document.getElementById(id);
  const g = c.getContext("2d");
  const w = c.width, h = c.height, pad = 18;
  g.clearRect(0, 0, w, h);
  g.font = "10px sans-serif";
  g.fillStyle = "#6b7580";
  if (samples.length < 2) {
    g.fillText("collecting…", 8, h / 2);
    return;
  }
  const t0 = Date.parse(samples[0].t), t1 = Date.parse(samples[samples.length - 1].t);
  const span = Math.max(t1 - t0, 1);
  let max = 0;
  for (const s of samples) max = Math.max(max, s[field]);
  max = max > 0 ? max * 1.1 : 1;
  g.strokeStyle = "#e3e6ea";
  g.beginPath(); g.moveTo(0, pad); g.lineTo(w, pad); g.moveTo(0, h - pad); g.lineTo(w, h - pad); g.stroke();
  g.fillText(fmtRate(max), 2, pad - 4);
  g.fillText(Math.round(span / 1000) + " s", 2, h - 4);
  g.fillText("now", w - 22, h - 4);
  g.strokeStyle = "#2b6cdf";
  g.lineWidth = 1.5;
  g.beginPath();
  samples.forEach((s, i) => {
    const x = ((Date.parse(s.t) - t0) / span) * (w - 2) + 1;
    const y = h - pad - (s[field] / max) * (h - 2 * pad);
    if (i === 0) g.moveTo(x, y); else g.lineTo(x, y);
  });
  g.stroke();
  const last = samples[samples.length - 1][field];
  g.fillStyle = "#1d232a";
  g.fillText("now " + fmtRate(last) + "/s", w - 90, pad - 4);
}

function renderSummary(v) {
  const ms = v.mesh.members;
  const alive = ms.filter((m) => m.status === "alive" && !m.down).length;
  const bad = ms.filter((m) => m.missing || m.status === "failed" || (m.status === "alive" && m.down)).length;
  let streams = 0, lag = 0;
  const low = [];
  for (const m of ms) {
    if (!m.state) continue;
    if (lowDisk(m.state.disk)) low.push(m.name);
    streams += (m.state.streams || []).length;
    for (const c of m.state.consumers || []) for (const p of c.publishers || []) lag += sub(p.high, p.acked);
    for (const g of m.state.groups || []) lag += g.lag_records;
  }
  document.getElementById("node").textContent = "node " + v.mesh.node;
  document.getElementById("summary").textContent =
    ms.length + " members, " + alive + " up" + (bad ? ", " + bad + " down" : "") + "; " +
    streams + " stream spools; total lag " + lag + " records" +
    (low.length ? "; LOW DISK on " + low.join(", ") : "");
  document.getElementById("updated").textContent = "updated " + fmtTime(v.mesh.time);
}

function renderPeekNodes(v) {
  const sel = document.getElementById("peek-node");
  const cur = sel.value;
  const names = v.mesh.members.filter((m) => m.state).map((m) => m.name);
  if (names.join() === Array.from(sel.options).map((o) => o.value).join()) return;
  sel.replaceChildren(...names.map((n) => el("option", { value: n }, n)));
  sel.value = names.includes(cur) ? cur : v.mesh.node;
}

function render(v) {
  view = v;
  renderSummary(v);
  renderMembers(v.mesh);
  renderStreams(v);
  renderConsumers(v);
  renderGroups(v);
  renderReaders(v);
  renderPeekNodes(v);
  const h = v.history || [];
  chart("chart-append", h, "append");
  chart("chart-deliver", h, "deliver");
  chart("chart-ack", h, "ack");
}

// authed is the fetch options: with the bearer token the user gave (a
// node with an ACL asks callers beyond loopback for one: --http-tokens).
function authed() {
  const o = { cache: "no-store" };
  const t = sessionStorage.getItem("fastmq-token");
  if (t) o.headers = { Authorization: "Bearer " + t };
  return o;
}

// askToken asks the user for a token after a 401; false when none given.
function askToken() {
  const t = window.prompt("This node asks for a token (its --http-tokens):");
  if (!t) return false;
  sessionStorage.setItem("fastmq-token", t.trim());
  return true;
}

async function poll() {
  const conn = document.getElementById("conn");
  try {
    const r = await fetch("api/mesh", authed());
    if (r.status === 401 && askToken()) { setTimeout(poll, 0); return; }
    if (!r.ok) throw new Error(r.status + " " + r.statusText);
    render(await r.json());
    conn.textContent = "live";
    conn.className = "badge s-alive";
  } catch (e) {
    conn.textContent = "no answer from this node: " + e.message;
    conn.className = "badge s-failed";
  }
  setTimeout(poll, POLL_MS);
}

// Peek.
let nextFrom = null;

function setPeek(node, stream, from) {
  const sel = document.getElementById("peek-node");
  if (!Array.from(sel.options).some((o) => o.value === node)) sel.append(el("option", { value: node }, node));
  sel.value = node;
  document.getElementById("peek-stream").value = stream;
  document.getElementById("peek-from").value = from;
  document.getElementById("peek-time").value = "";
}

async function peek(from) {
  const q = new URLSearchParams();
  q.set("node", document.getElementById("peek-node").value);
  q.set("stream", document.getElementById("peek-stream").value);
  q.set("limit", document.getElementById("peek-limit").value || "20");
  const t = document.getElementById("peek-time").value.trim();
  if (from !== undefined) q.set("from", from);
  else if (t) q.set("time", t);
  else if (document.getElementById("peek-from").value.trim()) q.set("from", document.getElementById("peek-from").value.trim());
  const info = document.getElementById("peek-info");
  let page;
  try {
    const r = await fetch("api/peek?" + q.toString(), authed());
    page = await r.json();
  } catch (e) {
    info.textContent = "peek failed: " + e.message;
    return;
  }
  const rows = (page.records || []).map((r) => {
    const hs = Object.entries(r.headers || {}).map(([k, v]) => k + "=" + v).join(" ");
    const val = (r.base64 ? "base64:" : "") + r.value + (r.truncated ? " …" : "");
    return el("tr", { "data-offset": r.offset },
      num(r.offset), el("td", {}, fmtTime(r.time)), el("td", {}, hs), num(fmtBytes(r.size)), el("td", { class: "value" }, val));
  });
  fill("peek", rows);
  nextFrom = page.next;
  document.getElementById("peek-from").value = page.from;
  info.textContent = (page.error ? "error: " + page.error + ". " : "") +
    (page.records || []).length + " records of " + page.stream + " on " + page.node +
    " from offset " + page.from + "; next page from " + page.next + ".";
  info.className = page.error ? "err" : "muted";
}

document.getElementById("peek-form").addEventListener("submit", (e) => { e.preventDefault(); peek(); });
document.getElementById("peek-next").addEventListener("click", () => {
  if (nextFrom !== null) { document.getElementById("peek-time").value = ""; peek(nextFrom); }
});

poll();
