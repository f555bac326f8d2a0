// relayToMcp: answer every MCP ask of a proxy by forwarding it to a real MCP server through the MCP
// SDK's client (Streamable HTTP or stdio), and relay that server's notifications on the stream.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport, StreamableHTTPError } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import type { Transport } from "@modelcontextprotocol/sdk/shared/transport.js";
import {
  CallToolResultSchema,
  ErrorCode,
  ListResourcesResultSchema,
  ListToolsResultSchema,
  McpError,
  ReadResourceResultSchema,
  type ServerNotification,
} from "@modelcontextprotocol/sdk/types.js";
import type { ErrorData } from "@diverge/codec";
import type { ProxyHandlers } from "../../paths/connect.js";
import type { McpAnswer, NotificationSink } from "./answering.js";
import { perRequestSignalFetch } from "@diverge/multiplexer";
import { GroupStdioTransport } from "./stdio-transport.js";

/** Where the MCP server is: a Streamable HTTP endpoint, or a command speaking MCP on stdio. */
export type McpTarget =
  | { readonly url: string | URL }
  | { readonly command: string; readonly args?: readonly string[]; readonly env?: Record<string, string>; readonly cwd?: string };

export interface RelayOptions {
  /** How the relay introduces itself to the MCP server. */
  readonly clientInfo?: { readonly name: string; readonly version: string };
  /** Told about every failure to reach the MCP server (each also becomes a -32603 answer). */
  readonly onError?: (error: Error) => void;
}

export interface McpRelay extends ProxyHandlers {
  /** Disconnects from the MCP server and ends every notification stream with a clean close. */
  close(): Promise<void>;
}

/** The SDK's own timeout is 60 s; the protocol has none, so a long tool call must not be cut here. */
const NO_TIMEOUT = { timeout: 2_147_483_647 } as const;

/** How long the relay waits before dialling the MCP server again for open notification streams. */
const REDIAL_MS = 100;

