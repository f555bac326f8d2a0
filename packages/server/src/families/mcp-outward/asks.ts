// The typed API of the MCP exchanges the proxy asks (seed 000, kinds 0 to 4):
// `listTools`, `listResources`, `callTool`, `readResource` each resolve with the MCP result or reject
// with an McpExchangeError; notifications arrive as events or through an async iterator.
import { logEvent, type Say } from "@diverge/multiplexer/log";
import {
  McpAnswerError,
  type CallToolRequestParams,
  type CallToolResult,
  type ErrorData,
  type ListResourcesResult,
  type ListToolsResult,
  type PaginatedRequestParams,
  type ReadResourceRequestParams,
  type ReadResourceResult,
  type RequestsAsk,
  type ServerNotification,
} from "@diverge/codec";
import { loadMcpChecks } from "../../mcp-checks.js";
import type { Gate } from "../secrets/gate.js";
import { RequestsEngine, type AskEngine, type AskOptions, type AskOutcome } from "../../exchanges/engine.js";
import type { BeginScopeLink } from "../../exchanges/begin-scope.js";
import { StandingEngine } from "../../exchanges/standing.js";
import { bindProxyAsks, bindProxyStandingAsks, type ProxyAsks } from "../../gen/exchanges.js";
import type { AskBoard, PathEnding } from "../../paths/board.js";
import { McpExchangeError } from "./errors.js";

/** The MCP kinds of `/requests`, by the names the codec gives them. */
export type McpKind = Extract<RequestsAsk["variant"], `Mcp${string}`>;

/**
 * The decoders' typed error, or undefined. (JSON nested too deeply is the codec's typed error too: it
 * refuses the 128th level before any check walks it; see test/typed-decode.test.ts.)
 */
export function asMcpAnswerError(problem: unknown): McpAnswerError | undefined {
  return problem instanceof McpAnswerError ? problem : undefined;
}

/** One MCP answer, result or error, as the generated answer frames decode it. */
type McpAnswerOf<R> = { readonly variant: "Result"; readonly result: R } | { readonly variant: "Error"; readonly error: ErrorData };

/** The result of an exchange of kinds 0 to 3, or the McpExchangeError its ending means. `onScope`: it was asked on the begin scope. */
function resultOf<R>(what: string, outcome: AskOutcome<McpAnswerOf<R>>, onScope = false): { result: R } | { error: McpExchangeError } | undefined {
  switch (outcome.type) {
    case "answered":
      return outcome.answer.variant === "Result" ? { result: outcome.answer.result } : { error: new McpExchangeError({ variant: "McpError", error: outcome.answer.error }) };
    case "notServed":
      return { error: new McpExchangeError({ variant: "NotServed", what, channel: outcome.channel }) };
    case "unreadable": {
      const source = outcome.error instanceof McpAnswerError ? outcome.error : new McpAnswerError({ variant: "Body", reason: outcome.error.message });
      return { error: new McpExchangeError({ variant: "UnreadableAnswer", what, channel: outcome.channel, source }) };
    }
    case "answerTooLarge":
      return { error: new McpExchangeError({ variant: "AnswerTooLarge", what, channel: outcome.channel, limit: outcome.limit }) };
    case "askTooLarge":
      return { error: new McpExchangeError({ variant: "AskTooLarge", bytes: outcome.bytes, limit: outcome.limit }) };
    case "lost":
      // On `/requests`, kinds 0 to 3 are asked again until answered: an exchange is only lost with the
      // proxy. On the begin scope a channel is never asked again: the connection's end loses it.
      return { error: new McpExchangeError({ variant: onScope ? "Lost" : "ProxyClosed" }) };
    case "aborted":
      // Given up by close(), which has already rejected it.
      return undefined;
  }
}

