/**
 * TLS on the app port of a real daemon (`serve --tls-cert/--tls-key`): the daemon's own
 * certificate pinned from runtime.json, a CA file with host-name checks, and a wrong CA refused.
 */
import assert from "node:assert/strict";
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { after, before, test } from "node:test";
import { App, ConnectTimeout } from "../src/index.js";
import { Daemon, capturingLogger, makeCertificates, tempHome } from "./helpers.js";

let daemon: Daemon;
let certs: ReturnType<typeof makeCertificates>;

before(async () => {
  const home = tempHome();
  certs = makeCertificates(home);
  // No Unix socket: it would be preferred (and is never TLS).
  daemon = await Daemon.start(home, ["--tls-cert", certs.cert, "--tls-key", certs.key, "--no-unix-socket"]);
});

after(async () => {
  await daemon?.stop();
});

function newApp(options: Partial<ConstructorParameters<typeof App>[0]> = {}): App {
  const app = new App({ name: "Secure", home: daemon.home, env: {}, logger: capturingLogger(), backoff: { initialMs: 20, capMs: 100 }, ...options });
  app.tool("echo", {}, async (args) => args);
  return app;
}

test("runtime.json says TLS: the app pins the daemon's certificate and registers", async () => {
  const runtime = JSON.parse(readFileSync(join(daemon.home, "runtime.json"), "utf8")) as { tls?: boolean; tlsCert?: string };
  assert.equal(runtime.tls, true);
  assert.ok(runtime.tlsCert);
  const app = newApp();
  try {
    const registered = await app.connect({ timeoutMs: 10_000 });
    assert.equal(registered.appLabel, "Secure");
  } finally {
    await app.close();
  }
});

test("a CA file verifies the daemon (host name included)", async () => {
  const app = newApp({ tlsCa: certs.ca });
  try {
    await app.connect({ timeoutMs: 10_000 });
    assert.equal(app.state, "connected");
  } finally {
    await app.close();
  }
});

test("a CA that did not sign the daemon's certificate is refused, and nothing registers", async () => {
  const app = newApp({ tlsCa: certs.otherCa });
  await assert.rejects(app.connect({ timeoutMs: 1500 }), (err: unknown) =>
    err instanceof ConnectTimeout && /cannot connect to toolbridge at 127\.0\.0\.1:\d+: .*certificate/i.test(err.message));
  assert.equal(app.state, "disconnected");
});

test("a pinned certificate that is not the daemon's is refused", async () => {
  // A home whose runtime.json names the daemon's port but another certificate to pin.
  const home = tempHome();
  const runtime = JSON.parse(readFileSync(join(daemon.home, "runtime.json"), "utf8")) as Record<string, unknown>;
  writeFileSync(join(home, "runtime.json"), JSON.stringify({ ...runtime, tlsCert: certs.otherCa }));
  writeFileSync(join(home, "token"), daemon.token);
  const app = newApp({ home });
  await assert.rejects(app.connect({ timeoutMs: 1500 }), (err: unknown) =>
    err instanceof ConnectTimeout && err.message.includes(`not the one pinned in ${certs.otherCa}`));
});
