// The many-paths half of the soak: a provider over raw `ws` that answers every ask the proxy makes
// with a seeded random fault, and keeps a record of what it did, so each exchange's outcome can be
// checked against the provider's last word on it.
import { WebSocket } from "ws";
import {
  decodeRequestsAsk,
  encodeMcpCallToolAnswer,
  encodeMcpListResourcesAnswer,
  encodeMcpListToolsAnswer,
  encodeMcpNotificationsAnswer,
  encodeMcpReadResourceAnswer,
  type RequestsAsk,
} from "@diverge/codec";

/** What the provider does with one ask of kinds 0 to 3. */
export type PathFault = "answer" | "error" | "decline" | "cutBefore" | "cutAfter" | "dropRequests" | "malformed" | "textThenAnswer" | "double";

/** Faults after which the proxy must not ask again: the exchange has its outcome. */
export const TERMINAL_PATH_FAULTS: ReadonlySet<PathFault> = new Set(["answer", "error", "decline", "malformed", "textThenAnswer", "double"]);

export const PATH_FAULT_WEIGHTS: readonly (readonly [PathFault, number])[] = [
  ["answer", 45],
  ["error", 9],
  ["decline", 7],
  ["cutBefore", 9],
  ["cutAfter", 8],
  ["dropRequests", 1],
  ["malformed", 7],
  ["textThenAnswer", 7],
  ["double", 7],
];

const ANSWER_PATH: Record<string, string> = {
  McpListTools: "/mcp/list-tools",
  McpListResources: "/mcp/list-resources",
  McpCallTool: "/mcp/call-tool",
  McpReadResource: "/mcp/read-resource",
  McpNotifications: "/mcp/notifications",
};

/** The exchange id the soak hides in each ask's params. */
export function idOfAsk(ask: RequestsAsk): string | undefined {
  switch (ask.variant) {
    case "McpListTools":
    case "McpListResources":
      return ask.params?.cursor;
    case "McpCallTool":
      return String(ask.params.arguments?.id);
    case "McpReadResource":
      return ask.params.uri.replace("soak://", "");
    default:
      return undefined;
  }
}

export function errorCodeOf(id: string): number {
  return -32000 - (Number(id.replace(/\D/g, "")) % 90);
}

function resultFrame(ask: RequestsAsk, id: string): Uint8Array {
  switch (ask.variant) {
    case "McpListTools":
      return encodeMcpListToolsAnswer({ variant: "Result", result: { tools: [{ name: id, inputSchema: { type: "object" } }] } });
    case "McpListResources":
      return encodeMcpListResourcesAnswer({ variant: "Result", result: { resources: [{ uri: `soak://${id}`, name: id }] } });
    case "McpCallTool":
      return encodeMcpCallToolAnswer({ variant: "Result", result: { content: [{ type: "text", text: id }] } });
    case "McpReadResource":
      return encodeMcpReadResourceAnswer({ variant: "Result", result: { contents: [{ uri: `soak://${id}`, text: id }] } });
    default:
      throw new Error("not an exchange");
  }
}

function errorFrame(id: string): Uint8Array {
  return encodeMcpCallToolAnswer({ variant: "Error", error: { code: errorCodeOf(id), message: `fault for ${id}`, data: { id } } });
}

/** One ask as the provider handled it. */
export interface HandledAsk {
  readonly channel: number;
  readonly kind: string;
  readonly id: string;
  outcome: PathFault | "refused" | "pending";
}

export class FaultyProvider {
  /** Every exchange ask, by exchange id, in the order the provider saw them. */
  readonly byId = new Map<string, HandledAsk[]>();
  readonly faults: Record<string, number> = {};
  asks = 0;
  notificationAsks = 0;
  notificationsSent = 0;
  requestsConnections = 0;
  private requests: WebSocket | undefined;
  private stopped = false;
  private readonly openSockets = new Set<WebSocket>();
  private readonly pick: () => PathFault;

  constructor(
    private readonly port: number,
    private readonly rng: () => number,
  ) {
    const total = PATH_FAULT_WEIGHTS.reduce((sum, [, weight]) => sum + weight, 0);
    this.pick = () => {
      let at = rng() * total;
      for (const [fault, weight] of PATH_FAULT_WEIGHTS) if ((at -= weight) < 0) return fault;
      return "answer";
    };
  }

