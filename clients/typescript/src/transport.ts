/**
 * Opening the byte stream to the daemon: its Unix domain socket when runtime.json names one,
 * else TCP, with TLS when the address asks for it (as `app_client.transport` and `.tls`).
 *
 * TLS pinning: for a daemon whose runtime.json says `"tls": true`, the client trusts exactly the
 * certificate(s) in the `tlsCert` file — the peer's certificate must be byte-for-byte one of
 * them; the host name is not checked (the pinned certificate, whose key only the daemon holds,
 * proves the peer). With a CA file (`tlsCa`) or `TOOLBRIDGE_TLS=1`, Node's normal verification
 * applies, host name included.
 */
import { X509Certificate } from "node:crypto";
import { readFileSync } from "node:fs";
import * as net from "node:net";
import * as tls from "node:tls";
import type { DaemonAddress } from "./discovery.js";

function pemCertificates(path: string): Buffer[] {
  const text = readFileSync(path, "utf8");
  const blocks = text.match(/-----BEGIN CERTIFICATE-----[\s\S]+?-----END CERTIFICATE-----/g) ?? [];
  if (blocks.length === 0) throw new Error(`${path} holds no PEM certificate`);
  return blocks.map((pem) => new X509Certificate(pem).raw);
}

function waitConnected(socket: net.Socket, event: string, signal: AbortSignal): Promise<net.Socket> {
  return new Promise((resolve, reject) => {
    const onAbort = (): void => {
      socket.destroy();
      reject(signal.reason instanceof Error ? signal.reason : new Error("aborted"));
    };
    const cleanup = (): void => {
      socket.off(event, onOk);
      socket.off("error", onError);
      signal.removeEventListener("abort", onAbort);
    };
    const onOk = (): void => {
      cleanup();
      // Until the session attaches its own listener, an error must not go unheard: Node throws
      // an 'error' event nobody listens to, which would crash the host app.
      socket.on("error", () => undefined);
      resolve(socket);
    };
    const onError = (err: Error): void => {
      cleanup();
      socket.destroy();
      reject(err);
    };
    if (signal.aborted) return onAbort();
    socket.once(event, onOk);
    socket.once("error", onError);
    signal.addEventListener("abort", onAbort, { once: true });
  });
}

/** Open a TCP (or TLS) connection to `address`; rejects on refusal, certificate mismatch or `signal`. */
export async function connectTcp(address: DaemonAddress, signal: AbortSignal): Promise<net.Socket> {
  if (!address.tls) {
    return waitConnected(net.connect({ host: address.host, port: address.port }), "connect", signal);
  }
  if (address.tlsPin !== undefined) {
    const pinned = pemCertificates(address.tlsPin);
    const socket = tls.connect({ host: address.host, port: address.port, rejectUnauthorized: false, minVersion: "TLSv1.2" });
    await waitConnected(socket, "secureConnect", signal);
    const peer = socket.getPeerCertificate();
    if (!peer || !peer.raw || !pinned.some((cert) => cert.equals(peer.raw))) {
      socket.destroy();
      throw new Error(`the daemon's certificate is not the one pinned in ${address.tlsPin}`);
    }
    return socket;
  }
  const options: tls.ConnectionOptions = { host: address.host, port: address.port, minVersion: "TLSv1.2" };
  if (!net.isIP(address.host)) options.servername = address.host;
  if (address.tlsCa !== undefined) options.ca = readFileSync(address.tlsCa);
  return waitConnected(tls.connect(options), "secureConnect", signal);
}

/** Open a stream to the daemon: its Unix socket when `address.socket` names one (falling back to TCP). */
export async function connectDaemon(address: DaemonAddress, signal: AbortSignal): Promise<{ socket: net.Socket; via: string }> {
  if (address.socket !== undefined && process.platform !== "win32") {
    try {
      return { socket: await waitConnected(net.connect({ path: address.socket }), "connect", signal), via: address.socket };
    } catch (err) {
      if (signal.aborted) throw err;
      // A stale socket file or an older daemon: TCP below.
    }
  }
  return { socket: await connectTcp(address, signal), via: `${address.host}:${address.port}` };
}
