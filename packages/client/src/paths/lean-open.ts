// The paths transport opens a WebSocket for every answer (paths.md §4), so the opening handshake is
// on its hot path. `ws`'s client runs it through `http.request` (a ClientRequest, Node's HTTP parser,
// an IncomingMessage): ~900 µs of CPU per connection here, where the TCP connection itself costs
// ~330. This opener writes the upgrade request on a plain `net` socket, reads the 101 answer's head
// itself, and hands the socket to a `ws` WebSocket, which runs the connection from then on (framing,
// masking, ping and pong, the closing handshake) exactly as after its own handshake.
//
// It rests on two parts of `ws` that are not its documented API: `setSocket` (what `ws`'s own client
// and server call once a handshake is done) and `_isServer` (false: this end masks what it sends and
// expects unmasked frames). Both are the same from `ws` 8.18 (the lowest the range allows) to 8.23,
// and the consumer tests run a paths connection with the lowest and the newest `ws` the range allows;
// the default falls back to `ws`'s own client where `setSocket` or `emitClose` is missing.
import { createHash, randomBytes } from "node:crypto";
import { connect, type Socket } from "node:net";
import { unescape } from "node:querystring";
import WebSocket from "ws";

/** The GUID every server appends to the key before hashing it (RFC 6455 §1.3). */
const ACCEPT_GUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11";
/** The most bytes an answer's head may take: Node's own default bound on a message's headers. */
const MAX_HEAD_BYTES = 16 * 1024;
/** `ws`'s client defaults, so a connection opened here behaves as one `ws` opened. */
const CLIENT_OPTIONS = { autoPong: true, closeTimeout: 30_000, maxPendingAutoPongs: 60 };
const SOCKET_OPTIONS = {
  allowSynchronousEvents: true,
  maxBufferedChunks: 256 * 1024,
  maxFragments: 16 * 1024,
  maxPayload: 100 * 1024 * 1024,
  skipUTF8Validation: false,
};

/** The parts of `ws`'s WebSocket this opener uses beyond its public API. */
interface WsInternals {
  _isServer: boolean;
  _bufferedAmount: number;
  setSocket(socket: Socket, head: Buffer, options: typeof SOCKET_OPTIONS): void;
  emitClose(): void;
}

/** Whether the installed `ws` has what this opener needs. */
export const leanOpenAvailable = typeof (WebSocket.prototype as unknown as Partial<WsInternals>).setSocket === "function" && typeof (WebSocket.prototype as unknown as Partial<WsInternals>).emitClose === "function";

/** Why the server's answer to the upgrade request is not an opening; `undefined` when it is. */
export function refusalOf(head: string, key: string): string | undefined {
  const lines = head.split("\r\n");
  const status = /^HTTP\/1\.[01] (\d{3})(?: |$)/.exec(lines[0] ?? "");
  if (!status) return "Invalid HTTP response to the upgrade request";
  // The wording `ws` uses, so a refusal's status reads the same whichever client opened.
  if (status[1] !== "101") return `Unexpected server response: ${status[1]}`;
  const headers = new Map<string, string>();
  for (const line of lines.slice(1)) {
    const colon = line.indexOf(":");
    if (colon <= 0) return "Invalid header in the upgrade answer";
    const name = line.slice(0, colon).trim().toLowerCase();
    if (headers.has(name) && (name === "sec-websocket-accept" || name === "upgrade")) return `Duplicate ${name} header`;
    headers.set(name, line.slice(colon + 1).trim());
  }
  if (headers.get("upgrade")?.toLowerCase() !== "websocket") return "Invalid Upgrade header";
  if (headers.get("sec-websocket-accept") !== createHash("sha1").update(key + ACCEPT_GUID).digest("base64")) return "Invalid Sec-WebSocket-Accept header";
  // Nothing was asked for, so nothing may be agreed (RFC 6455 §4.1).
  if (headers.has("sec-websocket-protocol")) return "Server sent a subprotocol but none was requested";
  if (headers.has("sec-websocket-extensions")) return "Server sent a Sec-WebSocket-Extensions header but no extension was requested";
  return undefined;
}

