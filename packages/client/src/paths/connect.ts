// The provider side of the many-paths transport (seed 000): hold `/requests`, read each ask, open
// its answer path, answer with one message or a stream of them as the exchange's descriptor says,
// close cleanly. Each ask goes to a family's paths adapter (families/index.ts) when one takes it,
// else to the generated dispatch.
import { DEFAULT_MAX_MESSAGE_BYTES } from "../limits.js";
import { speakRevision, type SpokenRevision } from "@diverge/multiplexer";
import { decodeRequestsAsk, EncodeError, RequestsAskError, RequestsAskTag, type RequestsAsk } from "@diverge/codec";
import { checkMcp } from "@diverge/codec/mcp";
import { endpointUrl, proxyBase } from "../url.js";
import { bounded, type RequestOptions } from "../waiting.js";
import { ProviderError } from "./errors.js";
import { AnswerUndelivered } from "../exchanges/engine.js";
import { dispatchRequestsAsk, type DispatchedAsk, type ProviderHandlers } from "../gen/exchanges.js";
import { requestsAskExchangesByKind } from "@diverge/codec/exchanges";
import { defaultWebSocket, openSocket, type OpenFailure, type OpenSocket, type SocketEnding, type WebSocketConstructor } from "./socket.js";
import { pathsFamilies, type FamilyPathsHandlers } from "../families/index.js";
import type { PathsAnswerHost, PathsConnectionEvent } from "./answering.js";

export type { PathsConnectionEvent };

/**
 * How the provider answers: the generated handlers, and the families' own handler shapes (the MCP
 * relay's). A missing handler, or one that returns `undefined`, declines: the path is opened and
 * closed cleanly with no message, which the proxy reads as "not served". A handler that throws
 * answers with an MCP internal error (-32603) carrying the thrown message.
 */
export interface ProxyHandlers extends ProviderHandlers, FamilyPathsHandlers {
  /**
   * Answers an exchange whose answer path carries raw bytes both ways (the program's database
   * connection, kind 11): called once the path is open; the path is the connection. Closing it before
   * any byte declines. Without it, such an exchange is declined.
   */
  readonly raw?: (ask: RequestsAsk, path: RawPath) => void | Promise<void>;
}

/** An open answer path of a raw exchange: bytes both ways, no framing. */
export interface RawPath {
  readonly channel: number;
  /** The answer path, e.g. `/postgres/7`. */
  readonly path: string;
  /** Sends one chunk; `false` when the path has ended (nothing is sent). */
  send(bytes: Uint8Array): boolean;
  /** Each binary message the proxy sends (what the program wrote), in order. */
  onData(listener: (bytes: Uint8Array) => void): void;
  /** Closes cleanly: the connection's end (before any byte: declined). */
  close(): void;
  /** Bytes queued to the proxy not yet written out. */
  readonly bufferedAmount: number;
  /**
   * Stops reading what the proxy sends on this path until the returned function is called (TCP
   * backpressure on the proxy, which stops reading the program's socket). Only this path waits.
   */
  pauseIncoming(): () => void;
  /** Resolves when the path has ended, whoever ended it. */
  readonly ended: Promise<SocketEnding>;
}

export interface ConnectOptions {
  /** The spec revision to speak (see `SPOKEN_REVISIONS`). Default the newest; another is a RevisionError. */
  readonly revision?: string;
  /** A WHATWG-compatible WebSocket constructor. Default: the `ws` package. */
  readonly WebSocket?: WebSocketConstructor;
  /** First wait before dialling `/requests` again; doubles per failure up to `maxBackoffMs`. Default 100. */
  readonly minBackoffMs?: number;
  readonly maxBackoffMs?: number;
  /** Also reachable with `onEvent` on the connection; this one sees the first events too. */
  readonly onEvent?: (event: PathsConnectionEvent) => void;
  /**
   * The proxy's message limit (its `--max-message-bytes`), in bytes. An answer message larger than
   * it is not sent (an `AnswerUnwritable` error event), as on the multiplexed transport: with nothing
   * sent before it, the path is closed cleanly (not served). Default 16 MiB, the proxy's default.
   */
  readonly maxMessageBytes?: number;
}

