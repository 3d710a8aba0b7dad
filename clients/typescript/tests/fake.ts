/**
 * A scripted daemon on a real TCP socket, for what a real daemon never does: garbage, lines
 * over the limit, a close mid-line, odd versions. It records every line the app sends.
 */
import * as net from "node:net";

export class FakeDaemon {
  readonly received: Array<Record<string, unknown>> = [];
  private readonly sockets: net.Socket[] = [];
  private readonly listeners: Array<() => void> = [];
  private constructor(private readonly server: net.Server, readonly port: number,
                      private readonly onRegister: (socket: net.Socket, register: Record<string, unknown>) => void) {}

  static async start(onRegister: (socket: net.Socket, register: Record<string, unknown>) => void): Promise<FakeDaemon> {
    let fake: FakeDaemon | undefined;
    const server = net.createServer((socket) => fake!.accept(socket));
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    fake = new FakeDaemon(server, (server.address() as net.AddressInfo).port, onRegister);
    return fake;
  }

  private accept(socket: net.Socket): void {
    this.sockets.push(socket);
    socket.on("error", () => undefined);
    let buffer = "";
    socket.on("data", (chunk) => {
      buffer += chunk.toString("utf8");
      let at: number;
      while ((at = buffer.indexOf("\n")) >= 0) {
        const line = buffer.slice(0, at);
        buffer = buffer.slice(at + 1);
        const message = JSON.parse(line) as Record<string, unknown>;
        this.received.push(message);
        if (message.type === "register") this.onRegister(socket, message);
        for (const listener of this.listeners.splice(0)) listener();
      }
    });
    socket.on("close", () => {
      for (const listener of this.listeners.splice(0)) listener();
    });
  }

  /** Resolves once the app has sent a line matching `predicate`. */
  async waitFor(predicate: (m: Record<string, unknown>) => boolean): Promise<Record<string, unknown>> {
    for (;;) {
      const found = this.received.find(predicate);
      if (found !== undefined) return found;
      await new Promise<void>((resolve) => this.listeners.push(resolve));
    }
  }

  /** Resolves once the app's connection `index` has closed. */
  async waitClosed(index = 0): Promise<void> {
    while (this.sockets[index] === undefined || !this.sockets[index]!.destroyed && !this.sockets[index]!.readableEnded) {
      await new Promise<void>((resolve) => this.listeners.push(resolve));
    }
  }

  get connections(): number {
    return this.sockets.length;
  }

  async close(): Promise<void> {
    for (const socket of this.sockets) socket.destroy();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }
}

export function registered(extra: Record<string, unknown> = {}): string {
  return JSON.stringify({
    type: "registered", appId: "app-1", instanceId: "i", appLabel: "Fake", toolNames: { echo: "Fake__echo" },
    heartbeatIntervalMs: 5000, protocolVersion: 1, maxLineBytes: 1000, maxTools: 1000, maxSchemaBytes: 262144, ...extra,
  }) + "\n";
}
