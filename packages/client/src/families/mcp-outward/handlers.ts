// The MCP handlers of the provider in the generated shape (`ProviderHandlers`: mcpListTools, …,
// mcpNotifications), from handlers in the relay's shape (`listTools(params)`, a notification sink):
// one answerer for `/requests` kinds 0-4 and for the begin scope's proxy-opened channels 7-11 alike.
import type { ServerNotification } from "@diverge/codec";
import type { ProviderHandlers } from "../../gen/exchanges.js";
import type { AnswerContext } from "../../exchanges/engine.js";
import type { ProxyHandlers } from "../../paths/connect.js";
import type { McpAnswer, NotificationSink } from "./answering.js";

const INTERNAL_ERROR = -32603;

/** Notifications kept for a channel that does not drain; older ones beyond it are dropped. */
const NOTIFICATION_BUFFER = 1024;

type Answering<P, R> = ((params: P, ask: { channel: number; path: string }) => McpAnswer<R> | undefined | Promise<McpAnswer<R> | undefined>) | undefined;

function answering<P, R>(handler: Answering<P, R>, onError?: (error: Error) => void) {
  return (
    handler &&
    (async (ask: { readonly params: P }, context: AnswerContext): Promise<McpAnswer<R> | undefined> => {
      try {
        return await handler(ask.params, { channel: context.channel, path: context.path });
      } catch (problem) {
        const error = problem instanceof Error ? problem : new Error(String(problem));
        onError?.(error);
        return { variant: "Error", error: { code: INTERNAL_ERROR, message: error.message } };
      }
    })
  );
}

/** `handlers`' MCP members in the generated shape; a handler that throws answers -32603 with its message. */
export function mcpProviderHandlers(handlers: ProxyHandlers, options: { onError?: (error: Error) => void } = {}): ProviderHandlers {
  const notifications = handlers.notifications;
  return {
    mcpListTools: answering(handlers.listTools, options.onError) as ProviderHandlers["mcpListTools"],
    mcpListResources: answering(handlers.listResources, options.onError) as ProviderHandlers["mcpListResources"],
    mcpCallTool: answering(handlers.callTool, options.onError) as ProviderHandlers["mcpCallTool"],
    mcpReadResource: answering(handlers.readResource, options.onError) as ProviderHandlers["mcpReadResource"],
    mcpNotifications:
      notifications &&
      (async function* (_ask, context) {
        type Message = { variant: "Notification"; notification: ServerNotification } | { variant: "Error"; error: { code: number; message: string; data?: unknown } };
        const queue: Message[] = [];
        let done = false;
        let wake: (() => void) | undefined;
        const signal = () => {
          wake?.();
          wake = undefined;
        };
        const controller = new AbortController();
        context.signal.addEventListener("abort", () => {
          controller.abort();
          done = true;
          signal();
        });
        const sink: NotificationSink = {
          send: (notification) => {
            if (done) return false;
            queue.push({ variant: "Notification", notification });
            if (queue.length > NOTIFICATION_BUFFER) queue.shift();
            signal();
            return true;
          },
          fail: (error) => {
            if (done) return;
            queue.push({ variant: "Error", error });
            done = true;
            signal();
          },
          end: () => {
            done = true;
            signal();
          },
          signal: controller.signal,
        };
        try {
          await notifications(sink, { channel: context.channel, path: context.path });
        } catch (problem) {
          sink.fail({ code: INTERNAL_ERROR, message: problem instanceof Error ? problem.message : String(problem) });
        }
        try {
          for (;;) {
            if (queue.length > 0) {
              const next = queue.shift()!;
              yield next as never;
              if (next.variant === "Error") return;
              continue;
            }
            if (done) return;
            await new Promise<void>((resolve) => (wake = resolve));
          }
        } finally {
          controller.abort();
        }
      } as ProviderHandlers["mcpNotifications"]),
  };
}

/** The MCP members of the relay's shape (`relayToMcp`, `/requests` kinds 0-4) and their begin-scope twins. */
const RELAY_SHAPED = [
  ["listTools", "mcpListTools"],
  ["listResources", "mcpListResources"],
  ["callTool", "mcpCallTool"],
  ["readResource", "mcpReadResource"],
  ["notifications", "mcpNotifications"],
] as const;

/**
 * The handlers of the begin scope from either shape, so `openContainer(url, { handlers })` takes what
 * `connectProxy(url, handlers)` takes: an MCP member in the relay's shape (`callTool`, as `relayToMcp`
 * gives) answers its exchange as `mcpProviderHandlers` would, unless its generated twin
 * (`mcpCallTool`) is given too. Every other member (the vault's, a command's) has one name in both.
 */
export function beginScopeHandlers(handlers: ProviderHandlers | ProxyHandlers): ProviderHandlers {
  const given = handlers as Record<string, unknown>;
  const relayShaped = RELAY_SHAPED.filter(([relay, twin]) => typeof given[relay] === "function" && given[twin] === undefined);
  if (relayShaped.length === 0) return handlers as ProviderHandlers;
  const converted = mcpProviderHandlers(handlers as ProxyHandlers) as Record<string, unknown>;
  // The original stays the prototype: its own members (and those it inherits) answer as before.
  const merged = Object.create(handlers) as Record<string, unknown>;
  for (const [, twin] of relayShaped) merged[twin] = converted[twin];
  return merged as ProviderHandlers;
}
