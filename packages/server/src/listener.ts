// One HTTP listener that several parts of the proxy share: each part registers the paths it serves,
// as plain HTTP requests or as WebSocket upgrades. Refusals (404, 409, …) happen before the upgrade.
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import type { Duplex } from "node:stream";
import { WebSocketServer, type WebSocket } from "ws";
import { guardRefusal, type HostGuard } from "@diverge/multiplexer";

/** What a route says about an upgrade request: accept it, refuse it with a status, or not mine. */
export type UpgradeDecision = { accept: (socket: WebSocket, request: IncomingMessage) => void } | { refuse: number } | undefined;

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
}

// The Host/Origin check lives in @diverge/multiplexer so the provider's --serve-tools listener makes the same one.
export { guardRefusal, LOOPBACK_HOSTS, type HostGuard } from "@diverge/multiplexer";

export const DEFAULT_MAX_MESSAGE_BYTES = 16 * 1024 * 1024;

export class RouteListener {
  readonly server: Server;
  private readonly upgrades: UpgradeRoute[] = [];
  private readonly requests: RequestRoute[] = [];
  private readonly wss: WebSocketServer;

  constructor(readonly options: ListenerOptions = {}) {
    // permessage-deflate stays off: small binary frames, and compression costs memory per socket.
    // UTF-8 of text messages goes unchecked: text carries no meaning on any path and is ignored, so
    // invalid UTF-8 in one must not end the connection (ws would close it with 1007).
    this.wss = new WebSocketServer({ noServer: true, perMessageDeflate: false, skipUTF8Validation: true, maxPayload: options.maxMessageBytes ?? DEFAULT_MAX_MESSAGE_BYTES });
    this.server = createServer(options.maxHeaderBytes ? { maxHeaderSize: options.maxHeaderBytes } : {}, (request, response) => this.onRequest(request, response));
    this.server.on("upgrade", (request, socket, head) => this.onUpgrade(request, socket, head));
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
    for (const client of this.wss.clients) client.terminate();
    this.server.closeAllConnections();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }

  private onRequest(request: IncomingMessage, response: ServerResponse): void {
    const refusal = this.options.guard && guardRefusal(this.options.guard, request.headers);
    if (refusal) {
      // As the MCP SDK answers it: a JSON-RPC error with no id. The body is not read.
      response.writeHead(403, { "content-type": "application/json", connection: "close" }).end(JSON.stringify({ jsonrpc: "2.0", error: { code: -32000, message: refusal }, id: null }));
      return;
    }
    const pathname = pathOf(request);
    for (const route of this.requests) if (route(request, response, pathname)) return;
    response.writeHead(this.upgrades.length > 0 ? 426 : 404, { "content-type": "text/plain" }).end(this.upgrades.length > 0 ? "WebSocket upgrade required\n" : "not found\n");
  }

  private onUpgrade(request: IncomingMessage, socket: Duplex, head: Buffer): void {
    socket.on("error", () => socket.destroy());
    if (this.options.guard && guardRefusal(this.options.guard, request.headers)) return refuse(socket, 403);
    const pathname = pathOf(request);
    for (const route of this.upgrades) {
      const decision = route.decide(pathname, request);
      if (!decision) continue;
      if ("refuse" in decision) return refuse(socket, decision.refuse);
      this.wss.handleUpgrade(request, socket, head, (ws) => {
        ws.binaryType = "nodebuffer";
        // A socket error (a message over the limit, a protocol violation, a reset) ends that socket
        // with its close event; without a listener it would be thrown and end the whole process.
        ws.on("error", () => {});
        decision.accept(ws, request);
      });
      return;
    }
    refuse(socket, 404);
  }
}

const REASONS: Record<number, string> = { 400: "Bad Request", 403: "Forbidden", 404: "Not Found", 409: "Conflict", 426: "Upgrade Required" };

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