/**
 * A `ws` WebSocket dialled over a plain `net` socket. Constructed with a `ws:` URL; its events are
 * `ws`'s: `upgrade` (with `{ socket }`, as `ws` gives the response), `open`, `message`, `error`, `close`.
 */
export class LeanWebSocket extends WebSocket {
  private tcp: Socket | undefined;

  constructor(url: string) {
    // `null`: no handshake of `ws`'s own (the form `ws`'s server uses for the connections it accepts).
    super(null as unknown as string, undefined, CLIENT_OPTIONS);
    const self = this as unknown as WsInternals;
    self._isServer = false;
    self._bufferedAmount = 0;
    const target = new URL(url);
    const key = randomBytes(16).toString("base64");
    const host = target.hostname.startsWith("[") ? target.hostname.slice(1, -1) : target.hostname;
    const tcp = connect({ host, port: Number(target.port || 80) });
    this.tcp = tcp;
    tcp.setNoDelay(true);
    // Credentials in the URL go as Basic authorization, unescaped, as `ws`'s own client sends them.
    const auth = target.username || target.password ? `Authorization: Basic ${Buffer.from(`${unescape(target.username)}:${unescape(target.password)}`).toString("base64")}\r\n` : "";
    tcp.write(`GET ${target.pathname}${target.search} HTTP/1.1\r\nHost: ${target.host}\r\n${auth}Connection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: ${key}\r\n\r\n`);
    let got: Buffer | undefined;
    const fail = (message: string) => {
      tcp.off("data", onData);
      tcp.off("close", onClose);
      tcp.destroy();
      this.tcp = undefined;
      if (this.readyState !== WebSocket.CONNECTING) return;
      this.emit("error", new Error(message));
      self.emitClose();
    };
    const onData = (chunk: Buffer) => {
      got = got ? Buffer.concat([got, chunk]) : chunk;
      const end = got.indexOf("\r\n\r\n");
      if (end < 0) {
        if (got.length > MAX_HEAD_BYTES) fail("The upgrade answer's head is too large");
        return;
      }
      const refusal = refusalOf(got.subarray(0, end).toString("latin1"), key);
      if (refusal !== undefined) return fail(refusal);
      tcp.off("data", onData);
      tcp.off("close", onClose);
      tcp.off("error", onError);
      this.tcp = undefined;
      // Bytes after the head are the server's first frames: `ws` reads them before the socket's next.
      const head = got.subarray(end + 4);
      this.emit("upgrade", { socket: tcp });
      self.setSocket(tcp, head, SOCKET_OPTIONS);
    };
    const onClose = () => fail("Socket closed before the upgrade was answered");
    const onError = (error: Error) => fail(error.message);
    tcp.on("data", onData);
    tcp.on("close", onClose);
    tcp.on("error", onError);
  }

  override close(code?: number, reason?: string | Buffer): void {
    if (this.readyState === WebSocket.CONNECTING) return this.abandon();
    super.close(code, reason);
  }

  override terminate(): void {
    if (this.readyState === WebSocket.CONNECTING) return this.abandon();
    super.terminate();
  }

  /** Ends an opening still under way: as `ws` does, an error and then the close (1006). */
  private abandon(): void {
    const tcp = this.tcp;
    this.tcp = undefined;
    tcp?.removeAllListeners("data").removeAllListeners("close").on("error", () => {});
    tcp?.destroy();
    if (this.readyState !== WebSocket.CONNECTING) return;
    this.emit("error", new Error("WebSocket was closed before the connection was established"));
    (this as unknown as WsInternals).emitClose();
  }
}

/**
 * The default constructor: the lean opener for `ws:` URLs where the installed `ws` allows it, `ws`'s
 * own client otherwise (`wss:`, which needs TLS, among them).
 */
export function defaultWebSocketFor(url: string): WebSocket {
  return leanOpenAvailable && url.startsWith("ws:") ? new LeanWebSocket(url) : new WebSocket(url);
}
