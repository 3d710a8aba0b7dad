#!/usr/bin/env node
/**
 * A small "desktop-like" notes app in Node.js that offers its notes to AI agents through
 * toolbridge. The human side is a terminal prompt (`list`, `add <title>`, `show <id>`, `quit`);
 * the agent side is a handful of tools. Run it beside a daemon (`toolbridge serve`):
 *
 *     (cd clients/typescript && npm install && npm run build)
 *     node examples/node_notes_app/notes.mjs [--file notes.json]
 *
 * What it shows:
 * - tools with JSON Schemas, annotations (`readOnlyHint`, `destructiveHint`) and `pathGuard:
 *   false` for free text (a note may well mention `../docs`);
 * - progress and cancellation (`search_notes` reports progress and stops when its signal aborts);
 * - structured results (`stats` with an `outputSchema`) and app errors (`ToolError`);
 * - tools that come and go at runtime: `restore_note` exists only while the trash holds notes;
 * - the notes as resources (`notes://index`, the template `notes://note/{id}`), announced to
 *   subscribed agents when they change, and a `summarize` prompt (wire protocol v2);
 * - connection state shown to the user; a clean `goodbye` on quit (Ctrl-D, `quit`, SIGTERM).
 *
 * In your own app, import from the package: `import { App, ToolError } from "@toolbridge/app"`.
 */
import { readFileSync, writeFileSync } from "node:fs";
import { createInterface } from "node:readline";
import { setImmediate as tick } from "node:timers/promises";
import { App, ToolError } from "../../clients/typescript/dist/src/index.js";

const fileArg = process.argv.indexOf("--file");
const file = fileArg > 0 ? process.argv[fileArg + 1] : undefined;

/** The app's document: notes by id, and a trash. */
const state = { nextId: 1, notes: new Map(), trash: new Map() };

function load() {
  if (file) {
    try {
      const saved = JSON.parse(readFileSync(file, "utf8"));
      for (const note of saved.notes) state.notes.set(note.id, note);
      state.nextId = Math.max(0, ...saved.notes.map((n) => n.id)) + 1;
      return;
    } catch (err) {
      if (err.code !== "ENOENT") throw err;
    }
  }
  addNote("Groceries", "milk, eggs, coffee");
  addNote("Ideas", "a toolbridge client for every language");
}

function save() {
  if (file) writeFileSync(file, JSON.stringify({ notes: [...state.notes.values()] }, null, 2));
}

function addNote(title, body) {
  const note = { id: state.nextId++, title, body, updated: new Date().toISOString() };
  state.notes.set(note.id, note);
  save();
  return note;
}

function noteOrFail(id) {
  const note = state.notes.get(id);
  if (!note) throw new ToolError(`there is no note ${id}; call list_notes to see the ids`);
  return note;
}

const ID = { type: "integer", minimum: 1, description: "the note's id (from list_notes)" };
const object = (properties, required = []) => ({ type: "object", properties, required, additionalProperties: false });

const app = new App({ name: "Notes", appVersion: "node-notes 1.0" });

app.tool("list_notes", {
  description: "List the notes: id, title and when each was last changed",
  annotations: { readOnlyHint: true },
  inputSchema: object({}),
}, async () => [...state.notes.values()].map(({ id, title, updated }) => ({ id, title, updated })));

app.tool("read_note", {
  description: "Read one note's full text",
  annotations: { readOnlyHint: true },
  inputSchema: object({ id: ID }, ["id"]),
}, async ({ id }) => {
  const note = noteOrFail(id);
  return `# ${note.title}\n\n${note.body}`;
});

app.tool("create_note", {
  description: "Create a note; returns its id",
  inputSchema: object({ title: { type: "string", minLength: 1 }, body: { type: "string" } }, ["title"]),
  pathGuard: false, // free text: a note may quote a path like ../docs
}, async ({ title, body = "" }) => {
  const note = addNote(title, body);
  say(`agent created note ${note.id}: ${title}`);
  return { id: note.id };
});

app.tool("append_to_note", {
  description: "Append a paragraph to a note",
  inputSchema: object({ id: ID, text: { type: "string" } }, ["id", "text"]),
  pathGuard: false,
}, async ({ id, text }) => {
  const note = noteOrFail(id);
  note.body += `\n\n${text}`;
  note.updated = new Date().toISOString();
  save();
  app.resourceUpdated(`notes://note/${id}`); // agents that subscribed to this note hear of it
  return "appended";
});

app.tool("search_notes", {
  description: "Find the notes whose title or text contains the query (case-insensitive)",
  annotations: { readOnlyHint: true },
  inputSchema: object({ query: { type: "string", minLength: 1 } }, ["query"]),
}, async ({ query }, ctx) => {
  const notes = [...state.notes.values()];
  const found = [];
  for (const [index, note] of notes.entries()) {
    ctx.signal.throwIfAborted(); // cancelled or past its deadline: stop (nothing is sent)
    if (`${note.title}\n${note.body}`.toLowerCase().includes(query.toLowerCase())) found.push({ id: note.id, title: note.title });
    await ctx.reportProgress(index + 1, notes.length, `searched ${index + 1} of ${notes.length}`);
    await tick(); // a real app would read files here; let the event loop breathe
  }
  return found;
});

