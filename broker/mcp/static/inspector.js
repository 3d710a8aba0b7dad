// The tool inspector: pick an app and a tool, fill in a form made from its input schema, call it
// through the daemon (POST /api/inspect/call: cookie, Origin and CSRF token, the whole pipeline)
// and see the result as an agent gets it. Every value reaches the page as text or as an <img>
// whose source is a data: URL of an image MIME type; nothing is ever parsed as HTML.
// Checked by `tsc --checkJs --strict` together with status.js (whose globals it uses).
// @ts-check
"use strict";

/** @typedef {{name: string, app: string, tool: string, title: string | null, description: string, inputSchema: any}} ToolInfo */

const inspector = {
  /** @type {ToolInfo[]} */ tools: [],
  /** @type {string[]} */ apps: [],
  /** What the app offers of the kind picked (resources and templates, or prompts). @type {any[]} */ entries: [],
  /** @type {AbortController | null} */ abort: null,
  /** @type {number | null} */ callId: null,
  running: false,
  catalogKey: "",
};

/** @param {string} id @returns {HTMLSelectElement} */
function select(id) { return /** @type {HTMLSelectElement} */ (byId(id)); }

/** @param {HTMLSelectElement} element @param {string[]} values */
function options(element, values) {
  const chosen = element.value;
  element.replaceChildren(...values.map((value) => {
    const option = document.createElement("option");
    option.value = value;
    option.textContent = value;
    return option;
  }));
  if (values.includes(chosen)) element.value = chosen;
}

async function loadCatalog() {
  try {
    const response = await fetch("/api/inspect/catalog", { cache: "no-store" });
    if (!response.ok) {
      appsSeen = "";  // try again at the next poll
      return;
    }
    const catalog = await response.json();
    const key = JSON.stringify([catalog.apps, catalog.tools.map(/** @param {ToolInfo} t */ (t) => [t.name, t.inputSchema])]);
    if (key === inspector.catalogKey) return;
    inspector.catalogKey = key;
    inspector.tools = catalog.tools;
    inspector.apps = catalog.apps;
    options(select("inspect-app"), inspector.apps);
    pickApp();
  } catch (error) {
    appsSeen = "";  // status.js shows the banner; try again at the next poll
  }
}

function pickApp() {
  const app = select("inspect-app").value;
  const before = select("inspect-name").value;
  const kind = select("inspect-kind").value;
  if (kind !== "tool") {
    loadEntries(app, kind);
    return;
  }
  options(select("inspect-name"), inspector.tools.filter((t) => t.app === app).map((t) => t.tool));
  if (select("inspect-name").value !== before || byId("inspect-form").childElementCount === 0) pickTool();
}

/** An MCP request to an app's one-app scope, through the daemon (POST /api/inspect/mcp).
 * @param {string} app @param {string} method @param {Record<string, unknown>} params
 * @param {AbortSignal} [signal] */
async function mcp(app, method, params, signal) {
  /** @type {Record<string, string>} */
  const headers = { "X-Toolbridge-CSRF": page.csrf || "", "Content-Type": "application/json" };
  const response = await fetch("/api/inspect/mcp", { method: "POST", headers, signal,
                                                     body: JSON.stringify({ app, method, params }) });
  const answer = await response.json();
  if (!response.ok) throw new Error(String(answer.error));
  return answer;
}

/** The app's resources (and templates) or prompts, into the name picker.
 * @param {string} app @param {string} kind */
async function loadEntries(app, kind) {
  inspector.entries = [];
  try {
    if (kind === "resource") {
      const [listed, templates] = await Promise.all([mcp(app, "resources/list", {}),
                                                     mcp(app, "resources/templates/list", {})]);
      inspector.entries = [...((listed.result && listed.result.resources) || []),
                           ...((templates.result && templates.result.resourceTemplates) || [])];
    } else {
      const listed = await mcp(app, "prompts/list", {});
      inspector.entries = (listed.result && listed.result.prompts) || [];
    }
  } catch (error) { /* nothing to pick; the banner covers a daemon that is gone */ }
  options(select("inspect-name"), inspector.entries.map((e) => String(e.uri || e.uriTemplate || e.name)));
  pickTool();
}

/** @returns {ToolInfo | undefined} */
function currentTool() {
  const app = select("inspect-app").value;
  const name = select("inspect-name").value;
  return inspector.tools.find((t) => t.app === app && t.tool === name);
}

