// The status page: polls /api/status once a second and redraws the tables. No framework, no
// build step; every value goes into the page as text (textContent), never as HTML.
"use strict";

const POLL_MS = 1000;
let csrf = null;

function cell(row, text, className) {
  const td = row.insertCell();
  td.textContent = text === null || text === undefined ? "" : String(text);
  if (className) td.className = className;
  return td;
}

function fill(tableId, items, emptyText, addRow) {
  const body = document.querySelector(`#${tableId} tbody`);
  body.replaceChildren();
  if (items.length === 0) {
    const row = body.insertRow();
    row.className = "empty";
    const td = cell(row, emptyText);
    td.colSpan = document.querySelector(`#${tableId} thead tr`).cells.length;
    return;
  }
  for (const item of items) addRow(body.insertRow(), item);
}

function ms(value) {
  if (value === null || value === undefined) return "";
  if (value < 1000) return `${value} ms`;
  if (value < 120000) return `${(value / 1000).toFixed(1)} s`;
  return `${Math.floor(value / 60000)} min ${Math.round((value % 60000) / 1000)} s`;
}

async function cancel(id, button) {
  button.disabled = true;
  button.textContent = "cancelling…";
  const response = await fetch(`/api/calls/${id}/cancel`, {
    method: "POST",
    headers: { "X-Toolbridge-CSRF": csrf },
  });
  button.textContent = response.ok ? "cancelled" : "already ended";
  poll();
}

function render(state) {
  csrf = state.csrf;
  const d = state.daemon;
  document.getElementById("daemon").textContent =
    `v${d.version} · pid ${d.pid} · up ${ms(d.uptimeSeconds * 1000)}`;

  fill("apps", state.apps, "No app is connected.", (row, app) => {
    cell(row, app.app);
    cell(row, app.instance);
    cell(row, app.version || "");
    cell(row, app.state === "connected" ? "connected" : `reconnecting (${app.graceSeconds ?? "?"} s left)`,
         app.state === "connected" ? "ok" : "bad");
    cell(row, app.inFlight, "num");
    cell(row, app.queued, "num");
    cell(row, app.tools.join(", "));
  });

  fill("calls", state.calls, "No call in flight.", (row, call) => {
    row.dataset.callId = call.id;
    cell(row, call.tool);
    cell(row, call.app);
    cell(row, call.agent || call.session || "");
    cell(row, ms(call.elapsedMs), "num");
    cell(row, ms(call.timeoutMs), "num");
    cell(row, call.progress === null ? "" : call.progress, "num");
    const button = document.createElement("button");
    button.textContent = "Cancel";
    button.addEventListener("click", () => cancel(call.id, button));
    row.insertCell().append(button);
  });

  document.getElementById("agents").textContent =
    `${state.agentConnections} stdio relay connection(s); ${state.sessions.length} MCP session(s) open.`;
  fill("sessions", state.sessions, "No agent is connected.", (row, s) => {
    cell(row, s.label);
    cell(row, s.transport);
    cell(row, [s.client, s.clientVersion].filter(Boolean).join(" "));
    cell(row, s.discovery ? "discovery" : "all tools");
    cell(row, s.inFlight, "num");
    cell(row, s.idleSeconds === null ? "" : ms(s.idleSeconds * 1000), "num");
  });

  fill("recent", state.recent, "No call yet.", (row, c) => {
    cell(row, new Date(c.at * 1000).toLocaleTimeString());
    cell(row, c.tool);
    cell(row, c.app);
    cell(row, c.agent || c.session || "");
    cell(row, ms(c.durationMs), "num");
    cell(row, c.outcome, c.outcome === "ok" ? "ok" : "bad");
    cell(row, c.message || "");
  });

  fill("tools", state.tools, "No tool has been called yet.", (row, t) => {
    cell(row, t.tool);
    cell(row, t.calls, "num");
    cell(row, t.failures, t.failures ? "num bad" : "num");
    cell(row, ms(t.meanMs), "num");
    cell(row, ms(t.maxMs), "num");
  });
}

async function poll() {
  const live = document.getElementById("live");
  try {
    const response = await fetch("/api/status", { cache: "no-store" });
    if (response.status === 403) {
      live.textContent = "logged out: run `toolbridge open` again";
      live.className = "bad";
      return false;
    }
    render(await response.json());
    live.textContent = `live · ${new Date().toLocaleTimeString()}`;
    live.className = "muted";
  } catch (error) {
    live.textContent = "the daemon is not answering (stopped?); retrying…";
    live.className = "bad";
  }
  return true;
}

async function loop() {
  if (await poll()) setTimeout(loop, POLL_MS);
}

loop();