app.tool("stats", {
  description: "Count the notes and the words in them",
  annotations: { readOnlyHint: true },
  inputSchema: object({}),
  outputSchema: object({ notes: { type: "integer" }, words: { type: "integer" }, inTrash: { type: "integer" } }, ["notes", "words", "inTrash"]),
}, async () => {
  const words = [...state.notes.values()].reduce((sum, n) => sum + n.body.split(/\s+/).filter(Boolean).length, 0);
  const stats = { notes: state.notes.size, words, inTrash: state.trash.size };
  return { structuredContent: stats, data: stats };
});

app.tool("delete_note", {
  description: "Move a note to the trash (restore_note brings it back)",
  annotations: { destructiveHint: true },
  inputSchema: object({ id: ID }, ["id"]),
}, async ({ id }) => {
  const note = noteOrFail(id);
  state.notes.delete(id);
  state.trash.set(id, note);
  save();
  if (state.trash.size === 1) await app.addTools([restoreTool]); // the trash is no longer empty
  return `note ${id} moved to the trash`;
});

/** Offered only while the trash holds something: agents see the tool list change. */
const restoreTool = {
  name: "restore_note",
  description: "Bring a note back from the trash",
  inputSchema: object({ id: ID }, ["id"]),
  handler: async ({ id }) => {
    const note = state.trash.get(id);
    if (!note) throw new ToolError(`note ${id} is not in the trash (trash: ${[...state.trash.keys()].join(", ") || "empty"})`);
    state.trash.delete(id);
    state.notes.set(id, note);
    save();
    // After this call's answer has gone out: the trash is empty again, so the tool goes away.
    if (state.trash.size === 0) setImmediate(() => void app.removeTools(["restore_note"]).catch((err) => say(`! ${err.message}`)));
    return `note ${id} restored`;
  },
};

// --- the notes as resources, and a prompt (wire protocol v2) -------------------------------

app.resource("notes://index", { name: "index", mimeType: "text/markdown", description: "Every note's id and title" },
  async () => [...state.notes.values()].map((n) => `- ${n.id}: ${n.title}`).join("\n"));

app.resourceTemplate("notes://note/{id}", { name: "note", mimeType: "text/markdown", description: "One note by id" },
  async ({ id }) => {
    const note = noteOrFail(Number(id));
    return `# ${note.title}\n\n${note.body}`;
  });

app.prompt("summarize", {
  description: "Summarize one note",
  arguments: [{ name: "id", description: "the note's id", required: true }, { name: "style", description: "e.g. 'one line'" }],
}, async ({ id, style }) => {
  const note = noteOrFail(Number(id));
  return {
    description: `Summarize "${note.title}"`,
    messages: [
      { role: "user", content: { type: "resource", resource: { uri: `notes://note/${note.id}`, mimeType: "text/markdown", text: note.body } } },
      `Summarize the note above${style ? ` (${style})` : ""}.`,
    ],
  };
});

// --- the human side -----------------------------------------------------------------------

function say(line) {
  process.stdout.write(`${line}\n`);
}

app.on("state", (connection, lastError) => {
  if (connection === "connected") say(`● connected to toolbridge as ${app.registration?.appLabel}`);
  else if (connection === "reconnecting" || connection === "unauthorized") say(`○ ${connection}: ${lastError ?? ""}`);
  else if (connection === "failed") say(`✕ toolbridge refused this app: ${lastError}`);
});
app.on("error", (err) => say(`! ${err.message}`));

const prompt = createInterface({ input: process.stdin, terminal: false });
prompt.on("line", (line) => {
  const [command, ...rest] = line.trim().split(" ");
  if (command === "list") for (const n of state.notes.values()) say(`${n.id}\t${n.title}`);
  else if (command === "add" && rest.length) say(`added note ${addNote(rest.join(" "), "").id}`);
  else if (command === "show" && rest.length) {
    const note = state.notes.get(Number(rest[0]));
    say(note ? `# ${note.title}\n${note.body}` : "no such note");
  } else if (command === "quit") void quit();
  else if (command) say("commands: list | add <title> | show <id> | quit");
});
prompt.on("close", () => void quit()); // Ctrl-D, or the parent closed our stdin

let quitting = false;
async function quit() {
  if (quitting) return;
  quitting = true;
  await app.close(); // goodbye: the daemon frees the names at once
  say("bye");
  process.exit(0);
}
process.on("SIGINT", () => void quit());
process.on("SIGTERM", () => void quit());

load();
say(`Notes: ${state.notes.size} notes. Waiting for toolbridge (start it with \`toolbridge serve\`)...`);
app.connect().catch((err) => {
  if (quitting) return;
  say(`✕ ${err.message}`);
  process.exit(1);
});
