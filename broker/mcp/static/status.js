// The status page: polls /api/status once a second and redraws the charts and tables. No
// framework, no build step; every value goes into the page as text (textContent), never as
// HTML. Checked by `tsc --checkJs --strict` (tests/test_status_page_js.py).
// @ts-check
"use strict";

const POLL_MS = 1000;
/** How many in-flight/queued samples the load chart keeps (15 minutes of polls). */
const LOAD_SAMPLES = 900;

/** The page's shared state, read by inspector.js too. */
const page = {
  /** @type {string | null} */ csrf: null,
  /** @type {any} */ state: null,
  online: false,
  /** @type {Array<(state: any) => void>} */ listeners: [],
};

/** @param {string} id @returns {HTMLElement} */
function byId(id) {
  const element = document.getElementById(id);
  if (element === null) throw new Error(`the page has no #${id}`);
  return element;
}

/** @param {HTMLTableRowElement} row @param {unknown} text @param {string} [className] */
function cell(row, text, className) {
  const td = row.insertCell();
  td.textContent = text === null || text === undefined ? "" : String(text);
  if (className) td.className = className;
  return td;
}

/**
 * @template T
 * @param {string} tableId @param {T[]} items @param {string} emptyText
 * @param {(row: HTMLTableRowElement, item: T) => void} addRow
 */
function fill(tableId, items, emptyText, addRow) {
  const table = /** @type {HTMLTableElement} */ (byId(tableId));
  const body = table.tBodies[0];
  body.replaceChildren();
  if (items.length === 0) {
    const row = body.insertRow();
    row.className = "empty";
    cell(row, emptyText).colSpan = table.tHead ? table.tHead.rows[0].cells.length : 1;
    return;
  }
  for (const item of items) addRow(body.insertRow(), item);
}

/** @param {number | null | undefined} value */
function ms(value) {
  if (value === null || value === undefined) return "";
  if (value < 10) return `${value.toFixed(1)} ms`;
  if (value < 1000) return `${Math.round(value)} ms`;
  if (value < 120000) return `${(value / 1000).toFixed(1)} s`;
  return `${Math.floor(value / 60000)} min ${Math.round((value % 60000) / 1000)} s`;
}

/** @param {{progress: number, total: number | null, message: string | null} | null} p */
function progressText(p) {
  if (p === null) return "";
  const amount = p.total === null ? `${p.progress}` : `${p.progress}/${p.total}`;
  return p.message ? `${amount} ${p.message}` : amount;
}

/** A POST with the session's CSRF token (the daemon also checks the cookie and the Origin).
 * @param {string} url @param {unknown} [body] */
function post(url, body) {
  /** @type {Record<string, string>} */
  const headers = { "X-Toolbridge-CSRF": page.csrf || "" };
  if (body !== undefined) headers["Content-Type"] = "application/json";
  return fetch(url, { method: "POST", headers, body: body === undefined ? undefined : JSON.stringify(body) });
}

/** @param {number} id @param {HTMLButtonElement} button */
async function cancel(id, button) {
  button.disabled = true;
  button.textContent = "cancelling…";
  try {
    const response = await post(`/api/calls/${id}/cancel`);
    button.textContent = response.ok ? "cancelled" : "already ended";
  } catch (error) {
    button.textContent = "the daemon is not answering";
  }
  poll();
}

// --- honest state: a banner and every action disabled while the daemon is gone ---------------

/** @param {string | null} text */
function setOffline(text) {
  const banner = byId("banner");
  page.online = text === null;
  banner.hidden = page.online;
  banner.textContent = text || "";
  document.body.classList.toggle("offline", !page.online);
  for (const control of document.querySelectorAll("main button, main input, main select, main textarea")) {
    const element = /** @type {HTMLButtonElement} */ (control);
    if (!page.online) {
      if (!element.disabled) element.dataset.offline = "1";
      element.disabled = true;
    } else if (element.dataset.offline) {
      delete element.dataset.offline;
      element.disabled = false;
    }
  }
}