  /** Holds `/requests`, dialling again whenever it ends; resolves once the first is open. */
  start(): Promise<void> {
    return new Promise((resolve) => {
      const dial = () => {
        if (this.stopped) return;
        const socket = new WebSocket(`ws://127.0.0.1:${this.port}/requests`);
        socket.on("message", (data, isBinary) => {
          if (isBinary) void this.onAsk(decodeRequestsAsk(new Uint8Array(data as Buffer)));
        });
        socket.on("open", () => {
          this.requestsConnections++;
          this.requests = socket;
          resolve();
        });
        socket.on("error", () => {});
        socket.on("close", () => {
          if (this.requests === socket) this.requests = undefined;
          setTimeout(dial, 1);
        });
      };
      dial();
    });
  }

  stop(): void {
    this.stopped = true;
    this.requests?.terminate();
    for (const socket of this.openSockets) socket.terminate();
  }

  private open(path: string): Promise<WebSocket | undefined> {
    return new Promise((resolve) => {
      const socket = new WebSocket(`ws://127.0.0.1:${this.port}${path}`, { perMessageDeflate: false });
      socket.on("open", () => {
        this.openSockets.add(socket);
        socket.once("close", () => this.openSockets.delete(socket));
        resolve(socket);
      });
      socket.on("unexpected-response", (_request, response) => {
        response.resume();
        socket.terminate();
        resolve(undefined);
      });
      socket.on("error", () => resolve(undefined));
    });
  }

  private count(fault: string): void {
    this.faults[fault] = (this.faults[fault] ?? 0) + 1;
  }

  private async onAsk(ask: RequestsAsk): Promise<void> {
    const path = `${ANSWER_PATH[ask.variant]}/${ask.channel}`;
    if (ask.variant === "McpNotifications") return this.stream(path);
    this.asks++;
    const id = idOfAsk(ask)!;
    const record: HandledAsk = { channel: ask.channel, kind: ask.variant, id, outcome: "pending" };
    const list = this.byId.get(id);
    if (list) list.push(record);
    else this.byId.set(id, [record]);
    const fault = this.pick();
    if (fault === "dropRequests") {
      record.outcome = "dropRequests";
      this.count(fault);
      this.requests?.terminate();
      return;
    }
    const socket = await this.open(path);
    if (!socket) {
      record.outcome = "refused";
      this.count("refused");
      return;
    }
    record.outcome = fault;
    this.count(fault);
    const send = (frame: Uint8Array | string) => new Promise<void>((resolve) => socket.send(frame, () => resolve()));
    switch (fault) {
      case "answer":
        await send(resultFrame(ask, id));
        socket.close();
        break;
      case "error":
        await send(errorFrame(id));
        socket.close();
        break;
      case "decline":
        socket.close();
        break;
      case "cutBefore":
        socket.terminate();
        break;
      case "cutAfter":
        await send(resultFrame(ask, id));
        await new Promise((resolve) => setTimeout(resolve, 1));
        socket.terminate();
        break;
      case "malformed":
        await send(new Uint8Array([0, 0x7b, 0x7b]));
        socket.close();
        break;
      case "textThenAnswer":
        await send("text is ignored");
        await send(resultFrame(ask, id));
        socket.close();
        break;
      case "double":
        await send(resultFrame(ask, id));
        await send(errorFrame(id));
        socket.close();
        break;
    }
  }

  /** The notification stream: a few notifications, then a cut, a clean close or an error. */
  private async stream(path: string): Promise<void> {
    this.notificationAsks++;
    const socket = await this.open(path);
    if (!socket) return;
    const count = 1 + Math.floor(this.rng() * 5);
    for (let i = 0; i < count && socket.readyState === socket.OPEN && !this.stopped; i++) {
      socket.send(encodeMcpNotificationsAnswer({ variant: "Notification", notification: { method: "notifications/message", params: { level: "info", data: ++this.notificationsSent } } }));
      await new Promise((resolve) => setTimeout(resolve, 5));
    }
    const ending = this.rng();
    if (ending < 0.5) socket.terminate();
    else if (ending < 0.75) socket.close();
    else {
      socket.send(encodeMcpNotificationsAnswer({ variant: "Error", error: { code: -32603, message: "stream ends" } }));
      socket.close();
    }
  }
}