/** An answer message over the proxy's message limit: not sent. */
class OversizedAnswer extends Error {}

/** The provider's many-paths connection (`/requests` and the answer paths) to one proxy. */
export interface PathsConnection {
  /** The spec revision this connection speaks. */
  readonly revision: SpokenRevision;
  onEvent(listener: (event: PathsConnectionEvent) => void): () => void;
  /** True while `/requests` is open. */
  readonly connected: boolean;
  /**
   * Resolves when `/requests` is open (at once if it is). Rejects with ProviderError `Closed` once
   * `close()` is called, `TimedOut` after `timeoutMs` (default 60 000), `Aborted` on the signal.
   */
  whenConnected(options?: RequestOptions): Promise<void>;
  /**
   * Stops: `/requests` and every open answer path end abruptly where the implementation allows it,
   * so the proxy asks again whatever was not answered (a clean close would say "not served").
   */
  close(): Promise<void>;
}

/** The answer path of every kind of the `/requests` table, by kind number, from the generated exchange table. */
const PATH_OF_KIND: readonly (string | undefined)[] = Array.from({ length: 256 }, (_, kind) => requestsAskExchangesByKind.get(kind)?.pathPrefix.replace(/\/$/, ""));

/**
 * Holds `/requests` on the proxy at `url` and answers with `handlers`. `url` is the proxy's base URL
 * (ws or http, with or without a trailing slash, e.g. `ws://127.0.0.1:14979`); a path naming one of
 * its endpoints (e.g. `/requests`) throws ProxyUrlError.
 */