function pickTool() {
  const kind = select("inspect-kind").value;
  const form = byId("inspect-form");
  form.replaceChildren();
  if (kind !== "tool") {
    const name = select("inspect-name").value;
    const entry = inspector.entries.find((e) => String(e.uri || e.uriTemplate || e.name) === name);
    byId("inspect-description").textContent = entry ? [entry.title || entry.name, entry.description]
      .filter(Boolean).join(": ") : `This app offers no ${kind}.`;
    byId("inspect-schema").textContent = entry ? JSON.stringify(entry, null, 2) : "";
    if (!entry) return;
    if (kind === "resource") {  // a template's URI is filled in by hand
      const row = field("uri", { type: "string", default: name }, "uri", true);
      form.append(row);
    } else {
      /** @type {Record<string, any>} */
      const properties = {};
      for (const argument of entry.arguments || []) {
        properties[argument.name] = { type: "string", description: argument.description };
      }
      const required = (entry.arguments || []).filter(/** @param {any} a */ (a) => a.required)
        .map(/** @param {any} a */ (a) => a.name);
      form.append(...fieldsFor({ type: "object", properties, required }, ""));
    }
    return;
  }
  const tool = currentTool();
  byId("inspect-description").textContent = tool ? (tool.title ? `${tool.title}: ` : "") + tool.description : "No tool.";
  byId("inspect-schema").textContent = tool ? JSON.stringify(tool.inputSchema, null, 2) : "";
  if (tool) form.append(...fieldsFor(tool.inputSchema, ""));
}

// --- a form from a JSON schema -----------------------------------------------------------------

let fieldCount = 0;

/** The inputs for an object schema's properties; nested objects become fieldsets.
 * @param {any} schema @param {string} prefix @returns {HTMLElement[]} */
function fieldsFor(schema, prefix) {
  const properties = schema && typeof schema.properties === "object" ? schema.properties : {};
  const required = Array.isArray(schema && schema.required) ? schema.required : [];
  return Object.entries(properties).map(([key, sub]) => field(key, sub || {}, prefix ? `${prefix}.${key}` : key,
                                                               required.includes(key)));
}

/** @param {any} schema */
function typeOf(schema) {
  const type = Array.isArray(schema.type) ? schema.type.find(/** @param {string} t */ (t) => t !== "null") : schema.type;
  if (type) return String(type);
  if (Array.isArray(schema.enum)) return "enum";
  if (schema.properties) return "object";
  return "json";
}

/** @param {string} key @param {any} schema @param {string} path @param {boolean} required @returns {HTMLElement} */
function field(key, schema, path, required) {
  const type = typeOf(schema);
  if (type === "object" && schema.properties) {
    const box = document.createElement("fieldset");
    const legend = document.createElement("legend");
    legend.textContent = schema.title ? `${key} (${schema.title})` : key;
    if (required) legend.className = "required";
    box.dataset.object = path;
    box.append(legend, ...fieldsFor(schema, path));
    return box;
  }
  const row = document.createElement("div");
  row.className = "field";
  const label = document.createElement("label");
  const id = `inspect-field-${++fieldCount}`;
  label.htmlFor = id;
  label.textContent = key;
  if (required) label.className = "required";
  /** @type {HTMLInputElement | HTMLSelectElement | HTMLTextAreaElement} */
  let input;
  const def = schema.default;
  if (Array.isArray(schema.enum)) {
    const choice = document.createElement("select");
    const values = required ? schema.enum : ["", ...schema.enum];
    for (const value of values) {
      const option = document.createElement("option");
      option.value = value === "" ? "" : JSON.stringify(value);
      option.textContent = value === "" ? "(not set)" : String(value);
      choice.append(option);
    }
    if (def !== undefined) choice.value = JSON.stringify(def);
    choice.dataset.kind = "enum";
    input = choice;
  } else if (type === "boolean") {
    const box = document.createElement("input");
    box.type = "checkbox";
    box.checked = def === true;
    box.dataset.kind = "boolean";
    input = box;
  } else if (type === "number" || type === "integer") {
    const number = document.createElement("input");
    number.type = "number";
    if (type === "integer") number.step = "1";
    else number.step = "any";
    if (typeof schema.minimum === "number") number.min = String(schema.minimum);
    if (typeof schema.maximum === "number") number.max = String(schema.maximum);
    if (typeof def === "number") number.value = String(def);
    number.dataset.kind = type;
    input = number;
  } else if (type === "string") {
    const text = document.createElement("input");
    text.type = "text";
    if (typeof def === "string") text.value = def;
    text.dataset.kind = "string";
    input = text;
  } else {  // arrays and anything else: JSON text
    const area = document.createElement("textarea");
    area.rows = 2;
    area.placeholder = type === "array" ? "a JSON array, e.g. [1, 2]" : "JSON";
    if (def !== undefined) area.value = JSON.stringify(def);
    area.dataset.kind = "json";
    input = area;
  }
  input.id = id;
  input.name = path;
  input.required = required && type !== "boolean";
  row.append(label, input);
  if (schema.description || schema.title) {
    const help = document.createElement("span");
    help.className = "muted";
    help.textContent = [schema.title, schema.description].filter(Boolean).join(": ");
    row.append(help);
  }
  return row;
}

