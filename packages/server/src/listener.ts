// One HTTP listener that several parts of the proxy share: each part registers the paths it serves,
// as plain HTTP requests or as WebSocket upgrades. Refusals (404, 409, …) happen before the upgrade.
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import type { Duplex } from "node:stream";
import type { WebSocket, WebSocketServer } from "ws";
// The guard alone (its own entry): the multiplexer's index loads the codec, which the listening line must not wait for.
import { guardRefusal, type HostGuard } from "@diverge/multiplexer/guard";

/**
 * What a route says about an upgrade request: accept it, refuse it with a status, or not mine.
 * `prepare`, when given, loads what the accepting code needs; the upgrade completes once it has
 * resolved (the socket waits unread meanwhile), so the first connection waits for the load.
 */
export type UpgradeDecision =
  | { accept: (socket: WebSocket, request: IncomingMessage) => void; prepare?: () => Promise<unknown> | undefined }
  | { refuse: number }
  | undefined;

export interface UpgradeRoute {
  /** Called for every upgrade request; the first route that answers decides. */
  decide(pathname: string, request: IncomingMessage): UpgradeDecision;
}

export type RequestRoute = (request: IncomingMessage, response: ServerResponse, pathname: string) => boolean;

export interface ListenerOptions {
  readonly host?: string;
  readonly port?: number;
  /** Largest WebSocket message accepted, in bytes; a larger one ends that connection (close 1009). */
  readonly maxMessageBytes?: number;
  /** Largest request head (request line and headers), in bytes. Default Node's own (16 KiB). */
  readonly maxHeaderBytes?: number;
  /** When given, every request and upgrade is checked against it first (DNS-rebinding protection); a refusal is 403. */
  readonly guard?: HostGuard;
  /** Requests and upgrades wait (unanswered, unread) until `release()`: the routes are not added yet. */
  readonly held?: boolean;
}

// The Host/Origin check lives in @diverge/multiplexer so the provider's --serve-tools listener makes the same one.
export { guardRefusal, LOOPBACK_HOSTS, type HostGuard } from "@diverge/multiplexer/guard";

export const DEFAULT_MAX_MESSAGE_BYTES = 16 * 1024 * 1024;

// `ws` (and with it Node's TLS, crypto and zlib modules) is loaded on the first upgrade, not at
// start: a proxy nobody has connected to yet neither waits for it nor carries it.
let wsModule: Promise<typeof import("ws")> | undefined;
const loadWs = () => (wsModule ??= import("ws"));

export class RouteListener {
  readonly server: Server;
  private readonly upgrades: UpgradeRoute[] = [];
  private readonly requests: RequestRoute[] = [];
  private wss: WebSocketServer | undefined;
  private closed = false;
  /** What arrived while held: each entry serves one request or upgrade, or ends it when closing. */
  private holding: { serve: () => void; end: () => void }[] | undefined;

  constructor(readonly options: ListenerOptions = {}) {
    this.holding = options.held ? [] : undefined;
    this.server = createServer(options.maxHeaderBytes ? { maxHeaderSize: options.maxHeaderBytes } : {}, (request, response) => this.onRequest(request, response));
    this.server.on("upgrade", (request, socket, head) => this.onUpgrade(request, socket, head));
  }

  /** Serves what waited, in arrival order; from then on everything is served as it comes. */
  release(): void {
    const waiting = this.holding ?? [];
    this.holding = undefined;
    for (const entry of waiting) entry.serve();
  }

  addUpgradeRoute(route: UpgradeRoute): void {
    this.upgrades.push(route);
  }

  addRequestRoute(route: RequestRoute): void {
    this.requests.push(route);
  }

  async listen(): Promise<AddressInfo> {
    await new Promise<void>((resolve, reject) => {
      this.server.once("error", reject);
      this.server.listen(this.options.port ?? 0, this.options.host ?? "127.0.0.1", () => {
        this.server.off("error", reject);
        // Once listening, an error of the listener itself (EMFILE on accept, say) drops that one
        // connection; without a listener it would end the whole process.
        this.server.on("error", () => {});
        resolve();
      });
    });
    return this.server.address() as AddressInfo;
  }

  get port(): number {
    return (this.server.address() as AddressInfo).port;
  }