/** What happened on the notification stream besides notifications themselves. */
export type NotificationStreamEvent =
  | { readonly type: "asked"; readonly channel: number }
  | { readonly type: "opened"; readonly channel: number }
  /** The provider ended the stream with an MCP error (its last message). */
  | { readonly type: "error"; readonly channel: number; readonly error: ErrorData }
  /** A message on the stream did not decode; the proxy closed the path. */
  | { readonly type: "unreadable"; readonly channel: number; readonly source: McpAnswerError }
  /** The path ended; `reask` says when the proxy asks again. */
  | { readonly type: "ended"; readonly channel: number; readonly ending: PathEnding; readonly reask: "now" | "nextConnection" | "never" };

export interface McpAsksOptions {
  readonly board: AskBoard;
  readonly gate: Gate;
  readonly log?: Say;
  /** Exchanges that may wait for their answers at once (held by the gate, queued, or asked); more fail with TooManyPending. Default 10 000. */
  readonly maxPendingAsks?: number;
  /** Notifications one `notifications()` iterator holds for a loop that does not pull; older ones beyond it are dropped and counted. Default 1024. */
  readonly iteratorBuffer?: number;
  /**
   * The engine the exchanges are asked on: the transport choice (the begin scope once a provider has
   * begun tools on `/`, else `/requests`). Default `/requests` only.
   */
  readonly engine?: AskEngine;
  /** The begin scope while one is begun (with its connection as `key`): the notification channel (tag 11) is opened there once per connection. */
  readonly beginScope?: () => BeginScopeLink | undefined;
}

/**
 * How long one exchange may wait, and a signal that gives it up (the shape of the client's
 * RequestOptions and of the MCP SDK's). Either ends it with McpExchangeError `TimedOut` / `Aborted`;
 * the ask is withdrawn (its path or channel given up, its place at the secrets gate freed).
 */
export interface McpRequestOptions {
  readonly signal?: AbortSignal;
  /** Milliseconds before `TimedOut`. Default 60 000 (the MCP SDK's); `0` or `Infinity` waits without a bound (the signal still applies). */
  readonly timeoutMs?: number;
}

/** The default bound of one exchange the proxy asks, in ms (the MCP SDK's default request timeout). */
export const DEFAULT_MCP_TIMEOUT_MS = 60_000;

/** Exchanges that may wait for their answers at once, unless the options say otherwise. */
export const DEFAULT_MAX_PENDING_ASKS = 10_000;

/** Counters of the MCP exchanges the proxy asks. */
export interface McpAskStats {
  /** Exchanges waiting for their answers now. */
  readonly pending: number;
  /** Exchanges refused with TooManyPending so far. */
  readonly refusedPending: number;
  /** Notifications dropped by `notifications()` iterators whose loops did not keep pace, in total. */
  readonly droppedByIterators: number;
  /** Messages on the notification path larger than the message limit (each ended its path). */
  readonly droppedOversized: number;
}

/** The MCP exchanges the proxy asks of its provider. */
export class McpAsks {
  private readonly board: AskBoard;
  /** The generated typed asks of the `/requests` table, bound onto the generic engine. */
  private readonly asks: ProxyAsks;
  private readonly gate: Gate;
  private readonly log: Say;
  private readonly pending = new Set<(error: McpExchangeError) => void>();
  private readonly notificationListeners = new Set<(notification: ServerNotification) => void>();
  private readonly streamListeners = new Set<(event: NotificationStreamEvent) => void>();
  private readonly iteratorEnders = new Set<() => void>();
  private closed = false;
  private readonly maxPending: number;
  private readonly iteratorBuffer: number;
  private refusedPending = 0;
  private droppedByIterators = 0;
  private droppedOversized = 0;
  private readonly beginScope: () => BeginScopeLink | undefined;
  /** The connections on `/` whose notification channel (tag 11) has been opened: once per connection. */
  private readonly scopeNotifications = new WeakSet<object>();