export function connectProxy(url: string | URL, handlers: ProxyHandlers, options: ConnectOptions = {}): PathsConnection {
  const revision = speakRevision(options.revision);
  const base = proxyBase(url);
  const Impl = options.WebSocket ?? defaultWebSocket;
  const minBackoff = options.minBackoffMs ?? 100;
  const maxBackoff = Math.max(options.maxBackoffMs ?? 5000, minBackoff);
  const maxMessageBytes = options.maxMessageBytes ?? DEFAULT_MAX_MESSAGE_BYTES;
  const urlOf = (path: string) => endpointUrl(base, path.replace(/^\//, ""));
  const listeners = new Set<(event: PathsConnectionEvent) => void>();
  if (options.onEvent) listeners.add(options.onEvent);
  const emit = (event: PathsConnectionEvent) => {
    for (const listener of listeners) listener(event);
  };
  const openPaths = new Set<OpenSocket>();
  let requests: OpenSocket | undefined;
  let stopped = false;
  let wakeUp: (() => void) | undefined;
  const connectedWaiters = new Set<{ resolve(): void; reject(error: ProviderError): void }>();

  const sleep = (ms: number) =>
    new Promise<void>((resolve) => {
      const timer = setTimeout(() => {
        wakeUp = undefined;
        resolve();
      }, ms);
      wakeUp = () => {
        clearTimeout(timer);
        wakeUp = undefined;
        resolve();
      };
    });

  const openPath = async (path: string): Promise<OpenSocket | undefined> => {
    try {
      const socket = await openSocket(Impl, urlOf(path));
      if (stopped) {
        abort(socket);
        return undefined;
      }
      openPaths.add(socket);
      void socket.ended.then(() => openPaths.delete(socket));
      return socket;
    } catch (failure) {
      const { status, message } = failure as OpenFailure;
      emit({ type: "error", error: new ProviderError({ variant: "PathRefused", path, status, reason: message }) });
      return undefined;
    }
  };

  /** Opens `path`, sends `frame()`'s bytes if any, closes cleanly. */
  const answerOnce = async (path: string, frame: () => Promise<Uint8Array | undefined>) => {
    const socket = await openPath(path);
    if (!socket) return;
    const bytes = await frame();
    if (bytes && socket.isOpen) socket.send(bytes);
    socket.close();
    const ending = await socket.ended;
    emit({ type: "pathEnded", path, outcome: bytes ? "answered" : "declined", ending });
  };

  /**
   * Opens `path` and sends the answer messages of a dispatched ask, then closes cleanly. A handler that
   * fails before its first message declines (a clean close with no message); one that fails after it
   * ends the path abruptly, so the proxy never takes a half-sent stream for a finished one.
   */
  const answerDispatched = async (path: string, channel: number, dispatched: DispatchedAsk) => {
    const socket = await openPath(path);
    if (!socket) return;
    const controller = new AbortController();
    void socket.ended.then(() => controller.abort());
    let sent = 0;
    try {
      for await (const bytes of dispatched.answer({ channel, path, signal: controller.signal })) {
        if (!socket.isOpen) {
          // Nobody receives it: the handler is told (a lock it took is released).
          controller.abort(new AnswerUndelivered(path));
          break;
        }
        if (bytes.length > maxMessageBytes) throw new OversizedAnswer(`the answer is ${bytes.length} bytes, larger than the proxy's message limit of ${maxMessageBytes}`);
        socket.send(bytes);
        sent++;
      }
    } catch (problem) {
      const reason = problem instanceof Error ? problem.message : String(problem);
      // An answer that cannot be written (a field over its length prefix, or over the message limit) is the handler's mistake too, named as such.
      emit({ type: "error", error: new ProviderError({ variant: problem instanceof EncodeError || problem instanceof OversizedAnswer ? "AnswerUnwritable" : "HandlerFailed", path, reason }) });
      if (sent > 0) socket.terminate();
    }
    socket.close();
    const ending = await socket.ended;
    const single = dispatched.exchange.pattern === "one" || dispatched.exchange.pattern === "oneWhenHeld";
    emit({ type: "pathEnded", path, outcome: sent === 0 ? "declined" : single ? "answered" : "streamEnded", ending });
  };

  const host: PathsAnswerHost = { openPath, emit, maxMessageBytes };
  // The families' handlers in the generated shape; a generated member given directly wins.
  const generated: ProviderHandlers = Object.assign({}, ...pathsFamilies.map((family) => family.generated?.(handlers, host)));
  const provider: ProviderHandlers = new Proxy(handlers, {
    get: (target, key) => (target as Record<PropertyKey, unknown>)[key] ?? (generated as Record<PropertyKey, unknown>)[key],
  });

  /** Opens the path of a raw exchange and hands it to the raw handler. */
  const answerRaw = async (path: string, ask: RequestsAsk, handler: NonNullable<ProxyHandlers["raw"]>) => {
    const socket = await openPath(path);
    if (!socket) return;
    let sent = 0;
    const raw: RawPath = {
      channel: ask.channel,
      path,
      send: (bytes) => {
        if (!socket.isOpen) return false;
        socket.send(bytes);
        sent++;
        return true;
      },
      onData: (listener) => socket.onMessage(listener),
      close: () => socket.close(),
      get bufferedAmount() {
        return socket.bufferedAmount;
      },
      pauseIncoming: () => socket.pauseIncoming(),
      ended: socket.ended,
    };
    void socket.ended.then((ending) => emit({ type: "pathEnded", path, outcome: sent > 0 ? "streamEnded" : "declined", ending }));
    try {
      await handler(ask, raw);
    } catch (problem) {
      const reason = problem instanceof Error ? problem.message : String(problem);
      emit({ type: "error", error: new ProviderError({ variant: "HandlerFailed", path, reason }) });
      // Before any byte this declines; after, the connection ends.
      socket.close();
    }
  };

  const dispatch = (ask: RequestsAsk) => {
    const path = `${PATH_OF_KIND[kindNumber(ask.variant)]}/${ask.channel}`;
    // Raw bytes both ways (the descriptor says so): the raw handler takes the open path.
    if (requestsAskExchangesByKind.get(kindNumber(ask.variant))?.pattern === "raw" && handlers.raw) return answerRaw(path, ask, handlers.raw);
    // A family whose own handler shape needs the open path answers it itself.
    for (const family of pathsFamilies) {
      const answering = family.answer?.(ask, handlers, path, host);
      if (answering) return answering;
    }
    // Every other exchange goes to its generated handler; one with none (raw bytes without a raw
    // handler, or a handler not given) is declined, so the proxy reports it failed inside the container.
    const dispatched = dispatchRequestsAsk(ask, provider);
    return dispatched ? answerDispatched(path, ask.channel, dispatched) : answerOnce(path, async () => undefined);
  };

  const onAsk = (bytes: Uint8Array) => {
    let ask: RequestsAsk;
    try {
      ask = decodeRequestsAsk(bytes, { check: checkMcp });
    } catch (problem) {
      // The codec refuses JSON nested too deeply with its typed error too (test/typed-decode.test.ts).
      if (!(problem instanceof RequestsAskError)) throw problem;
      const readable = bytes.length >= 5;
      const channel = readable ? ((bytes[0]! << 24) | (bytes[1]! << 16) | (bytes[2]! << 8) | bytes[3]!) >>> 0 : undefined;
      const kind = readable ? bytes[4]! : undefined;
      const prefix = kind !== undefined ? PATH_OF_KIND[kind] : undefined;
      const path = prefix ? `${prefix}/${channel}` : undefined;
      emit({ type: "error", error: new ProviderError({ variant: "MalformedAsk", source: problem, channel, kind, path }) });
      if (path) void answerOnce(path, async () => undefined);
      return;
    }
    emit({ type: "ask", ask });
    dispatch(ask).catch((problem: unknown) => {
      // Nothing in answering is expected to throw; if something does, it is reported, never fatal.
      const reason = problem instanceof Error ? problem.message : String(problem);
      emit({ type: "error", error: new ProviderError({ variant: "HandlerFailed", path: `${PATH_OF_KIND[kindNumber(ask.variant)]}/${ask.channel}`, reason }) });
    });
  };

  const run = async () => {
    let backoff = minBackoff;
    while (!stopped) {
      let socket: OpenSocket;
      try {
        socket = await openSocket(Impl, urlOf("/requests"));
      } catch (failure) {
        const { status, message } = failure as OpenFailure;
        if (!stopped) emit({ type: "error", error: new ProviderError({ variant: "RequestsUnavailable", status, reason: message }) });
        await sleep(backoff);
        backoff = Math.min(backoff * 2, maxBackoff);
        continue;
      }
      if (stopped) {
        abort(socket);
        break;
      }
      requests = socket;
      backoff = minBackoff;
      socket.onMessage(onAsk);
      emit({ type: "requestsOpened" });
      for (const waiter of [...connectedWaiters]) waiter.resolve();
      const ending = await socket.ended;
      requests = undefined;
      emit({ type: "requestsClosed", ending, redial: !stopped });
      if (!stopped) await sleep(backoff);
    }
  };
  void run();

  return {
    revision,
    onEvent(listener) {
      listeners.add(listener);
      return () => listeners.delete(listener);
    },
    get connected() {
      return requests !== undefined;
    },
    whenConnected(waitOptions?: RequestOptions) {
      if (requests) return Promise.resolve();
      const waitingFor = `/requests at ${urlOf("/requests")} to open`;
      return bounded<void>(
        waitOptions,
        {
          timedOut: (timeoutMs) => new ProviderError({ variant: "TimedOut", waitingFor, timeoutMs }),
          aborted: (reason) => new ProviderError({ variant: "Aborted", waitingFor, reason }),
        },
        (resolve, reject) => {
          if (stopped) return reject(new ProviderError({ variant: "Closed", waitingFor }));
          const waiter = { resolve, reject };
          connectedWaiters.add(waiter);
          return () => connectedWaiters.delete(waiter);
        },
      );
    },
    async close() {
      stopped = true;
      for (const waiter of [...connectedWaiters]) waiter.reject(new ProviderError({ variant: "Closed", waitingFor: `/requests at ${urlOf("/requests")} to open` }));
      wakeUp?.();
      const sockets = [...openPaths, ...(requests ? [requests] : [])];
      for (const socket of sockets) abort(socket);
      await Promise.all(sockets.map((socket) => socket.ended));
    },
  };
}

function abort(socket: OpenSocket): void {
  socket.terminate();
}

function kindNumber(kind: RequestsAsk["variant"]): number {
  return RequestsAskTag[kind];
}