// --- charts (uPlot, vendored: static/uPlot.iife.min.js, its LICENSE beside it) ----------------

const PALETTE = ["#2b6cb0", "#d97706", "#b3261e", "#17702a", "#7c3aed", "#0e7490", "#be185d", "#4b5563"];
/** @type {Record<string, {chart: any, names: string}>} */
const charts = {};
/** @type {{t: number[], apps: Record<string, {inFlight: Array<number | null>, queued: Array<number | null>}>}} */
const load = { t: [], apps: {} };

/**
 * Draw (or update) one chart: x is Unix seconds, one line per named series.
 * @param {string} id @param {number[]} xs @param {Array<[string, Array<number | null>]>} lines
 * @param {boolean} [dots] mark each value: a series with gaps (latency) shows lone slots
 * @param {string} [emptyText] what to say instead of an empty chart
 */
function drawChart(id, xs, lines, dots = false, emptyText = "Nothing yet.") {
  const element = byId(id);
  if (lines.length === 0) {  // an axis with no line says nothing: say it in words
    if (charts[id]) charts[id].chart.destroy();
    delete charts[id];
    if (element.textContent !== emptyText) {
      const note = document.createElement("p");
      note.className = "muted";
      note.textContent = emptyText;
      element.replaceChildren(note);
    }
    return;
  }
  // @ts-ignore -- the vendored library's global (uPlot.iife.min.js)
  const UPlot = /** @type {any} */ (window.uPlot);
  if (UPlot === undefined) return;
  const names = lines.map(([name]) => name).join("\u0000");
  const data = [xs, ...lines.map(([, values]) => values)];
  const existing = charts[id];
  if (existing && existing.names === names) {
    existing.chart.setData(data);
    return;
  }
  if (existing) existing.chart.destroy();
  element.replaceChildren();
  const width = Math.max(240, element.clientWidth || 300);
  const options = {
    width, height: 160,
    legend: { show: lines.length > 0, live: false },
    scales: { x: { time: true }, y: { range: /** @param {any} u @param {number} min @param {number} max */
      (u, min, max) => [0, Math.max(1, max || 0)] } },
    axes: [{ stroke: "#888", grid: { stroke: "#8883" } }, { stroke: "#888", grid: { stroke: "#8883" }, size: 48 }],
    series: [{}, ...lines.map(([name], i) => ({ label: name, stroke: PALETTE[i % PALETTE.length], width: 1.5,
                                                spanGaps: false, points: { show: dots, size: 4 } }))],
  };
  charts[id] = { chart: new UPlot(options, data, element), names };
}

/** @param {any} state */
function renderCharts(state) {
  const timeline = state.timeline;
  const apps = Object.keys(timeline.apps);
  /** @type {Array<[string, Array<number | null>]>} */
  const rate = [["all apps", timeline.all.rate]];
  /** @type {Array<[string, Array<number | null>]>} */
  const latency = [["p50", timeline.all.p50], ["p95", timeline.all.p95]];
  if (apps.length > 1) {
    for (const app of apps) {
      rate.push([app || "(unknown tool)", timeline.apps[app].rate]);
      latency.push([`${app || "(unknown tool)"} p95`, timeline.apps[app].p95]);
    }
  }
  drawChart("chart-rate", timeline.t, rate);
  drawChart("chart-latency", timeline.t, latency, true);
  drawChart("chart-errors", timeline.t, Object.entries(timeline.errors), false, "No call failed in the last 15 minutes.");

  load.t.push(Math.floor(Date.now() / 1000));
  for (const app of state.apps) {
    if (!load.apps[app.label]) {
      load.apps[app.label] = { inFlight: load.t.slice(1).map(() => null), queued: load.t.slice(1).map(() => null) };
    }
  }
  for (const [label, series] of Object.entries(load.apps)) {
    const app = state.apps.find(/** @param {any} a */ (a) => a.label === label);
    series.inFlight.push(app ? app.inFlight : null);
    series.queued.push(app ? app.queued : null);
  }
  if (load.t.length > LOAD_SAMPLES) {
    load.t.shift();
    for (const series of Object.values(load.apps)) { series.inFlight.shift(); series.queued.shift(); }
  }
  /** @type {Array<[string, Array<number | null>]>} */
  const lines = [];
  for (const [label, series] of Object.entries(load.apps)) {
    lines.push([`${label} in flight`, series.inFlight], [`${label} queued`, series.queued]);
  }
  drawChart("chart-load", load.t, lines, false, "No app is connected.");
}

