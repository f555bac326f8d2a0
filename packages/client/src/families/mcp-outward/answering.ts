// The handler shape of the outward MCP family (the relay's shape): one answerer per MCP ask of the
// program's, given the params and where the ask came from, and a sink for the notification stream.
import type { CallToolRequestParams, CallToolResult, ErrorData, ListResourcesResult, ListToolsResult, PaginatedRequestParams, ReadResourceRequestParams, ReadResourceResult, ServerNotification } from "@diverge/codec";

/** One answer of kinds 0 to 3: the MCP result, or the MCP error with its code. */
export type McpAnswer<R> = { readonly variant: "Result"; readonly result: R } | { readonly variant: "Error"; readonly error: ErrorData };

/** What a handler knows of the ask it answers. */
export interface AskInfo {
  readonly channel: number;
  /** The answer path, e.g. `/mcp/call-tool/7`. */
  readonly path: string;
}

export type Answering<P, R> = (params: P, ask: AskInfo) => McpAnswer<R> | undefined | Promise<McpAnswer<R> | undefined>;

/**
 * The MCP members of `ProxyHandlers`. A missing handler, or one that returns `undefined`, declines; a
 * handler that throws answers with an MCP internal error (-32603) carrying the thrown message.
 */
export interface McpPathsHandlers {
  readonly listTools?: Answering<PaginatedRequestParams | null, ListToolsResult>;
  readonly listResources?: Answering<PaginatedRequestParams | null, ListResourcesResult>;
  readonly callTool?: Answering<CallToolRequestParams, CallToolResult>;
  readonly readResource?: Answering<ReadResourceRequestParams, ReadResourceResult>;
  /** Called once per notification ask with the stream's sink; push notifications until it ends. */
  readonly notifications?: (sink: NotificationSink, ask: AskInfo) => void | Promise<void>;
}

/** The open notification path. */
export interface NotificationSink {
  /** Sends one notification; `false` when the path has already ended (nothing is sent). */
  send(notification: ServerNotification): boolean;
  /** Sends the error that ends the stream (its last message), then closes cleanly. */
  fail(error: ErrorData): void;
  /** Closes cleanly. With no notification sent before, that says "not served". */
  end(): void;
  /** Aborted when the path has ended, whoever ended it. */
  readonly signal: AbortSignal;
}