/** The arguments the form holds (dotted names are nested objects); empty optional fields are left out.
 * @returns {Record<string, unknown>} */
function formArguments() {
  /** @type {Record<string, any>} */
  const result = {};
  const form = byId("inspect-form");
  for (const element of form.querySelectorAll("input, select, textarea")) {
    const input = /** @type {HTMLInputElement} */ (element);
    const kind = input.dataset.kind;
    /** @type {unknown} */
    let value;
    if (kind === "boolean") value = input.checked;
    else if (input.value === "") continue;
    else if (kind === "number" || kind === "integer") value = Number(input.value);
    else if (kind === "enum" || kind === "json") {
      try { value = JSON.parse(input.value); } catch (error) {
        throw new Error(`${input.name} is not valid JSON`);
      }
    } else value = input.value;
    const parts = input.name.split(".");
    let into = result;
    for (const part of parts.slice(0, -1)) into = into[part] = into[part] || {};
    into[parts[parts.length - 1]] = value;
  }
  return result;
}

// --- calling, and the result as the agent gets it ----------------------------------------------

/** @param {string} text @param {string} [className] */
function resultLine(text, className) {
  const p = document.createElement("p");
  p.textContent = text;
  if (className) p.className = className;
  byId("inspect-result").append(p);
}

/** @param {any} block */
function showBlock(block) {
  const box = byId("inspect-result");
  if (block.type === "text") {
    const pre = document.createElement("pre");
    pre.textContent = String(block.text);
    box.append(pre);
  } else if (block.type === "image" && /^image\/(png|jpeg|gif|webp)$/.test(String(block.mimeType))
             && /^[A-Za-z0-9+/=\s]*$/.test(String(block.data))) {
    const image = document.createElement("img");
    image.alt = `image result (${block.mimeType})`;
    image.src = `data:${block.mimeType};base64,${block.data}`;  // img-src 'self' data: (CSP); never HTML
    box.append(image);
  } else if (block.type === "resource_link") {
    resultLine(`resource link: ${block.uri}${block.name ? ` (${block.name})` : ""}`);
  } else if (block.type === "resource" && block.resource) {
    resultLine(`embedded resource: ${block.resource.uri}`);
    if (typeof block.resource.text === "string") showBlock({ type: "text", text: block.resource.text });
  } else {
    resultLine(`${block.type} block${block.mimeType ? ` (${block.mimeType})` : ""}: not shown here`, "muted");
  }
}

/** @param {any} result */
function showResult(result) {
  if (result.isError) {
    const kind = result._meta && result._meta["toolbridge/errorKind"];
    resultLine(`Failed${kind ? ` (${kind})` : ""}. The agent is told:`, "error");
  }
  for (const block of result.content || []) showBlock(block);
  if (result.structuredContent !== undefined) {
    resultLine("structured content:", "muted");
    showBlock({ type: "text", text: JSON.stringify(result.structuredContent, null, 2) });
  }
}

/** A resources/read or prompts/get answer, as the agent gets it. @param {any} answer */
function showMcpAnswer(answer) {
  if (answer.error) {
    resultLine(`Failed: ${answer.error.message}`, "error");
    return;
  }
  const result = answer.result || {};
  for (const content of result.contents || []) {
    resultLine(`${content.uri}${content.mimeType ? ` (${content.mimeType})` : ""}`, "muted");
    if (typeof content.text === "string") showBlock({ type: "text", text: content.text });
    else if (typeof content.blob === "string") {
      if (String(content.mimeType).startsWith("image/")) showBlock({ type: "image", data: content.blob,
                                                                     mimeType: content.mimeType });
      else resultLine(`binary, ${Math.floor(content.blob.length * 3 / 4)} bytes`, "muted");
    }
  }
  for (const message of result.messages || []) {
    resultLine(`${message.role}:`, "muted");
    showBlock(message.content || {});
  }
}

