// The container's own MCP server on the multiplexed connection: the four MCP exchanges and the one
// notification channel (begin scope, provider-opened tags 3-7), read as MCP results or errors.
import type { CallToolRequestParams, PaginatedRequestParams, ReadResourceRequestParams, ToolsBeginChannelRequest } from "@diverge/codec";
import { toolsBeginChannelsProviderOpened } from "@diverge/codec/exchanges";
import type { CallToolResult, ListResourcesResult, ListToolsResult, ReadResourceResult, ServerNotification } from "@modelcontextprotocol/sdk/types.js";
import type { ChannelAskEngine, ChannelOutcome } from "../../exchanges/engine.js";
import { ContainerError, type ErrorData } from "../../multiplexed/errors.js";
import type { ConnectionHost } from "../../multiplexed/host.js";
import type { RequestOptions } from "../../waiting.js";
import { relayedAnswer, type RelayedAnswer, type RelayedMethod } from "./relayed.js";

export interface NotificationsOptions {
  /** Notifications kept for a loop that does not pull; older ones beyond it are dropped. Default 1024. */
  readonly maxQueued?: number;
  /** Ends the stream as `close()` does: the loop ends normally. */
  readonly signal?: AbortSignal;
}

export interface NotificationStream extends AsyncIterable<ServerNotification> {
  /** Stops delivering to this iterator; its loop ends. The connection's one notification channel stays for the others. */
  close(): void;
}

/** What `ContainerMcp` needs of the connection: the shared notification channel besides the asks. */
export interface McpInwardHost extends ConnectionHost {
  subscribeNotifications(sink: NotificationSinkState): () => void;
  /** The engine the typed asks are bound onto (the lean relay reads its answers with another codec). */
  readonly channels: ChannelAskEngine<ToolsBeginChannelRequest>;
  /** An MCP exchange was answered: before a feed, that shows the proxy holds nothing for secrets. */
  noteMcpAnswered?(): void;
}

/** How long an MCP exchange may go unanswered, before the secrets are fed, before it is reported as held by the secrets gate. */
export const HELD_REPORT_MS = 5_000;

/** The connection's one notification channel, shared by every `notifications()` iterator. */
interface SharedChannel {
  readonly sinks: Set<NotificationSinkState>;
  ended: boolean;
}

export interface NotificationSinkState {
  push(notification: ServerNotification): void;
  fail(error: ContainerError): void;
  end(): void;
}

/** The connection's one notification channel, opened by the first subscriber and shared by every later one. */
export class NotificationHub {
  private hub: SharedChannel | undefined;
  constructor(private readonly connection: ConnectionHost) {}

  /** Subscribes a sink to the connection's one notification channel, opening it when none is open. */
  subscribe(sink: NotificationSinkState): () => void {
    let hub = this.hub;
    if (!hub || hub.ended) {
      const fresh: SharedChannel = { sinks: new Set(), ended: false };
      const what = "notifications";
      let errorSeen = false;
      const finishAll = (each: (sink: NotificationSinkState) => void) => {
        fresh.ended = true;
        if (this.hub === fresh) this.hub = undefined;
        for (const member of [...fresh.sinks]) each(member);
        fresh.sinks.clear();
      };
      // Throws (NotBegun, Lost) before anything is kept.
      this.connection.channelScope(what);
      this.connection.asks.mcpNotifications({}).listen({
        answer: (answer) => {
          if (fresh.ended) return;
          if (answer.variant === "Notification") {
            for (const member of fresh.sinks) member.push(answer.notification as ServerNotification);
          } else {
            errorSeen = true;
            const failure = new ContainerError({ variant: "Mcp", what, error: answer.error as ErrorData });
            finishAll((member) => member.fail(failure));
          }
        },
        unreadable: (reason) => {
          if (fresh.ended) return;
          const failure = new ContainerError({ variant: "Unreadable", what, reason });
          for (const member of fresh.sinks) member.fail(failure);
        },
        end: (ending) => {
          if (ending.type === "lost") {
            const failure = new ContainerError({ variant: "Lost", what });
            finishAll((member) => member.fail(failure));
          } else if (ending.type === "bareFinish" && !errorSeen) {
            const failure = new ContainerError({ variant: "NotServed", what });
            finishAll((member) => member.fail(failure));
          } else finishAll((member) => member.end());
        },
      });
      this.hub = hub = fresh;
    }
    const current = hub;
    current.sinks.add(sink);
    return () => current.sinks.delete(sink);
  }
}

/** The five MCP exchanges with the container's own MCP server. */
export class ContainerMcp {
  constructor(private readonly connection: McpInwardHost) {}