  async close(): Promise<void> {
    this.closed = true;
    for (const entry of this.holding?.splice(0) ?? []) entry.end();
    for (const client of this.wss?.clients ?? []) client.terminate();
    this.server.closeAllConnections();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }

  private onRequest(request: IncomingMessage, response: ServerResponse): void {
    if (this.holding) {
      this.holding.push({ serve: () => this.onRequest(request, response), end: () => response.destroy() });
      return;
    }
    const refusal = this.options.guard && guardRefusal(this.options.guard, request.headers);
    if (refusal) {
      // As the MCP SDK answers it: a JSON-RPC error with no id. The body is not read.
      response.writeHead(403, { "content-type": "application/json", connection: "close" }).end(JSON.stringify({ jsonrpc: "2.0", error: { code: -32000, message: refusal }, id: null }));
      return;
    }
    const pathname = pathOf(request);
    for (const route of this.requests) if (route(request, response, pathname)) return;
    // Nothing here reads a body: the connection ends after the refusal rather than reading one on.
    response.writeHead(this.upgrades.length > 0 ? 426 : 404, { "content-type": "text/plain", connection: "close" }).end(this.upgrades.length > 0 ? "WebSocket upgrade required\n" : "not found\n");
  }

  private onUpgrade(request: IncomingMessage, socket: Duplex, head: Buffer): void {
    socket.on("error", () => socket.destroy());
    if (this.holding) {
      this.holding.push({ serve: () => this.onUpgrade(request, socket, head), end: () => socket.destroy() });
      return;
    }
    if (this.options.guard && guardRefusal(this.options.guard, request.headers)) return refuse(socket, 403);
    const pathname = pathOf(request);
    for (const route of this.upgrades) {
      const decision = route.decide(pathname, request);
      if (!decision) continue;
      if ("refuse" in decision) return refuse(socket, decision.refuse);
      const prepared = decision.prepare?.();
      if (this.wss && !prepared) return this.complete(this.wss, decision.accept, request, socket, head);
      // Loading on first use: the socket stays unread (Node pauses it for the upgrade) until then.
      Promise.all([this.webSocketServer(), prepared]).then(
        ([wss]) => {
          if (this.closed) socket.destroy();
          else this.complete(wss, decision.accept, request, socket, head);
        },
        () => refuse(socket, 500),
      );
      return;
    }
    refuse(socket, 404);
  }

  private async webSocketServer(): Promise<WebSocketServer> {
    const { WebSocketServer } = await loadWs();
    // permessage-deflate stays off: small binary frames, and compression costs memory per socket.
    // UTF-8 of text messages goes unchecked: text carries no meaning on any path and is ignored, so
    // invalid UTF-8 in one must not end the connection (ws would close it with 1007).
    this.wss ??= new WebSocketServer({ noServer: true, perMessageDeflate: false, skipUTF8Validation: true, maxPayload: this.options.maxMessageBytes ?? DEFAULT_MAX_MESSAGE_BYTES });
    return this.wss;
  }

  private complete(wss: WebSocketServer, accept: (socket: WebSocket, request: IncomingMessage) => void, request: IncomingMessage, socket: Duplex, head: Buffer): void {
    wss.handleUpgrade(request, socket, head, (ws) => {
      ws.binaryType = "nodebuffer";
      // A socket error (a message over the limit, a protocol violation, a reset) ends that socket
      // with its close event; without a listener it would be thrown and end the whole process.
      ws.on("error", () => {});
      accept(ws, request);
    });
  }
}

const REASONS: Record<number, string> = { 400: "Bad Request", 403: "Forbidden", 404: "Not Found", 409: "Conflict", 426: "Upgrade Required", 500: "Internal Server Error" };

function refuse(socket: Duplex, status: number): void {
  const reason = REASONS[status] ?? "Refused";
  socket.end(`HTTP/1.1 ${status} ${reason}\r\nConnection: close\r\nContent-Type: text/plain\r\nContent-Length: ${reason.length + 1}\r\n\r\n${reason}\n`);
}

function pathOf(request: IncomingMessage): string {
  try {
    return new URL(request.url ?? "/", "http://proxy").pathname;
  } catch {
    return "";
  }
}
