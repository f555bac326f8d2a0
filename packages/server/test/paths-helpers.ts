// A provider written by hand over raw `ws`, so the tests can break every rule on purpose: cut paths
// abruptly, close with no message, send text, send malformed answers. Real sockets on 127.0.0.1.
import { request as httpRequest } from "node:http";
import { randomBytes } from "node:crypto";
import { WebSocket } from "ws";
import { decodeRequestsAsk, type RequestsAsk } from "@diverge/codec";
import { checkMcp } from "@diverge/codec/mcp";
import { startProxy, type ProxyOptions, type RunningProxy } from "../src/index.js";

export async function testProxy(options: ProxyOptions = {}): Promise<RunningProxy> {
  return startProxy({ port: 0, programPort: 0, pgPort: 0, secretsGate: false, ...options });
}

/** Resolves with the HTTP status of a real upgrade attempt: 101 (then the socket is closed cleanly), or the refusal. */
export function upgradeStatus(port: number, path: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const socket = new WebSocket(`ws://127.0.0.1:${port}${path}`);
    socket.on("unexpected-response", (_request, response) => {
      resolve(response.statusCode ?? 0);
      response.resume();
      socket.terminate();
    });
    socket.on("open", () => {
      resolve(101);
      socket.close();
    });
    socket.on("error", (error) => reject(error));
  });
}

/** A raw HTTP upgrade request, answered or refused, without the `ws` client in the way. */
export function rawUpgradeStatus(port: number, path: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const req = httpRequest({
      host: "127.0.0.1",
      port,
      path,
      headers: { Connection: "Upgrade", Upgrade: "websocket", "Sec-WebSocket-Version": "13", "Sec-WebSocket-Key": randomBytes(16).toString("base64") },
    });
    req.on("upgrade", (response, socket) => {
      socket.destroy();
      resolve(response.statusCode ?? 0);
    });
    req.on("response", (response) => {
      response.resume();
      resolve(response.statusCode ?? 0);
    });
    req.on("error", reject);
    req.end();
  });
}

/** Opens a WebSocket and resolves when it is open. */
export function openWs(port: number, path: string): Promise<WebSocket> {
  return new Promise((resolve, reject) => {
    const socket = new WebSocket(`ws://127.0.0.1:${port}${path}`);
    socket.once("open", () => resolve(socket));
    socket.once("unexpected-response", (_request, response) => reject(new Error(`refused with ${response.statusCode}`)));
    socket.once("error", reject);
  });
}

/** Resolves with the close code once the socket has closed. */
export function closed(socket: WebSocket): Promise<number> {
  if (socket.readyState === WebSocket.CLOSED) return Promise.resolve(1005);
  return new Promise((resolve) => socket.once("close", (code) => resolve(code)));
}

/** Sends `frame` (if any) on the answer path, then closes cleanly and waits for the close. */
export async function answerPath(port: number, path: string, ...frames: (Uint8Array | string)[]): Promise<void> {
  const socket = await openWs(port, path);
  for (const frame of frames) socket.send(frame);
  socket.close();
  await closed(socket);
}

/** Opens the answer path, sends `frames`, then cuts the connection without a Close frame. */
export async function cutPath(port: number, path: string, ...frames: Uint8Array[]): Promise<void> {
  const socket = await openWs(port, path);
  for (const frame of frames) await new Promise<void>((resolve, reject) => socket.send(frame, (error) => (error ? reject(error) : resolve())));
  // Let the bytes reach the proxy before the cut, so "after the message" really is after it.
  if (frames.length > 0) await delay(20);
  socket.terminate();
  await closed(socket);
}

export const delay = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/** `/requests` held by the test: every ask decoded, in arrival order. */
export class RequestsLine {
  readonly asks: RequestsAsk[] = [];
  private readonly waiting: (() => void)[] = [];
  private read = 0;

  private constructor(readonly socket: WebSocket) {
    // Listening before the open: the first asks can arrive with the handshake's last bytes.
    socket.on("message", (data, isBinary) => {
      if (!isBinary) return;
      this.asks.push(decodeRequestsAsk(new Uint8Array(data as Buffer), { check: checkMcp }));
      for (const wake of this.waiting.splice(0)) wake();
    });
  }

  static async open(port: number): Promise<RequestsLine> {
    const line = new RequestsLine(new WebSocket(`ws://127.0.0.1:${port}/requests`));
    await new Promise<void>((resolve, reject) => {
      line.socket.once("open", () => resolve());
      line.socket.once("unexpected-response", (_request, response) => reject(new Error(`refused with ${response.statusCode}`)));
      line.socket.once("error", reject);
    });
    return line;
  }

  /** The next ask not yet taken, waiting for it if needed. */
  async next(): Promise<RequestsAsk> {
    while (this.read >= this.asks.length) await new Promise<void>((resolve) => this.waiting.push(resolve));
    return this.asks[this.read++]!;
  }

  /** The next ask of kinds 0 to 3, skipping (and returning in `skipped`) notification asks. */
  async nextExchange(skipped: RequestsAsk[] = []): Promise<RequestsAsk> {
    for (;;) {
      const ask = await this.next();
      if (ask.variant !== "McpNotifications") return ask;
      skipped.push(ask);
    }
  }

  get unread(): number {
    return this.asks.length - this.read;
  }

  async close(): Promise<void> {
    this.socket.close();
    await closed(this.socket);
  }

  async cut(): Promise<void> {
    this.socket.terminate();
    await closed(this.socket);
  }
}

export const PATH_OF: Record<string, string> = {
  McpListTools: "/mcp/list-tools",
  McpListResources: "/mcp/list-resources",
  McpCallTool: "/mcp/call-tool",
  McpReadResource: "/mcp/read-resource",
  McpNotifications: "/mcp/notifications",
};

export function pathOf(ask: RequestsAsk): string {
  return `${PATH_OF[ask.variant]}/${ask.channel}`;
}

/** Captures the rejection of a promise, failing if it resolves. Call it when the promise is made. */
export function rejection(promise: Promise<unknown>): Promise<any> {
  return promise.then(
    () => {
      throw new Error("expected a rejection, got a result");
    },
    (error: unknown) => error,
  );
}