  private ask<T>(what: string, ask: () => Promise<ChannelOutcome<{ variant: "Result"; result: unknown } | { variant: "Error"; error: unknown }>>, options: RequestOptions | undefined): Promise<T> {
    // The proxy does not say whether it has a secrets gate: an exchange unanswered for a moment (or
    // given up unanswered) before the secrets were fed is reported as held; any answer before a feed
    // shows the proxy has none (`--no-secrets-gate`), and nothing is reported as gated after it.
    const report = setTimeout(() => this.connection.noteMcpAsk(what), HELD_REPORT_MS);
    report.unref?.();
    return this.connection.askChannel(what, ask, options, () => this.connection.mcpWaitingFor(what)).then(
      (answer) => {
        clearTimeout(report);
        this.connection.noteMcpAnswered?.();
        return resultOf(what, answer) as T;
      },
      (problem: unknown) => {
        clearTimeout(report);
        const variant = (problem as { detail?: { variant?: string } } | undefined)?.detail?.variant;
        if (variant === "TimedOut" || variant === "Aborted") this.connection.noteMcpAsk(what);
        throw problem;
      },
    );
  }

  listTools(params?: PaginatedRequestParams, options?: RequestOptions): Promise<ListToolsResult> {
    return this.ask("tools/list", () => this.connection.asks.mcpListTools({ params: params ?? null }), options);
  }

  listResources(params?: PaginatedRequestParams, options?: RequestOptions): Promise<ListResourcesResult> {
    return this.ask("resources/list", () => this.connection.asks.mcpListResources({ params: params ?? null }), options);
  }

  callTool(params: CallToolRequestParams, options?: RequestOptions): Promise<CallToolResult> {
    return this.ask("tools/call", () => this.connection.asks.mcpCallTool({ params }), options);
  }

  readResource(params: ReadResourceRequestParams, options?: RequestOptions): Promise<ReadResourceResult> {
    return this.ask("resources/read", () => this.connection.asks.mcpReadResource({ params }), options);
  }

  /**
   * The lean relay of `method` (what --serve-tools does with an agent's request): `params` as the agent
   * sent them, the result as the JSON bytes the proxy sent, neither read into MCP's types. Rejects as
   * the typed methods do (ContainerError; `Mcp` for the server's own error).
   */
  relay(method: RelayedMethod, params: Record<string, unknown> | undefined, options?: RequestOptions): Promise<Uint8Array> {
    const c = toolsBeginChannelsProviderOpened;
    const lean = (descriptor: typeof c.McpCallTool | typeof c.McpListTools | typeof c.McpListResources | typeof c.McpReadResource, request: ToolsBeginChannelRequest) =>
      this.connection.channels.one({ ...descriptor, answer: relayedAnswer(descriptor.answer) }, request);
    const ask = (): Promise<ChannelOutcome<RelayedAnswer>> => {
      switch (method) {
        case "tools/call":
          return lean(c.McpCallTool, { variant: "McpCallTool", params: params as CallToolRequestParams });
        case "tools/list":
          return lean(c.McpListTools, { variant: "McpListTools", params: (params as PaginatedRequestParams | undefined) ?? null });
        case "resources/list":
          return lean(c.McpListResources, { variant: "McpListResources", params: (params as PaginatedRequestParams | undefined) ?? null });
        case "resources/read":
          return lean(c.McpReadResource, { variant: "McpReadResource", params: params as ReadResourceRequestParams });
      }
    };
    return this.ask(method, ask, options);
  }

  /**
   * Every notification the container's MCP server sends from now on, in order. Every iterator shares
   * the connection's one notification channel (opened by the first). The loop throws ContainerError
   * `Lost` when the connection drops, `Mcp` when the server's stream ends with an error; it ends
   * normally after `close()`. Throws at once (ContainerError) when there is no begun scope to ask on.
   */
  notifications(options: NotificationsOptions = {}): NotificationStream {
    const maxQueued = Math.max(1, options.maxQueued ?? 1024);
    const connection = this.connection;
    const queue: ServerNotification[] = [];
    let failure: ContainerError | undefined;
    let done = false;
    let wake: (() => void) | undefined;
    const signal = () => {
      wake?.();
      wake = undefined;
    };
    // Not reported as held: a notification stream is quiet whether a gate holds it or not.
    const unsubscribe = connection.subscribeNotifications({
      push: (notification) => {
        if (done) return;
        queue.push(notification);
        if (queue.length > maxQueued) {
          queue.shift();
          connection.emit({ type: "notificationsDropped", dropped: 1 });
        }
        signal();
      },
      fail: (error) => {
        if (done) return;
        failure ??= error;
        done = true;
        signal();
      },
      end: () => {
        done = true;
        signal();
      },
    });
    const close = () => {
      if (!done) failure = undefined;
      done = true;
      queue.length = 0;
      unsubscribe();
      options.signal?.removeEventListener("abort", close);
      signal();
    };
    if (options.signal?.aborted) close();
    else options.signal?.addEventListener("abort", close, { once: true });
    return {
      close,
      async *[Symbol.asyncIterator]() {
        try {
          for (;;) {
            if (queue.length > 0) {
              yield queue.shift()!;
              continue;
            }
            if (failure) throw failure;
            if (done) return;
            await new Promise<void>((resolve) => (wake = resolve));
          }
        } finally {
          unsubscribe();
          options.signal?.removeEventListener("abort", close);
        }
      },
    };
  }
}

function resultOf(what: string, answer: { variant: "Result"; result: unknown } | { variant: "Error"; error: unknown }): unknown {
  if (answer.variant === "Error") throw new ContainerError({ variant: "Mcp", what, error: answer.error as ErrorData });
  return answer.result;
}
