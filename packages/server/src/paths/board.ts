// The asking machinery of the many-paths transport: the one `/requests` connection, the queue of asks
// waiting for it, the channels the proxy has announced, and the answer paths the provider opens.
//
// Seed 000's rules that live here:
// - one `/requests` connection at a time; a second is refused with 409 before the upgrade;
// - channels are minted in ascending order (one counter for the proxy's life, from 1, never reused);
// - asks made while no `/requests` connection is open wait for the next one;
// - an ask whose `/requests` connection ended before its path opened is asked again on the next
//   connection under a fresh channel (the old channel is forgotten, so opening it later is a 404);
// - an answer path naming a channel never announced, or one of another kind, is a 404; a second
//   opening of a known channel is a 409; every refusal happens before the upgrade;
// - text messages are ignored everywhere; nothing times out.
import type { IncomingMessage } from "node:http";
import type { WebSocket } from "ws";
import type { RequestsAsk } from "@diverge/codec";
import { requestsAskExchanges } from "@diverge/codec/exchanges";
import type { UpgradeDecision, UpgradeRoute } from "../listener.js";

/** The kinds of `/requests`, by the names the codec gives them. */
export type RequestsKind = RequestsAsk["variant"];

/** The answer path of each kind up to its channel, e.g. `/vault/get/`, from the generated exchange table. */
export const ANSWER_PATH_PREFIX: Readonly<Record<RequestsKind, string>> = Object.fromEntries(
  Object.values(requestsAskExchanges).map((x) => [x.kindName, x.pathPrefix]),
) as Record<RequestsKind, string>;

const KIND_OF_PREFIX = new Map<string, RequestsKind>(Object.entries(ANSWER_PATH_PREFIX).map(([kind, prefix]) => [prefix, kind as RequestsKind]));

/** How an answer path ended, as the proxy saw it. */
export type PathEnding =
  /** A Close frame arrived (from the provider, or in reply to the proxy's own). */
  | { readonly how: "clean" }
  /** The connection ended any other way: reset, EOF without Close, a protocol error, a failed handshake. */
  | { readonly how: "abrupt" }
  /** The provider sent a message over the proxy's limit; the connection was closed with 1009. */
  | { readonly how: "tooLarge"; readonly limit: number };

/** One open answer path, handed to the ask it answers. */
export interface AnswerPath {
  readonly channel: number;
  /** Closes the path cleanly from the proxy's side. */
  close(): void;
  /** Sends one binary message to the provider (raw exchanges); `sent` is called once it is written out. */
  send(bytes: Uint8Array, sent?: (error?: Error) => void): void;
  /** Stops reading the provider's messages until `resume()` (backpressure of a raw exchange). */
  pause(): void;
  resume(): void;
}

/** What the board needs of an ask: its kind, its bytes under a channel, and what to do with its path. */
export interface AskOwner {
  readonly kind: RequestsKind;
  /**
   * The whole `/requests` message under `channel`: its bytes, or its bytes in parts, in order (sent
   * as the fragments of one message, so a large part is written as it is, not joined first).
   */
  encode(channel: number): Uint8Array | readonly Uint8Array[];
  /** The ask was sent under `channel`. */
  announced?(channel: number): void;
  /** The ask could not be sent (larger than the message limit); it is dropped. */
  refused?(bytes: number, limit: number): void;
  /**
   * The `/requests` connection this ask was sent on ended before its path opened. Return true to ask
   * it again on the next connection under a fresh channel (the default); false forgets it.
   */
  lostWithConnection?(): boolean;
  /** True when the asker gave up while the ask waited for a connection: it is dropped unsent. */
  withdrawn?(): boolean;
  /**
   * Given, the ask never waits for a later `/requests` connection: made while none is open to send
   * it on (none at all, or the one there closing), or still queued when the connection ends, it is
   * dropped and this is called instead.
   */
  unsent?(): void;
  /** The provider opened the answer path. `message` is called per binary message, then `ended` once. */
  opened(path: AnswerPath): { message(bytes: Uint8Array): void; ended(ending: PathEnding): void };
}

interface Announced {
  readonly owner: AskOwner;
  readonly connection: number;
  opened: boolean;
}

