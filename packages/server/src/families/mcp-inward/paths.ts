// The paths transport's `/tool/*` (paths.md §4): the provider's MCP exchanges with the container's own
// MCP server, through the proxy's one inward MCP client (the one the begin scope's channels use).
// Every exchange is answered: params that do not parse with -32602, a server that cannot be reached
// with -32603 and the reason, the server's own error verbatim; an answer larger than the message
// limit with -32603 saying so (as on the begin scope). Held by the secrets gate like every MCP exchange
// while a provider begun on `/` can feed the secrets (until the path ends); refused at once, naming the
// gate and --no-secrets-gate, while none can (the paths transport cannot feed them).
import { logEvent, type Say } from "@diverge/multiplexer/log";
import type { ServerNotification } from "@modelcontextprotocol/sdk/types.js";
import { gateError, type Gate } from "../secrets/gate.js";
import type { ErrorData, InwardExchange, McpOutcome } from "./inward-mcp.js";
import type { SharedInwardMcp } from "./shared.js";
import { withReason } from "./multiplexed.js";
import type { PathContext, PathRequest } from "../../exchanges/paths.js";
import type { ProviderPathHandlers } from "../../gen/exchanges.js";

/** The origin of `/tool/*`'s exchanges and subscriptions: their progress reaches `/tool/notifications` only, not the begin scope's channels. */
const TOOL_PATHS = Object.freeze({ origin: "/tool/*" });

const INVALID_PARAMS = -32602;
const INTERNAL_ERROR = -32603;

/** Notifications kept for a provider that does not read; the oldest go first (the reference's 256). */
export const TOOL_NOTIFICATION_BUFFER = 256;

type McpAnswer = { variant: "Result"; result: never } | { variant: "Error"; error: ErrorData };

export interface ToolPathsOptions {
  readonly inward: SharedInwardMcp;
  readonly gate: Gate;
  readonly log: Say;
  /**
   * Whether a provider is begun on `/` now (it alone can feed the secrets). While the gate is shut
   * and none is, `/tool/*` is answered at once with the gate's error rather than held: the paths
   * transport cannot feed secrets. Default: never (every exchange held by a shut gate is refused).
   */
  readonly canFeedSecrets?: () => boolean;
}

/**
 * Passes the gate: at once when open; refused at once (the gate's error) when shut and no provider
 * can feed; else held until it opens or the path ends (bounded by the provider's own wait).
 */
async function passGate(gate: Gate, canFeed: () => boolean, context: PathContext, log: Say): Promise<ErrorData | undefined> {
  if (gate.isOpen) return undefined;
  if (!canFeed()) {
    log(...logEvent("{path}: refused at once: the secrets gate is shut and no provider is begun on / to feed the secrets (the paths transport cannot)", { path: context.path }));
    return gateError("the paths transport (/tool/*)");
  }
  try {
    await gate.pass(context.signal);
    return undefined;
  } catch {
    return { code: INTERNAL_ERROR, message: `the provider closed ${context.path} while the secrets gate held it` };
  }
}

export function toolPathHandlers({ inward, gate, log, canFeedSecrets = () => false }: ToolPathsOptions): ProviderPathHandlers {
  const answer = async (method: InwardExchange["method"], request: PathRequest<{ params: unknown }>, context: PathContext): Promise<McpAnswer> => {
    if (!request.ok) return { variant: "Error", error: { code: INVALID_PARAMS, message: request.reason } };
    const refused = await passGate(gate, canFeedSecrets, context, log);
    if (refused) return { variant: "Error", error: refused };
    if (context.signal.aborted) return { variant: "Error", error: { code: INTERNAL_ERROR, message: `the provider closed ${context.path}` } };
    // The provider closing its path (its own timeout, its cancellation) cancels the call at the container's server.
    const exchange = { method, params: (request.value.params ?? null) as never } as InwardExchange;
    const outcome: McpOutcome = await withReason(context.signal, `the provider closed ${context.path}`, (signal) => inward.exchange(exchange, TOOL_PATHS, { signal }));
    let reply: McpAnswer = "result" in outcome ? { variant: "Result", result: outcome.result as never } : { variant: "Error", error: outcome.error };
    let size: number;
    try {
      size = context.encodedSize(reply);
    } catch (problem) {
      log(...logEvent("{path}: the container's {method} answer could not be encoded", { path: context.path, method }));
      reply = { variant: "Error", error: { code: INTERNAL_ERROR, message: `the container's answer could not be encoded: ${problem instanceof Error ? problem.name : "error"}` } };
      size = 0;
    }
    if (size > context.maxMessageBytes) {
      log(...logEvent(`{path}: the container's {method} answer is ${size} bytes, larger than the limit; answering with an error`, { path: context.path, method }));
      reply = { variant: "Error", error: { code: INTERNAL_ERROR, message: `the container's answer is ${size} bytes, larger than the message limit of ${context.maxMessageBytes}` } };
    }
    return reply;
  };
  return {
    toolListTools: (request, context) => answer("tools/list", request, context) as never,
    toolListResources: (request, context) => answer("resources/list", request, context) as never,
    toolCallTool: (request, context) => answer("tools/call", request as PathRequest<{ params: unknown }>, context) as never,
    toolReadResource: (request, context) => answer("resources/read", request as PathRequest<{ params: unknown }>, context) as never,
    toolNotifications: (context) => notifications(inward, gate, canFeedSecrets, log, context) as never,
  };
}

/** What the container's server sends after the opening, until the provider closes; one error and the end when it cannot be reached. */
async function* notifications(inward: SharedInwardMcp, gate: Gate, canFeed: () => boolean, log: Say, context: PathContext): AsyncIterable<{ variant: "Notification"; notification: ServerNotification } | { variant: "Error"; error: ErrorData }> {
  const refused = await passGate(gate, canFeed, context, log);
  if (context.signal.aborted) return;
  if (refused) {
    yield { variant: "Error", error: refused };
    return;
  }
  const queue: ({ variant: "Notification"; notification: ServerNotification } | { variant: "Error"; error: ErrorData })[] = [];
  let wake: (() => void) | undefined;
  let done = false;
  const signal = () => {
    wake?.();
    wake = undefined;
  };
  const subscription = await inward.subscribe({
    origin: TOOL_PATHS,
    notify: (notification) => {
      if (done) return;
      queue.push({ variant: "Notification", notification });
      if (queue.length > TOOL_NOTIFICATION_BUFFER) queue.shift();
      signal();
    },
    ended: (error) => {
      queue.push({ variant: "Error", error });
      done = true;
      signal();
    },
  });
  if ("error" in subscription) {
    yield { variant: "Error", error: subscription.error };
    return;
  }
  const stop = () => {
    done = true;
    signal();
  };
  context.signal.addEventListener("abort", stop);
  try {
    for (;;) {
      if (queue.length > 0) {
        const next = queue.shift()!;
        yield next;
        if (next.variant === "Error") return;
        continue;
      }
      if (done || context.signal.aborted) return;
      await new Promise<void>((resolve) => (wake = resolve));
    }
  } finally {
    context.signal.removeEventListener("abort", stop);
    subscription.unsubscribe();
  }
}