export function relayToMcp(target: McpTarget, options: RelayOptions = {}): McpRelay {
  const clientInfo = options.clientInfo ?? { name: "diverge-relay", version: "2.3.0" };
  const sinks = new Set<NotificationSink>();
  let connecting: Promise<Client> | undefined;
  /** The client `connecting` resolved to, once it has. */
  let live: Client | undefined;
  let closed = false;

  const makeTransport = (): Transport =>
    "url" in target
      ? new StreamableHTTPClientTransport(new URL(String(target.url)), { fetch: perRequestSignalFetch() })
      : new GroupStdioTransport(target);

  /** One client, dialled on first use and again after its transport ended. */
  const client = (): Promise<Client> => {
    if (connecting) return connecting;
    const attempt = (async () => {
      const mcp = new Client(clientInfo, { capabilities: {} });
      mcp.fallbackNotificationHandler = async (notification) => {
        for (const sink of sinks) sink.send(notification as ServerNotification);
      };
      let connected = false;
      mcp.onclose = () => {
        if (connecting === attempt) connecting = undefined;
        if (live === mcp) live = undefined;
        // A connection that never opened has nothing to re-dial; the caller sees its failure.
        if (!connected || closed || sinks.size === 0) return;
        // Open notification streams need a connection to hear anything: dial again (after a breath,
        // so a server that closes every session at once is not dialled in a tight loop). Only if
        // that fails do the streams end, with the error, so the proxy asks for them again later.
        setTimeout(() => {
          if (closed || sinks.size === 0 || connecting) return;
          client().catch((problem: unknown) => {
            const error = errorDataOf(problem, options.onError);
            for (const sink of [...sinks]) sink.fail(error);
          });
        }, REDIAL_MS);
      };
      mcp.onerror = (error) => {
        // The server's notification stream (the SDK's GET stream) could not be reopened: a restarted
        // server forgot the session. With streams open, drop this connection; onclose dials anew.
        if (connected && !closed && sinks.size > 0 && connecting === attempt && /SSE stream|reconnection attempts/.test(error.message)) {
          connecting = undefined;
          live = undefined;
          void mcp.close().catch(() => {});
        }
      };
      await mcp.connect(makeTransport());
      connected = true;
      return mcp;
    })();
    connecting = attempt;
    attempt.then(
      (mcp) => {
        if (connecting === attempt) live = mcp;
      },
      () => {
        if (connecting === attempt) connecting = undefined;
      },
    );
    return attempt;
  };

  const forward = async <R>(call: (mcp: Client) => Promise<R>): Promise<McpAnswer<R>> => {
    for (let attempt = 0; ; attempt++) {
      let mcp: Client | undefined;
      try {
        mcp = await client();
        return { variant: "Result", result: await call(mcp) };
      } catch (problem) {
        // Not the server's own answer: the connection may be stale (a restarted server forgets its
        // sessions), so the next exchange dials afresh.
        if (mcp && !isServerError(problem)) {
          if (live === mcp) {
            live = undefined;
            connecting = undefined;
          }
          void mcp.close().catch(() => {});
          // MCP: a 404 to a request of the session means "start a new session". The server never
          // acted on that request (nor on one whose connection was refused): sent again once, afresh.
          if (attempt === 0 && !closed && notDelivered(problem)) continue;
        }
        return { variant: "Error", error: errorDataOf(problem, options.onError) };
      }
    }
  };

  /**
   * The request's options. A progress token in `_meta` (the proxy's, unique on its hop) is replaced
   * on the MCP server's hop by the SDK's own (its request id, unique per connection); the server's
   * progress comes back through `onprogress` and goes on the notification stream with the proxy's token.
   */
  const optionsFor = (params: { _meta?: { progressToken?: unknown } } | null | undefined) => {
    const token = params?._meta?.progressToken;
    if (typeof token !== "string" && typeof token !== "number") return NO_TIMEOUT;
    return {
      ...NO_TIMEOUT,
      onprogress: (progress: Record<string, unknown>) => {
        const notification = { method: "notifications/progress", params: { ...progress, progressToken: token } } as ServerNotification;
        for (const sink of sinks) sink.send(notification);
      },
    };
  };

  return {
    listTools: (params) => forward((mcp) => mcp.request({ method: "tools/list", params: params ?? undefined }, ListToolsResultSchema, optionsFor(params))),
    listResources: (params) => forward((mcp) => mcp.request({ method: "resources/list", params: params ?? undefined }, ListResourcesResultSchema, optionsFor(params))),
    callTool: (params) => forward((mcp) => mcp.request({ method: "tools/call", params }, CallToolResultSchema, optionsFor(params))),
    readResource: (params) => forward((mcp) => mcp.request({ method: "resources/read", params }, ReadResourceResultSchema, optionsFor(params))),
    notifications: async (sink) => {
      sinks.add(sink);
      sink.signal.addEventListener("abort", () => sinks.delete(sink));
      try {
        // Connecting opens the server's notification stream (the SDK's GET stream over HTTP).
        await client();
      } catch (problem) {
        sink.fail(errorDataOf(problem, options.onError));
      }
    },
    async close() {
      closed = true;
      for (const sink of [...sinks]) sink.end();
      sinks.clear();
      const pending = connecting;
      connecting = undefined;
      if (pending) await pending.then((mcp) => mcp.close()).catch(() => {});
    },
  };
}

/** The server cannot have acted on the request: its session was unknown (404), or no connection was made. */
function notDelivered(problem: unknown): boolean {
  if (problem instanceof StreamableHTTPError) return problem.code === 404;
  return (problem as { cause?: { code?: unknown } } | undefined)?.cause?.code === "ECONNREFUSED";
}

/**
 * An MCP error the server returned passes through with its code, message and data; anything else
 * (the server unreachable, the connection lost) is an internal error (-32603) with the reason.
 */
function isServerError(problem: unknown): problem is McpError {
  return problem instanceof McpError && problem.code !== ErrorCode.ConnectionClosed && problem.code !== ErrorCode.RequestTimeout;
}

function errorDataOf(problem: unknown, onError: ((error: Error) => void) | undefined): ErrorData {
  if (isServerError(problem)) {
    // The SDK prefixes its message with "MCP error <code>: "; the relayed message is the server's own.
    const message = problem.message.replace(/^MCP error -?\d+: /, "");
    return problem.data === undefined ? { code: problem.code, message } : { code: problem.code, message, data: problem.data };
  }
  const error = problem instanceof Error ? problem : new Error(String(problem));
  onError?.(error);
  return { code: ErrorCode.InternalError, message: error.message };
}