// --- filters over recent calls -------------------------------------------------------------

/** @param {string} name @returns {HTMLInputElement} */
function filterField(name) {
  const form = /** @type {HTMLFormElement} */ (byId("filters"));
  return /** @type {HTMLInputElement} */ (form.elements.namedItem(name));
}

/** Keep a filter's options in step with what the recent calls hold (its choice stays).
 * @param {string} name @param {string[]} values */
function setOptions(name, values) {
  const select = /** @type {HTMLSelectElement} */ (/** @type {unknown} */ (filterField(name)));
  const chosen = select.value;
  const wanted = ["", ...new Set(values.filter(Boolean))].sort();
  if (chosen && !wanted.includes(chosen)) wanted.push(chosen);
  const current = Array.from(select.options, (o) => o.value);
  if (current.join("\u0000") === wanted.join("\u0000")) return;
  select.replaceChildren(...wanted.map((value) => {
    const option = document.createElement("option");
    option.value = value;
    option.textContent = value || "all";
    return option;
  }));
  select.value = chosen;
}

/** @param {any} call */
function shown(call) {
  if (filterField("failed").checked && call.outcome === "ok") return false;
  for (const name of ["app", "tool"]) {
    const want = filterField(name).value;
    if (want && call[name] !== want) return false;
  }
  const agent = filterField("agent").value;
  if (agent && (call.agent || call.session || "") !== agent) return false;
  const search = filterField("search").value.trim().toLowerCase();
  if (search) {
    const text = [call.tool, call.app, call.agent, call.session, call.outcome, call.message].join(" ").toLowerCase();
    if (!text.includes(search)) return false;
  }
  return true;
}

function renderRecent() {
  const state = page.state;
  if (state === null) return;
  setOptions("app", state.recent.map(/** @param {any} c */ (c) => c.app));
  setOptions("tool", state.recent.map(/** @param {any} c */ (c) => c.tool));
  setOptions("agent", state.recent.map(/** @param {any} c */ (c) => c.agent || c.session || ""));
  const redacted = state.daemon.callLogRedact;
  fill("recent", state.recent.filter(shown), "No call (that matches).", (row, c) => {
    row.className = c.outcome === "ok" ? "" : "failed";
    cell(row, new Date(c.at * 1000).toLocaleTimeString(), "nowrap");
    cell(row, c.tool, "nowrap");
    cell(row, c.app, "nowrap");
    cell(row, c.agent || c.session || "", "nowrap");
    cell(row, ms(c.queuedMs), "num");
    cell(row, ms(c.runMs), "num");
    cell(row, c.outcome, c.outcome === "ok" ? "ok" : "bad");
    const why = cell(row, "", "why");
    if (c.outcome !== "ok") {
      const message = document.createElement("span");
      message.textContent = c.message || (redacted ? "(message withheld: call_log_redact is on)" : "");
      why.append(message);
      if (c.logs) {
        const hint = document.createElement("code");
        hint.className = "hint";
        hint.textContent = c.logs;
        hint.title = "the full record: run this in a terminal";
        why.append(" ", hint);
      }
    }
  });
}

// --- the tables ------------------------------------------------------------------------------

