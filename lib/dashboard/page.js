// The dashboard page's script: served as-is to the browser (no build step).
// It keeps its own copy of the series from the server's history and
// snapshots, trimmed to the server's window, and draws them with uPlot (a
// global from /uplot.js).
/* global uPlot */

const $ = (id) => document.getElementById(id);
const PLOTS_MAX = 12;
const LOG_SHOWN = 300;
const MARK_COLORS = {
  backoff: "#c33",
  recovery: "#2a7",
  hold: "#a0a",
  rampup: "#27a",
  retry: "#b70",
  announced: "#888",
  robots: "#555",
};
const COLUMNS = [
  ["label", "scope", (r) => r.label],
  ["active", "in flight", (r) => r.active],
  ["concurrency", "limit", (r) => r.concurrency ?? "–"],
  ["delayMs", "delay", (r) => (r.delayMs === null ? "–" : ms(r.delayMs))],
  ["backoffLevel", "backoff", (r) => r.backoffLevel || ""],
  ["holdLeftMs", "hold", (r) => (r.holdLeftMs > 0 ? ms(r.holdLeftMs) : "")],
  ["quota", "quota", (r) => (r.quota ? `${r.quota.used}/${r.quota.limit}` : "")],
  ["robots", "robots.txt", (r) => r.robots ?? ""],
  ["sentPerSec", "sent/s", (r) => r.sentPerSec],
  ["sent", "sent", (r) => r.sent],
  ["done", "done", (r) => r.done],
  ["errors", "errors", (r) => r.errors],
  ["score", "activity", (r) => r.score.toFixed(1)],
];

const state = {
  historyPoints: 300,
  tickMs: 1000,
  rows: [],
  /** scope -> { t, sent, done, errors, delayMs, concurrency, active, marks } */
  series: new Map(),
  /** scope -> true while /series.json is being fetched */
  backfilling: new Set(),
  log: [],
  sortKey: "score",
  sortAsc: false,
  /** scope -> { card, plots } */
  cards: new Map(),
};

function ms(v) {
  return v >= 1000 ? `${(v / 1000).toFixed(1)}s` : `${Math.round(v)}ms`;
}

function emptySeries() {
  return {
    t: [],
    sent: [],
    done: [],
    errors: [],
    delayMs: [],
    concurrency: [],
    active: [],
    marks: [],
  };
}

function fromServer(s) {
  return { t: [...s.t], ...structuredClone(s.columns), marks: [...s.marks] };
}

function trim(s) {
  const extra = s.t.length - state.historyPoints;
  if (extra > 0) {
    for (const k of ["t", "sent", "done", "errors", "delayMs", "concurrency", "active"]) {
      s[k].splice(0, extra);
    }
  }
  const first = s.t[0];
  // A point stands for the tick that ends at its time.
  if (first !== undefined) s.marks = s.marks.filter((m) => m.at >= first * 1000 - state.tickMs);
}

function onHistory(h) {
  state.historyPoints = h.historyPoints;
  state.tickMs = h.tickMs;
  state.rows = h.rows;
  state.series = new Map(h.series.map((s) => [s.scope, fromServer(s)]));
  state.log = h.log.slice(-LOG_SHOWN);
  for (const { plots } of state.cards.values()) plots.forEach((p) => p.destroy());
  state.cards.clear();
  $("plots").textContent = "";
  renderTotals(h.totals);
  render();
}

function onSnapshot(snap) {
  const t = snap.at / 1000;
  for (const r of snap.rows) {
    let s = state.series.get(r.scope);
    if (s === undefined) state.series.set(r.scope, s = emptySeries());
    s.t.push(t);
    s.sent.push(r.sentPerSec);
    s.done.push(r.donePerSec);
    s.errors.push(null);
    s.delayMs.push(r.delayMs);
    s.concurrency.push(r.concurrency);
    s.active.push(r.active);
    const marks = snap.marks[r.scope];
    if (marks) s.marks.push(...marks);
    trim(s);
  }
  // Scopes the server no longer tracks are forgotten here too.
  const tracked = new Set(snap.rows.map((r) => r.scope));
  for (const scope of state.series.keys()) if (!tracked.has(scope)) state.series.delete(scope);
  state.rows = snap.rows;
  state.log.push(...snap.log);
  if (state.log.length > LOG_SHOWN) state.log.splice(0, state.log.length - LOG_SHOWN);
  renderTotals(snap.totals);
  render();
}