  constructor(options: McpAsksOptions) {
    this.board = options.board;
    this.gate = options.gate;
    this.log = options.log ?? (() => {});
    this.maxPending = options.maxPendingAsks ?? DEFAULT_MAX_PENDING_ASKS;
    this.iteratorBuffer = options.iteratorBuffer ?? 1024;
    this.asks = bindProxyAsks(options.engine ?? new RequestsEngine({ board: this.board, log: this.log }));
    this.beginScope = options.beginScope ?? (() => undefined);
    // The notification stream is a standing stream of `/requests` (its descriptor says when it is
    // asked and asked again); on the begin scope its channel is opened per connection instead.
    const report = (event: NotificationStreamEvent) => {
      if (event.type === "ended" && event.ending.how === "tooLarge") this.droppedOversized++;
      for (const listener of this.streamListeners) listener(event);
    };
    bindProxyStandingAsks(new StandingEngine({ board: this.board })).mcpNotifications(
      {},
      {
        answer: (message, channel) => {
          if (message.variant === "Notification") for (const listener of this.notificationListeners) listener(message.notification as ServerNotification);
          // The error is the last message; anything after it is disregarded.
          else report({ type: "error", channel, error: message.error as ErrorData });
        },
        event: (event) => {
          if (event.type !== "unreadable") return report(event);
          const source = event.error instanceof McpAnswerError ? event.error : new McpAnswerError({ variant: "Body", reason: event.error.message });
          report({ type: "unreadable", channel: event.channel, source });
        },
      },
    );
  }

  stats(): McpAskStats {
    return { pending: this.pending.size, refusedPending: this.refusedPending, droppedByIterators: this.droppedByIterators, droppedOversized: this.droppedOversized };
  }

  /** `tools/list` of the provider. `null` (or nothing) asks for the first page with no params. */
  listTools(params: PaginatedRequestParams | null = null, wait?: McpRequestOptions): Promise<ListToolsResult> {
    return this.exchange("tools/list", wait, (options) => this.asks.mcpListTools({ params }, options));
  }

  listResources(params: PaginatedRequestParams | null = null, wait?: McpRequestOptions): Promise<ListResourcesResult> {
    return this.exchange("resources/list", wait, (options) => this.asks.mcpListResources({ params }, options));
  }

  callTool(params: CallToolRequestParams, wait?: McpRequestOptions): Promise<CallToolResult> {
    return this.exchange("tools/call", wait, (options) => this.asks.mcpCallTool({ params }, options));
  }

  readResource(params: ReadResourceRequestParams, wait?: McpRequestOptions): Promise<ReadResourceResult> {
    return this.exchange("resources/read", wait, (options) => this.asks.mcpReadResource({ params }, options));
  }

  /** Every notification the provider sends on the stream, as it arrives. Returns the unsubscribe. */
  onNotification(listener: (notification: ServerNotification) => void): () => void {
    this.notificationListeners.add(listener);
    return () => this.notificationListeners.delete(listener);
  }

  /** What happens to the notification stream itself: asked, opened, its error, its end. */
  onNotificationStream(listener: (event: NotificationStreamEvent) => void): () => void {
    this.streamListeners.add(listener);
    return () => this.streamListeners.delete(listener);
  }

  /** The notifications from now on, until the proxy closes or the loop breaks. */
  notifications(): AsyncIterableIterator<ServerNotification> {
    const buffered: ServerNotification[] = [];
    const waiting: ((step: IteratorResult<ServerNotification>) => void)[] = [];
    let done = this.closed;
    const finish = () => {
      done = true;
      unsubscribe();
      this.iteratorEnders.delete(finish);
      for (const resume of waiting.splice(0)) resume({ value: undefined, done: true });
    };
    const unsubscribe = this.onNotification((notification) => {
      const resume = waiting.shift();
      if (resume) resume({ value: notification, done: false });
      else {
        // A loop that does not pull loses the oldest notifications rather than growing memory.
        if (buffered.length >= this.iteratorBuffer) {
          buffered.shift();
          this.droppedByIterators++;
        }
        buffered.push(notification);
      }
    });
    this.iteratorEnders.add(finish);
    const iterator: AsyncIterableIterator<ServerNotification> = {
      next: () => {
        const value = buffered.shift();
        if (value) return Promise.resolve({ value, done: false });
        if (done) return Promise.resolve({ value: undefined, done: true });
        return new Promise((resolve) => waiting.push(resolve));
      },
      return: () => {
        finish();
        return Promise.resolve({ value: undefined, done: true });
      },
      [Symbol.asyncIterator]: () => iterator,
    };
    return iterator;
  }