export type BoardEvent =
  | { readonly type: "requestsOpened"; readonly connection: number }
  | { readonly type: "requestsClosed"; readonly connection: number; readonly reasked: number }
  | { readonly type: "announced"; readonly channel: number; readonly kind: RequestsKind; readonly connection: number }
  | { readonly type: "pathOpened"; readonly channel: number; readonly kind: RequestsKind }
  | { readonly type: "pathEnded"; readonly channel: number; readonly kind: RequestsKind; readonly ending: PathEnding };

export class AskBoard implements UpgradeRoute {
  private nextChannel = 1;
  private readonly queue: AskOwner[] = [];
  private readonly announced = new Map<number, Announced>();
  private requests: WebSocket | undefined;
  /** Claimed at decide time, so a second upgrade racing the first is refused too. */
  private requestsClaimed = false;
  private connectionCount = 0;
  private closed = false;
  private flushing = false;
  private readonly listeners = new Set<(event: BoardEvent) => void>();

  constructor(private readonly maxMessageBytes: number) {}

  /** How many `/requests` connections have opened so far; the current one's number while one is open. */
  get connection(): number {
    return this.connectionCount;
  }

  get requestsOpen(): boolean {
    return this.requests !== undefined;
  }

  onEvent(listener: (event: BoardEvent) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  /** Queues an ask; it is sent at once when `/requests` is open, else on the next connection (or dropped: `unsent`). */
  ask(owner: AskOwner): void {
    if (this.closed) return;
    if (owner.unsent && !this.sendable()) return owner.unsent();
    this.queue.push(owner);
    this.flush();
  }

  /**
   * Whether an ask made now goes out at once: a `/requests` connection is open and not closing. A
   * connection whose provider sent its Close stays held (CLOSING) until its TCP ends, which may take
   * the ws library's close timeout; an ask made meanwhile would wait for the next connection.
   */
  private sendable(): boolean {
    const socket = this.requests;
    return socket !== undefined && socket.readyState === socket.OPEN;
  }

  decide(pathname: string, request: IncomingMessage): UpgradeDecision {
    if (this.closed) return undefined;
    if (pathname === "/requests") return this.decideRequests(request);
    const cut = pathname.lastIndexOf("/") + 1;
    const kind = KIND_OF_PREFIX.get(pathname.slice(0, cut));
    if (!kind) return undefined;
    const segment = pathname.slice(cut);
    if (!/^[0-9]{1,10}$/.test(segment) || Number(segment) > 0xffffffff) return { refuse: 400 };
    const channel = Number(segment);
    const entry = this.announced.get(channel);
    if (!entry || entry.owner.kind !== kind) return { refuse: 404 };
    if (entry.opened) return { refuse: 409 };
    entry.opened = true;
    return this.acceptPath(channel, entry, request);
  }

  /** Forgets every ask and stops asking. Open sockets are ended by the listener's own close. */
  close(): void {
    this.closed = true;
    this.queue.length = 0;
    this.announced.clear();
    this.requests?.close();
  }

  private emit(event: BoardEvent): void {
    for (const listener of this.listeners) listener(event);
  }

  private decideRequests(request: IncomingMessage): UpgradeDecision {
    if (this.requestsClaimed) return { refuse: 409 };
    this.requestsClaimed = true;
    let accepted = false;
    // The handshake can still fail after this decision; then the claim must be given back.
    request.socket.once("close", () => {
      if (!accepted) this.requestsClaimed = false;
    });
    return {
      accept: (socket) => {
        accepted = true;
        this.openRequests(socket);
      },
    };
  }

  private openRequests(socket: WebSocket): void {
    if (this.closed) {
      socket.close();
      return;
    }
    const connection = ++this.connectionCount;
    this.requests = socket;
    // The provider sends nothing on /requests; whatever it does send (text or binary) is ignored.
    socket.on("error", () => {});
    socket.once("close", () => this.closeRequests(connection));
    this.emit({ type: "requestsOpened", connection });
    this.flush();
  }

  private closeRequests(connection: number): void {
    this.requests = undefined;
    this.requestsClaimed = false;
    if (this.closed) return;
    // Asks announced on that connection whose path never opened were lost with it: forget their
    // channels and ask them again, ahead of anything queued since, in the order they were made.
    const lost: AskOwner[] = [];
    for (const [channel, entry] of this.announced) {
      if (entry.connection === connection && !entry.opened) {
        this.announced.delete(channel);
        if (entry.owner.lostWithConnection?.() ?? true) lost.push(entry.owner);
      }
    }
    // Asks still queued that wait for no later connection (made while this one was closing) go too.
    const dropped = this.queue.filter((owner) => owner.unsent);
    if (dropped.length > 0) this.queue.splice(0, this.queue.length, ...this.queue.filter((owner) => !owner.unsent));
    this.queue.unshift(...lost);
    this.emit({ type: "requestsClosed", connection, reasked: lost.length });
    for (const owner of dropped) owner.unsent!();
  }

  private flush(): void {
    // An event listener may ask while this loop runs; its ask joins the queue and this loop sends it.
    if (this.flushing) return;
    this.flushing = true;
    try {
      this.sendQueued();
    } finally {
      this.flushing = false;
    }
  }

  private sendQueued(): void {
    const socket = this.requests;
    while (socket && socket === this.requests && socket.readyState === socket.OPEN && this.queue.length > 0) {
      const owner = this.queue.shift()!;
      if (owner.withdrawn?.()) continue;
      const channel = this.mint();
      const message = owner.encode(channel);
      const parts = message instanceof Uint8Array ? [message] : message;
      let length = 0;
      for (const part of parts) length += part.length;
      if (length > this.maxMessageBytes) {
        owner.refused?.(length, this.maxMessageBytes);
        continue;
      }
      this.announced.set(channel, { owner, connection: this.connectionCount, opened: false });
      // One message either way (RFC 6455 §5.4: the fragments of a message are its bytes in order).
      for (const [i, part] of parts.entries()) socket.send(part, { binary: true, fin: i === parts.length - 1 });
      owner.announced?.(channel);
      this.emit({ type: "announced", channel, kind: owner.kind, connection: this.connectionCount });
    }
  }

  private mint(): number {
    // Ascending for the proxy's life. Wrapping past 2^32 - 1 would take billions of asks; if it ever
    // happens, skip channels still announced so a channel stays unique among unanswered asks.
    for (;;) {
      const channel = this.nextChannel;
      this.nextChannel = (this.nextChannel + 1) >>> 0;
      if (!this.announced.has(channel)) return channel;
    }
  }

  private acceptPath(channel: number, entry: Announced, request: IncomingMessage): UpgradeDecision {
    let settled = false;
    let sink: ReturnType<AskOwner["opened"]> | undefined;
    const end = (ending: PathEnding) => {
      if (settled) return;
      settled = true;
      // Once ended, the channel is spent: a later opening of it is a 404.
      if (this.announced.get(channel) === entry) this.announced.delete(channel);
      this.emit({ type: "pathEnded", channel, kind: entry.owner.kind, ending });
      sink?.ended(ending);
    };
    let socketOf: WebSocket | undefined;
    const path: AnswerPath = {
      channel,
      close: () => socketOf?.close(),
      send: (bytes, sent) => {
        if (socketOf && socketOf.readyState === socketOf.OPEN) socketOf.send(bytes, { binary: true }, sent);
        else sent?.(new Error("the path has ended"));
      },
      pause: () => socketOf?.pause(),
      resume: () => socketOf?.resume(),
    };
    // A handshake that fails after this decision never reaches accept: the path ended abruptly.
    request.socket.once("close", () => {
      if (!socketOf) {
        sink = entry.owner.opened(path);
        end({ how: "abrupt" });
      }
    });
    return {
      accept: (socket) => {
        socketOf = socket;
        if (this.closed) {
          socket.terminate();
          return;
        }
        let tooLarge = false;
        let failed = false;
        this.emit({ type: "pathOpened", channel, kind: entry.owner.kind });
        sink = entry.owner.opened(path);
        socket.on("message", (data, isBinary) => {
          if (!isBinary || settled) return;
          sink!.message(toBytes(data));
        });
        socket.on("error", (error: Error & { code?: string }) => {
          failed = true;
          if (error.code === "WS_ERR_UNSUPPORTED_MESSAGE_LENGTH") tooLarge = true;
        });
        socket.once("close", (code) => {
          if (tooLarge) end({ how: "tooLarge", limit: this.maxMessageBytes });
          // 1006: no Close frame arrived. An error means the peer broke the protocol: not clean either.
          else if (failed || code === 1006) end({ how: "abrupt" });
          else end({ how: "clean" });
        });
      },
    };
  }
}

function toBytes(data: unknown): Uint8Array {
  if (data instanceof Uint8Array) return data;
  if (data instanceof ArrayBuffer) return new Uint8Array(data);
  if (Array.isArray(data)) return Buffer.concat(data as Buffer[]);
  return new Uint8Array(0);
}