function renderTotals(t) {
  const items = [
    ["elapsed", ms(t.elapsedMs)],
    ["sent", t.sent],
    ["done", t.done],
    ["errors", t.errors],
    ["retries", t.retries],
    ["backoffs", t.backoffs],
    ["holds", t.holds],
    ["in flight", t.inFlight],
    ["waiting", t.held],
    ["scopes", t.scopes],
    ["tracked", t.tracked],
  ];
  $("totals").replaceChildren(...items.map(([k, v]) => {
    const span = document.createElement("span");
    span.append(`${k} `);
    const b = document.createElement("b");
    b.textContent = String(v);
    span.append(b);
    return span;
  }));
}

function visibleRows() {
  const q = $("search").value.trim().toLowerCase();
  return q === ""
    ? state.rows
    : state.rows.filter((r) => r.label.toLowerCase().includes(q) || r.scope.includes(q));
}

function render() {
  const rows = visibleRows();
  $("shown").textContent = `${rows.length} of ${state.rows.length} tracked scopes`;
  renderPlots(rows.slice(0, PLOTS_MAX));
  renderTable(rows);
  renderLog();
}

function renderPlots(rows) {
  const wanted = new Set(rows.map((r) => r.scope));
  for (const [scope, { card, plots }] of state.cards) {
    if (!wanted.has(scope)) {
      plots.forEach((p) => p.destroy());
      card.remove();
      state.cards.delete(scope);
    }
  }
  const container = $("plots");
  for (const r of rows) {
    const s = state.series.get(r.scope);
    if (s === undefined) continue;
    // A scope that became interesting after the page connected: its earlier points.
    if (s.t.length < state.historyPoints && !s.backfilled) backfill(r.scope);
    let entry = state.cards.get(r.scope);
    if (entry === undefined) {
      entry = makeCard(r);
      state.cards.set(r.scope, entry);
    }
    container.append(entry.card); // keeps the cards in ranking order
    const [rate, delay, conc] = entry.plots;
    rate.setData([s.t, s.sent, s.done]);
    delay.setData([s.t, s.delayMs]);
    conc.setData([s.t, s.concurrency, s.active]);
  }
}

function backfill(scope) {
  if (state.backfilling.has(scope)) return;
  state.backfilling.add(scope);
  fetch(`/series.json?scope=${encodeURIComponent(scope)}`)
    .then((res) => (res.ok ? res.json() : undefined))
    .then((full) => {
      const now = state.series.get(scope);
      if (full === undefined || now === undefined) return;
      const merged = fromServer(full);
      // Points that arrived while fetching.
      const last = merged.t[merged.t.length - 1] ?? -Infinity;
      const newer = now.t.findIndex((t) => t > last);
      if (newer >= 0) {
        for (const k of ["t", "sent", "done", "errors", "delayMs", "concurrency", "active"]) {
          merged[k].push(...now[k].slice(newer));
        }
      }
      merged.backfilled = true;
      trim(merged);
      state.series.set(scope, merged);
    })
    .catch(() => {})
    .finally(() => state.backfilling.delete(scope));
  const s = state.series.get(scope);
  if (s) s.backfilled = true;
}

function marksPlugin(scope) {
  return {
    hooks: {
      draw: [(u) => {
        const s = state.series.get(scope);
        if (!s) return;
        const { ctx, bbox } = u;
        ctx.save();
        ctx.lineWidth = 1;
        for (const m of s.marks) {
          const x = u.valToPos(m.at / 1000, "x", true);
          if (x < bbox.left || x > bbox.left + bbox.width) continue;
          ctx.strokeStyle = MARK_COLORS[m.kind] ?? "#888";
          ctx.beginPath();
          ctx.moveTo(x, bbox.top);
          ctx.lineTo(x, bbox.top + bbox.height);
          ctx.stroke();
        }
        ctx.restore();
      }],
    },
  };
}