  /**
   * The notification channel of the begin scope (tag 11): opened at the program's first exchange on a
   * begun connection, at most once per connection, never asked again; each notification reaches
   * every listener (every MCP session of the program).
   */
  private openScopeNotifications(scope: BeginScopeLink): void {
    const key = scope.key ?? scope;
    if (this.scopeNotifications.has(key)) return;
    this.scopeNotifications.add(key);
    const stream = this.asks.mcpNotifications({});
    void (async () => {
      for await (const message of stream) {
        if (message.variant === "Notification") for (const listener of this.notificationListeners) listener(message.notification as ServerNotification);
        else this.log(...logEvent("the provider ended the begin scope's notification channel with an error: {error}", { error: message.error.message }));
      }
      const ending = await stream.ended;
      if (ending.type !== "done") this.log(`the begin scope's notification channel ended: ${ending.type}`);
    })().catch((problem: unknown) => this.log(...logEvent("the begin scope's notification channel: {error}", { error: problem instanceof Error ? problem.message : String(problem) })));
  }

  /** Rejects every exchange not yet answered with ProxyClosed and ends every notification iterator. */
  close(): void {
    this.closed = true;
    const error = new McpExchangeError({ variant: "ProxyClosed" });
    for (const reject of [...this.pending]) reject(error);
    for (const finish of [...this.iteratorEnders]) finish();
  }

  private async exchange<R>(what: string, wait: McpRequestOptions | undefined, ask: (options: AskOptions) => Promise<AskOutcome<McpAnswerOf<R>>>): Promise<R> {
    if (this.closed) throw new McpExchangeError({ variant: "ProxyClosed" });
    const signal = wait?.signal;
    if (signal?.aborted) throw new McpExchangeError({ variant: "Aborted", what, reason: signal.reason });
    if (this.pending.size >= this.maxPending) {
      this.refusedPending++;
      throw new McpExchangeError({ variant: "TooManyPending", limit: this.maxPending });
    }
    const timeoutMs = wait?.timeoutMs ?? DEFAULT_MCP_TIMEOUT_MS;
    return new Promise((resolve, reject) => {
      let settled = false;
      let passedGate = false;
      let timer: ReturnType<typeof setTimeout> | undefined;
      const giveUp = new AbortController();
      const onAbort = () => fail(new McpExchangeError({ variant: "Aborted", what, reason: signal!.reason }));
      const end = () => {
        settled = true;
        this.pending.delete(fail);
        if (timer !== undefined) clearTimeout(timer);
        signal?.removeEventListener("abort", onAbort);
      };
      const fail = (error: McpExchangeError) => {
        if (settled) return;
        end();
        // Withdraws the ask: its place at the gate, its path or channel.
        giveUp.abort(error);
        reject(error);
      };
      this.pending.add(fail);
      if (Number.isFinite(timeoutMs) && timeoutMs > 0) timer = setTimeout(() => fail(new McpExchangeError({ variant: "TimedOut", what, timeoutMs, heldBySecretsGate: !passedGate })), timeoutMs);
      signal?.addEventListener("abort", onAbort, { once: true });
      // The secrets gate holds every outward ask until the program has its secrets; the answer's
      // MCP checks are loaded (on first use) before the ask goes out.
      void Promise.all([this.gate.pass(giveUp.signal).then(() => void (passedGate = true)), loadMcpChecks()]).then(
        async () => {
          if (settled) return;
          const scope = this.beginScope();
          if (scope) this.openScopeNotifications(scope);
          const outcome = resultOf(what, await ask({ signal: giveUp.signal }), scope !== undefined);
          if (!outcome || settled) return;
          if ("error" in outcome) return fail(outcome.error);
          end();
          resolve(outcome.result);
        },
        (problem: unknown) => {
          if (settled) return;
          end();
          reject(problem);
        },
      );
    });
  }
}
