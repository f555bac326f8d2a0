// The container's own MCP server on the multiplexed connection: the begin scope's provider-opened
// channels 3-6 (one exchange each, relayed through the proxy's one inward MCP client) and 7 (the
// container's notifications, for as long as the channel is open). Held by the secrets gate.
import { logEvent } from "@diverge/multiplexer/log";
import { encodeMcpCallToolAnswer, encodeMcpListResourcesAnswer, encodeMcpListToolsAnswer, encodeMcpNotificationsAnswer, encodeMcpReadResourceAnswer } from "@diverge/codec";
import type { Responder } from "@diverge/multiplexer";
import type { ToolsBeginChannelsProviderRoutes } from "../../gen/exchanges.js";
import { FRAME_HEADER, type ConnectionServices } from "../../multiplexed/family.js";
import type { McpOutcome } from "./inward-mcp.js";
import type { SharedInwardMcp } from "./shared.js";

/** Channels whose dropped notifications are counted apart in `stats()`. */
const DROPPED_STREAMS_KEPT = 1000;

type InwardChannels = Pick<ToolsBeginChannelsProviderRoutes<Responder>, "mcpListTools" | "mcpListResources" | "mcpCallTool" | "mcpReadResource" | "mcpNotifications">;

export class InwardMcpChannels {
  /** Open tag-7 channels and the removal of their subscription to the shared inward MCP client. */
  private readonly notificationChannels = new Map<Responder, () => void>();

  constructor(private readonly services: ConnectionServices) {}

  /** What each of the family's channels does. */
  readonly channels: InwardChannels = {
    mcpListTools: (request, responder) => this.relayGuarded(responder, { method: "tools/list", params: request.params }, (outcome) => encodeMcpListToolsAnswer(answerOf(outcome) as never)),
    mcpListResources: (request, responder) => this.relayGuarded(responder, { method: "resources/list", params: request.params }, (outcome) => encodeMcpListResourcesAnswer(answerOf(outcome) as never)),
    mcpCallTool: (request, responder) => this.relayGuarded(responder, { method: "tools/call", params: request.params }, (outcome) => encodeMcpCallToolAnswer(answerOf(outcome) as never)),
    mcpReadResource: (request, responder) => this.relayGuarded(responder, { method: "resources/read", params: request.params }, (outcome) => encodeMcpReadResourceAnswer(answerOf(outcome) as never)),
    mcpNotifications: (_request, responder) => this.services.guard(responder, `channel ${responder.channel}`, this.subscribe(responder)),
  };

  /** The connection ended: every notification channel's subscription goes. */
  closeAll(): void {
    for (const unsubscribe of this.notificationChannels.values()) unsubscribe();
    this.notificationChannels.clear();
  }

  private relayGuarded(responder: Responder, exchange: Parameters<SharedInwardMcp["exchange"]>[0], encode: (outcome: McpOutcome) => Uint8Array): void {
    this.services.guard(responder, `channel ${responder.channel}`, this.relay(responder, exchange, encode));
  }

  private async relay(responder: Responder, exchange: Parameters<SharedInwardMcp["exchange"]>[0], encode: (outcome: McpOutcome) => Uint8Array): Promise<void> {
    const { gate, inward, options, counters } = this.services;
    // Held until the program has its secrets; the gate lets exchanges through in arrival order. The
    // connection's end gives the wait up (nobody is left to answer).
    if (!(await passed(gate, this.services.signal)) || responder.finished) return;
    // The multiplexed protocol has no cancel of a channel: the exchange lasts until it is answered or
    // the provider's connection ends, which cancels it at the container's server.
    const outcome = await withReason(this.services.signal, "the provider's connection on / ended", (signal) => inward.exchange(exchange, this.services.origin, { signal }));
    let answer: Uint8Array;
    try {
      answer = encode(outcome);
    } catch (problem) {
      // The container's answer cannot be written as JSON (nested too deeply, say): say so instead.
      options.log(...logEvent("the container's {method} answer could not be encoded", { method: exchange.method }));
      answer = encode({ error: { code: -32603, message: `the container's answer could not be encoded: ${problem instanceof Error ? problem.name : "error"}` } });
    }
    if (answer.length + FRAME_HEADER > options.maxMessageBytes) {
      // The provider could not take it: the container's answer becomes an MCP error that says why.
      counters.oversizedAnswers++;
      options.log(...logEvent(`the container's {method} answer is ${answer.length} bytes, larger than the limit; answering with an error`, { method: exchange.method }));
      answer = encode({ error: { code: -32603, message: `the container's answer is ${answer.length} bytes, larger than the message limit of ${options.maxMessageBytes}` } });
    }
    responder.respond(answer);
    responder.finish();
  }

  private async subscribe(responder: Responder): Promise<void> {
    const { gate, inward, options, frames, counters } = this.services;
    if (!(await passed(gate, this.services.signal)) || responder.finished) return;
    const stream = `/ channel ${responder.channel}`;
    const dropped = counters.dropped;
    const drop = () => {
      // One key per channel that dropped, kept after it ends, but only so many: the rest add up under one key.
      const key = stream in dropped || Object.keys(dropped).length < DROPPED_STREAMS_KEPT ? stream : "/ other channels";
      dropped[key] = (dropped[key] ?? 0) + 1;
    };
    const subscription = await inward.subscribe({
      origin: this.services.origin,
      notify: (notification) => {
        if (responder.finished) {
          // The channel ended: its subscription to the shared client goes with it.
          this.notificationChannels.get(responder)?.();
          this.notificationChannels.delete(responder);
          return;
        }
        // A channel that cannot keep pace loses notifications; the count is in the proxy's stats.
        if (frames.bufferedAmount > options.maxNotificationBacklogBytes) return drop();
        let bytes: Uint8Array;
        try {
          bytes = encodeMcpNotificationsAnswer({ variant: "Notification", notification: notification as never });
        } catch {
          return drop();
        }
        if (bytes.length + FRAME_HEADER > options.maxMessageBytes) return drop();
        responder.respond(bytes);
      },
      // The container's server went away and no new session could be made: the channel ends with
      // the error rather than going silent.
      ended: (error) => {
        this.notificationChannels.delete(responder);
        if (responder.finished) return;
        responder.respond(encodeMcpNotificationsAnswer({ variant: "Error", error: error as never }));
        responder.finish();
      },
    });
    if ("error" in subscription) {
      responder.respond(encodeMcpNotificationsAnswer({ variant: "Error", error: subscription.error as never }));
      return responder.finish();
    }
    this.notificationChannels.set(responder, subscription.unsubscribe);
  }
}

/** Whether the gate let the exchange through (false: `signal` fired first). */
async function passed(gate: ConnectionServices["gate"], signal: AbortSignal): Promise<boolean> {
  try {
    await gate.pass(signal);
    return true;
  } catch {
    return false;
  }
}

/** Runs `work` with a signal aborted (with `reason`) when `outer` is; the link goes when `work` ends. */
export async function withReason<T>(outer: AbortSignal, reason: string, work: (signal: AbortSignal) => Promise<T>): Promise<T> {
  const controller = new AbortController();
  const abort = () => controller.abort(reason);
  if (outer.aborted) abort();
  else outer.addEventListener("abort", abort, { once: true });
  try {
    return await work(controller.signal);
  } finally {
    outer.removeEventListener("abort", abort);
  }
}

function answerOf(outcome: McpOutcome): { variant: "Result"; result: unknown } | { variant: "Error"; error: unknown } {
  return "result" in outcome ? { variant: "Result", result: outcome.result } : { variant: "Error", error: outcome.error };
}