function makeCard(r) {
  const card = document.createElement("div");
  card.className = "card";
  card.dataset.scope = r.scope;
  const h = document.createElement("h3");
  h.textContent = r.label;
  h.title = r.scope;
  card.append(h);
  const width = 320;
  const plot = (title, series) => {
    const el = document.createElement("div");
    card.append(el);
    return new uPlot(
      {
        title,
        width,
        height: 110,
        legend: { show: false },
        cursor: { show: false },
        plugins: [marksPlugin(r.scope)],
        scales: { x: { time: true } },
        axes: [{ size: 24, font: "10px sans-serif" }, { size: 40, font: "10px sans-serif" }],
        series: [{}, ...series],
      },
      [[], ...series.map(() => [])],
      el,
    );
  };
  const plots = [
    plot("sent / completed per s", [
      { label: "sent/s", stroke: "#27a" },
      { label: "done/s", stroke: "#2a7" },
    ]),
    plot("delay (ms)", [{ label: "delay", stroke: "#b70" }]),
    plot("concurrency limit / in flight", [
      { label: "limit", stroke: "#c33" },
      { label: "in flight", stroke: "#27a", fill: "rgba(34,119,170,.15)" },
    ]),
  ];
  return { card, plots };
}

function renderTable(rows) {
  const head = $("scopes").tHead.rows[0];
  if (head.cells.length === 0) {
    for (const [key, title] of COLUMNS) {
      const th = document.createElement("th");
      th.textContent = title;
      th.dataset.key = key;
      th.addEventListener("click", () => {
        if (state.sortKey === key) state.sortAsc = !state.sortAsc;
        else {
          state.sortKey = key;
          state.sortAsc = key === "label";
        }
        render();
      });
      head.append(th);
    }
  }
  for (const th of head.cells) {
    th.classList.toggle("sorted", th.dataset.key === state.sortKey);
    th.classList.toggle("asc", th.dataset.key === state.sortKey && state.sortAsc);
  }
  const key = state.sortKey;
  const value = (r) => key === "quota" ? (r.quota ? r.quota.used / r.quota.limit : -1) : r[key];
  const sorted = [...rows].sort((a, b) => {
    const x = value(a) ?? -Infinity, y = value(b) ?? -Infinity;
    const c = x < y ? -1 : x > y ? 1 : 0;
    return state.sortAsc ? c : -c;
  });
  $("scopes").tBodies[0].replaceChildren(...sorted.map((r) => {
    const tr = document.createElement("tr");
    if (r.backoffLevel > 0) tr.className = "backoff";
    for (const [, , cell] of COLUMNS) {
      const td = document.createElement("td");
      td.textContent = String(cell(r));
      tr.append(td);
    }
    return tr;
  }));
}

function renderLog() {
  const type = $("log-type").value;
  const q = $("search").value.trim().toLowerCase();
  const label = new Map(state.rows.map((r) => [r.scope, r.label]));
  const lines = state.log.filter((e) =>
    (type === "" || e.type === type) &&
    (q === "" || (e.scope ?? "").toLowerCase().includes(q) ||
      (label.get(e.scope) ?? "").toLowerCase().includes(q))
  );
  $("log").replaceChildren(
    ...lines.slice().reverse().map((e) => {
      const div = document.createElement("div");
      div.className = `k-${e.type}`;
      const scope = e.scope === undefined ? "" : `${label.get(e.scope) ?? e.scope} `;
      div.textContent = `${new Date(e.at).toISOString().slice(11, 19)} ${scope}${e.text}`;
      return div;
    }),
  );
}

async function main() {
  const config = await fetch("/config.json").then((r) => r.json());
  document.title = config.title;
  $("title").textContent = config.title;
  $("info").textContent = Object.entries(config.info).map(([k, v]) => `${k}: ${v}`).join("  ·  ");
  $("search").addEventListener("input", render);
  $("log-type").addEventListener("change", renderLog);
  const events = new EventSource("/events");
  events.addEventListener("history", (e) => onHistory(JSON.parse(e.data)));
  events.addEventListener("snapshot", (e) => onSnapshot(JSON.parse(e.data)));
  events.addEventListener("open", () => {
    $("status").textContent = "live";
    $("status").className = "live";
  });
  events.addEventListener("error", () => {
    $("status").textContent = "reconnecting…";
    $("status").className = "";
  });
}

main();