/** @param {any} state */
function render(state) {
  page.state = state;
  page.csrf = state.csrf;
  const d = state.daemon;
  byId("daemon").textContent = `v${d.version} · pid ${d.pid} · up ${ms(d.uptimeSeconds * 1000)}`;

  renderCharts(state);

  fill("calls", state.calls, "No call in flight.", (row, call) => {
    row.dataset.callId = String(call.id);
    cell(row, call.tool, "nowrap");
    cell(row, call.app, "nowrap");
    cell(row, call.agent || call.session || "", "nowrap");
    cell(row, ms(call.queuedMs), "num");
    cell(row, ms(call.runMs), "num");
    cell(row, ms(call.timeoutMs), "num");
    cell(row, progressText(call.progress), "progress");
    const button = document.createElement("button");
    button.textContent = "Cancel";
    button.disabled = !page.online;
    button.addEventListener("click", () => cancel(call.id, button));
    row.insertCell().append(button);
  });

  renderRecent();

  fill("tools", state.tools, "No tool has been called yet.", (row, t) => {
    cell(row, t.tool, "nowrap");
    cell(row, t.calls, "num");
    cell(row, t.failures, t.failures ? "num bad" : "num");
    cell(row, ms(t.p50Ms), "num");
    cell(row, ms(t.p95Ms), "num");
    cell(row, ms(t.p99Ms), "num");
    cell(row, ms(t.maxMs), "num");
  });

  fill("apps", state.apps, "No app is connected.", (row, app) => {
    cell(row, app.app, "nowrap");
    cell(row, app.instance, "nowrap");
    cell(row, app.version || "");
    cell(row, app.state === "connected" ? "connected" : `reconnecting (${app.graceSeconds ?? "?"} s left)`,
         app.state === "connected" ? "ok" : "bad");
    cell(row, app.inFlight, "num");
    cell(row, app.queued, "num");
    cell(row, app.tools.join(", "));
  });

  byId("agents").textContent =
    `${state.agentConnections} stdio relay connection(s); ${state.sessions.length} MCP session(s) open.`;
  fill("sessions", state.sessions, "No agent is connected.", (row, s) => {
    cell(row, s.label, "nowrap");
    cell(row, s.transport);
    cell(row, [s.client, s.clientVersion].filter(Boolean).join(" "), "nowrap");
    cell(row, s.mode === "code" ? "code mode" : s.mode === "discovery" ? "discovery" : s.mode);
    cell(row, s.inFlight, "num");
    cell(row, s.idleSeconds === null ? "" : ms(s.idleSeconds * 1000), "num");
  });
  for (const listener of page.listeners) listener(state);
}

async function poll() {
  const live = byId("live");
  try {
    const response = await fetch("/api/status", { cache: "no-store" });
    if (response.status === 403) {
      live.textContent = "logged out";
      live.className = "bad";
      setOffline("Logged out: the daemon restarted or the login expired. Run `toolbridge open` again "
                 + "(this page keeps checking and comes back by itself once you have).");
      return;
    }
    if (!response.ok) throw new Error(`HTTP ${response.status}`);
    const state = await response.json();
    if (!page.online) setOffline(null);
    render(state);
    live.textContent = `live · ${new Date().toLocaleTimeString()}`;
    // How many polls have been drawn (tests wait on it rather than on the clock).
    document.body.dataset.polls = String(Number(document.body.dataset.polls || "0") + 1);
    live.className = "muted";
  } catch (error) {
    live.textContent = "not answering";
    live.className = "bad";
    setOffline("The daemon is not answering (stopped, or this page lost it). Everything here is "
               + "disabled until it is back; this page keeps trying and recovers by itself.");
  }
}

async function loop() {
  await poll();
  setTimeout(loop, POLL_MS);
}

byId("filters").addEventListener("input", renderRecent);
byId("filters").addEventListener("submit", (event) => event.preventDefault());
loop();