/** @param {boolean} running */
function setRunning(running) {
  inspector.running = running;
  const call = /** @type {HTMLButtonElement} */ (byId("inspect-call"));
  const cancelButton = /** @type {HTMLButtonElement} */ (byId("inspect-cancel"));
  call.disabled = running || !page.online;
  cancelButton.disabled = !running || (inspector.callId === null && inspector.abort === null) || !page.online;
}

/** Read the resource or get the prompt picked; Cancel aborts the request (the daemon tells the app).
 * @param {string} kind @param {Record<string, unknown>} args */
async function readOrGet(kind, args) {
  const app = select("inspect-app").value;
  inspector.abort = new AbortController();
  setRunning(true);
  try {
    const answer = kind === "resource"
      ? await mcp(app, "resources/read", { uri: String(args.uri || select("inspect-name").value) }, inspector.abort.signal)
      : await mcp(app, "prompts/get", { name: select("inspect-name").value, arguments: args }, inspector.abort.signal);
    showMcpAnswer(answer);
  } catch (error) {
    resultLine(inspector.abort.signal.aborted ? "Cancelled." : String(error instanceof Error ? error.message : error),
               "error");
  } finally {
    inspector.abort = null;
    setRunning(false);
  }
}

async function callTool() {
  const tool = currentTool();
  const kind = select("inspect-kind").value;
  if ((kind === "tool" && !tool) || (kind !== "tool" && !select("inspect-name").value) || inspector.running) return;
  byId("inspect-result").replaceChildren();
  byId("inspect-progress").textContent = "";
  /** @type {unknown} */
  let args;
  try {
    const raw = /** @type {HTMLTextAreaElement} */ (byId("inspect-raw")).value.trim();
    args = raw ? JSON.parse(raw) : formArguments();
  } catch (error) {
    resultLine(String(error instanceof Error ? error.message : error), "error");
    return;
  }
  inspector.callId = null;
  if (kind !== "tool" || !tool) {
    await readOrGet(kind, /** @type {Record<string, unknown>} */ (args));
    return;
  }
  setRunning(true);
  try {
    const response = await post("/api/inspect/call", { name: tool.name, arguments: args });
    if (!response.ok || response.body === null) {
      const problem = await response.json().catch(() => ({ error: `HTTP ${response.status}` }));
      resultLine(String(problem.error), "error");
      return;
    }
    const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
    let buffer = "";
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      buffer += value;
      let newline;
      while ((newline = buffer.indexOf("\n")) >= 0) {
        const message = JSON.parse(buffer.slice(0, newline));
        buffer = buffer.slice(newline + 1);
        if (typeof message.id === "number") {
          inspector.callId = message.id;
          setRunning(true);
        } else if (message.progress !== undefined) {
          byId("inspect-progress").textContent = progressText(message);
        } else if (message.result !== undefined) {
          showResult(message.result);
        }
      }
    }
  } catch (error) {
    resultLine("The daemon stopped answering before the call ended.", "error");
  } finally {
    inspector.callId = null;
    setRunning(false);
  }
}

async function cancelCall() {
  if (inspector.abort !== null) {
    inspector.abort.abort();
    return;
  }
  if (inspector.callId === null) return;
  /** @type {HTMLButtonElement} */ (byId("inspect-cancel")).disabled = true;
  await post(`/api/calls/${inspector.callId}/cancel`).catch(() => null);
}

select("inspect-app").addEventListener("change", pickApp);
select("inspect-kind").addEventListener("change", pickApp);
select("inspect-name").addEventListener("change", pickTool);
byId("inspect-form").addEventListener("submit", (event) => { event.preventDefault(); callTool(); });
byId("inspect-call").addEventListener("click", callTool);
byId("inspect-cancel").addEventListener("click", cancelCall);
/** The apps and their tools as last seen: the catalog is fetched again when they change. */
let appsSeen = "";
page.listeners.push((state) => {
  if (!inspector.running) setRunning(false);
  const apps = JSON.stringify(state.apps.map(/** @param {any} a */ (a) => [a.label, a.tools]));
  if (apps !== appsSeen) {
    appsSeen = apps;
    loadCatalog();
  }
});
