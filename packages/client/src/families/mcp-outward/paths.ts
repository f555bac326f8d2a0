// The outward MCP family on the paths transport (`/requests` kinds 0-4, `/mcp/*/{channel}`): the
// relay-shaped handlers in the generated shape (kinds 0-3), and the notification stream (kind 4)
// answered through a sink that pushes onto the open path.
import { encodeMcpNotificationsAnswer } from "@diverge/codec";
import type { AnswerContext } from "../../exchanges/engine.js";
import type { ProviderHandlers } from "../../gen/exchanges.js";
import { ProviderError } from "../../paths/errors.js";
import type { PathsAnswerHost, PathsFamily } from "../../paths/answering.js";
import type { Answering, McpAnswer, McpPathsHandlers, NotificationSink } from "./answering.js";

const INTERNAL_ERROR = -32603;

/**
 * The MCP handlers of kinds 0 to 3 in the generated shape: a handler that throws answers with an MCP
 * internal error (-32603) carrying the thrown message.
 */
function generated(handlers: McpPathsHandlers, { emit }: PathsAnswerHost): Partial<ProviderHandlers> {
  const mcpAnswering =
    <P, R>(handler: Answering<P, R> | undefined) =>
    handler &&
    (async (ask: { readonly params: P }, context: AnswerContext): Promise<McpAnswer<R> | undefined> => {
      try {
        return await handler(ask.params, { channel: context.channel, path: context.path });
      } catch (problem) {
        const reason = problem instanceof Error ? problem.message : String(problem);
        emit({ type: "error", error: new ProviderError({ variant: "HandlerFailed", path: context.path, reason }) });
        return { variant: "Error", error: { code: INTERNAL_ERROR, message: reason } };
      }
    });
  return {
    mcpListTools: mcpAnswering(handlers.listTools) as ProviderHandlers["mcpListTools"],
    mcpListResources: mcpAnswering(handlers.listResources) as ProviderHandlers["mcpListResources"],
    mcpCallTool: mcpAnswering(handlers.callTool) as ProviderHandlers["mcpCallTool"],
    mcpReadResource: mcpAnswering(handlers.readResource) as ProviderHandlers["mcpReadResource"],
  };
}

async function streamNotifications(handlers: McpPathsHandlers, path: string, channel: number, { openPath, emit }: PathsAnswerHost): Promise<void> {
  const socket = await openPath(path);
  if (!socket) return;
  const handler = handlers.notifications;
  let sent = 0;
  let finished = false;
  const controller = new AbortController();
  void socket.ended.then((ending) => {
    controller.abort();
    emit({ type: "pathEnded", path, outcome: sent > 0 ? "streamEnded" : "declined", ending });
  });
  const sink: NotificationSink = {
    send: (notification) => {
      if (finished || !socket.isOpen) return false;
      socket.send(encodeMcpNotificationsAnswer({ variant: "Notification", notification }));
      sent++;
      return true;
    },
    fail: (error) => {
      if (finished) return;
      finished = true;
      if (socket.isOpen) {
        socket.send(encodeMcpNotificationsAnswer({ variant: "Error", error }));
        sent++;
      }
      socket.close();
    },
    end: () => {
      finished = true;
      socket.close();
    },
    signal: controller.signal,
  };
  if (!handler) return sink.end();
  try {
    await handler(sink, { channel, path });
  } catch (problem) {
    const reason = problem instanceof Error ? problem.message : String(problem);
    emit({ type: "error", error: new ProviderError({ variant: "HandlerFailed", path, reason }) });
    sink.fail({ code: INTERNAL_ERROR, message: reason });
  }
}

export const mcpOutwardPaths: PathsFamily<ProviderHandlers & McpPathsHandlers> = {
  generated,
  // The notification stream keeps its sink-shaped handler (the relay pushes into it).
  answer: (ask, handlers, path, host) => (ask.variant === "McpNotifications" && !handlers.mcpNotifications ? streamNotifications(handlers, path, ask.channel, host) : undefined),
};
