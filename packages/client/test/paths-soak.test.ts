// The soak: hundreds of exchanges from real MCP SDK clients (the program) through a real proxy to a
// provider that injects seeded random faults on every ask. Checks that every call ends exactly once
// with the outcome the provider's last word on it implies, that re-asks follow the rules, and that
// notifications follow theirs. Set DIVERGE_SOAK_SEED to replay a run; DIVERGE_SOAK_CALLS to resize.
import { afterAll, describe, expect, it } from "vitest";
import { WebSocket } from "ws";
import type { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { McpError } from "@modelcontextprotocol/sdk/types.js";
import {
  decodeRequestsAsk,
  encodeMcpCallToolAnswer,
  encodeMcpListResourcesAnswer,
  encodeMcpListToolsAnswer,
  encodeMcpNotificationsAnswer,
  encodeMcpReadResourceAnswer,
  type RequestsAsk,
} from "@diverge/codec";
import { startProxy, type RunningProxy } from "@diverge/server";
import { delay, programClient } from "./paths-helpers.js";

const SEED = Number(process.env.DIVERGE_SOAK_SEED ?? 0x5eed);
const CALLS = Number(process.env.DIVERGE_SOAK_CALLS ?? 600);
const SESSIONS = 4;
const IN_FLIGHT = 24;

/** mulberry32: small, seeded, good enough to pick faults. */
function random(seed: number): () => number {
  let state = seed >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

type Fault = "answer" | "error" | "decline" | "cutBefore" | "cutAfter" | "dropRequests" | "malformed" | "textThenAnswer" | "double";
const ALL_FAULTS: [Fault, number][] = [
  ["answer", 40],
  ["error", 9],
  ["decline", 7],
  ["cutBefore", 10],
  ["cutAfter", 10],
  ["dropRequests", 2],
  ["malformed", 7],
  ["textThenAnswer", 8],
  ["double", 7],
];
/** DIVERGE_SOAK_ONLY=answer (say) narrows the faults, e.g. to measure a run without any. */
const FAULTS = process.env.DIVERGE_SOAK_ONLY ? ALL_FAULTS.filter(([fault]) => process.env.DIVERGE_SOAK_ONLY!.split(",").includes(fault)) : ALL_FAULTS;
const TERMINAL: ReadonlySet<string> = new Set(["answer", "error", "decline", "malformed", "textThenAnswer", "double"]);

/** What the provider did with one ask, as far as it could tell. */
interface Handled {
  readonly ask: RequestsAsk;
  readonly id: string | undefined;
  readonly connection: number;
  /** The fault, or "refused" when the path could not be opened (the proxy had forgotten it). */
  outcome: Fault | "refused" | "pending";
}

interface StreamRecord {
  readonly channel: number;
  readonly connection: number;
  opened?: number;
  ended?: number;
  how?: "cut" | "clean" | "error" | "refused";
  endConnection?: number;
  sent: number;
}

const PATHS: Record<string, string> = {
  McpListTools: "/mcp/list-tools",
  McpListResources: "/mcp/list-resources",
  McpCallTool: "/mcp/call-tool",
  McpReadResource: "/mcp/read-resource",
  McpNotifications: "/mcp/notifications",
};

function idOf(ask: RequestsAsk): string | undefined {
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

function errorCodeOf(id: string): number {
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
  // The same [1] layout for all four kinds.
  return encodeMcpCallToolAnswer({ variant: "Error", error: { code: errorCodeOf(id), message: `fault for ${id}`, data: { id } } });
}

class FaultyProvider {
  readonly handled: Handled[] = [];
  readonly streams: StreamRecord[] = [];
  connection = 0;
  /** The number of the /requests connection that opened last (open or since closed). */
  lastOpened = 0;
  notificationSeq = 0;
  private requests: WebSocket | undefined;
  private stopped = false;
  private readonly pick: () => Fault;
  private readonly openPaths = new Set<WebSocket>();

  constructor(
    private readonly port: number,
    private readonly rng: () => number,
  ) {
    const total = FAULTS.reduce((sum, [, weight]) => sum + weight, 0);
    this.pick = () => {
      let at = rng() * total;
      for (const [fault, weight] of FAULTS) if ((at -= weight) < 0) return fault;
      return "answer";
    };
  }

  start(): Promise<void> {
    return new Promise((resolve) => {
      const dial = () => {
        if (this.stopped) return;
        const socket = new WebSocket(`ws://127.0.0.1:${this.port}/requests`);
        const connection = ++this.connection;
        socket.on("message", (data, isBinary) => {
          if (isBinary) void this.onAsk(decodeRequestsAsk(new Uint8Array(data as Buffer)), connection);
        });
        socket.on("open", () => {
          this.requests = socket;
          this.lastOpened = connection;
          resolve();
        });
        socket.on("error", () => {});
        socket.on("close", () => {
          if (this.requests === socket) this.requests = undefined;
          setTimeout(dial, 2);
        });
      };
      dial();
    });
  }

  stop(): void {
    this.stopped = true;
    this.requests?.terminate();
    for (const socket of this.openPaths) socket.terminate();
  }

  private open(path: string): Promise<WebSocket | undefined> {
    return new Promise((resolve) => {
      const socket = new WebSocket(`ws://127.0.0.1:${this.port}${path}`);
      socket.on("open", () => {
        this.openPaths.add(socket);
        socket.once("close", () => this.openPaths.delete(socket));
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

  private async onAsk(ask: RequestsAsk, connection: number): Promise<void> {
    const path = `${PATHS[ask.variant]}/${ask.channel}`;
    if (ask.variant === "McpNotifications") return this.stream(ask, connection, path);
    const record: Handled = { ask, id: idOf(ask), connection, outcome: "pending" };
    this.handled.push(record);
    const fault = this.pick();
    if (fault === "dropRequests") {
      record.outcome = "dropRequests";
      if (this.requests && this.connection === connection) this.requests.terminate();
      return;
    }
    const socket = await this.open(path);
    if (!socket) {
      record.outcome = "refused";
      return;
    }
    record.outcome = fault;
    const id = record.id!;
    const sent = (frame: Uint8Array | string) => new Promise<void>((resolve) => socket.send(frame, () => resolve()));
    switch (fault) {
      case "answer":
        await sent(resultFrame(ask, id));
        socket.close();
        break;
      case "error":
        await sent(errorFrame(id));
        socket.close();
        break;
      case "decline":
        socket.close();
        break;
      case "cutBefore":
        socket.terminate();
        break;
      case "cutAfter":
        await sent(resultFrame(ask, id));
        await delay(2);
        socket.terminate();
        break;
      case "malformed":
        await sent(new Uint8Array([0, 0x7b, 0x7b]));
        socket.close();
        break;
      case "textThenAnswer":
        await sent("text is ignored");
        await sent(resultFrame(ask, id));
        socket.close();
        break;
      case "double":
        await sent(resultFrame(ask, id));
        await sent(errorFrame(id));
        socket.close();
        break;
    }
  }

  private async stream(ask: RequestsAsk, connection: number, path: string): Promise<void> {
    const record: StreamRecord = { channel: ask.channel, connection, sent: 0 };
    this.streams.push(record);
    const socket = await this.open(path);
    if (!socket) {
      record.how = "refused";
      return;
    }
    record.opened = performance.now();
    const count = 3 + Math.floor(this.rng() * 20);
    const ending = this.rng();
    for (let i = 0; i < count && socket.readyState === socket.OPEN && !this.stopped; i++) {
      socket.send(encodeMcpNotificationsAnswer({ variant: "Notification", notification: { method: "notifications/message", params: { level: "info", data: ++this.notificationSeq } } }));
      record.sent++;
      await delay(3);
    }
    record.endConnection = this.lastOpened;
    record.ended = performance.now();
    if (ending < 0.5) {
      record.how = "cut";
      socket.terminate();
    } else if (ending < 0.75) {
      record.how = "clean";
      socket.close();
    } else {
      record.how = "error";
      socket.send(encodeMcpNotificationsAnswer({ variant: "Error", error: { code: -32603, message: "stream ends" } }));
      socket.close();
    }
    // A deliberate end is asked again only on a newer /requests connection: drop this one soon.
    if (record.how !== "cut") setTimeout(() => this.requests?.terminate(), 40);
  }
}

type Outcome = { result: string } | { code: number; diverge?: string };

async function call(client: Client, i: number): Promise<Outcome> {
  const id = `c${i}`;
  try {
    switch (i % 4) {
      case 0:
        return { result: String(((await client.callTool({ name: "soak", arguments: { id } })).content as { text: string }[])[0]!.text) };
      case 1:
        return { result: (await client.listTools({ cursor: id })).tools[0]!.name };
      case 2:
        return { result: (await client.listResources({ cursor: id })).resources[0]!.name };
      default:
        return { result: String((await client.readResource({ uri: `soak://${id}` })).contents[0]!.text) };
    }
  } catch (error) {
    if (!(error instanceof McpError)) throw error;
    const diverge = (error.data as { diverge?: string } | undefined)?.diverge;
    return diverge ? { code: error.code, diverge } : { code: error.code };
  }
}

function expectedOf(fault: Fault, id: string): Outcome {
  switch (fault) {
    case "answer":
    case "textThenAnswer":
    case "double":
      return { result: id };
    case "error":
      return { code: errorCodeOf(id) };
    case "decline":
      return { code: -32603, diverge: "NotServed" };
    case "malformed":
      return { code: -32603, diverge: "UnreadableAnswer" };
    default:
      throw new Error(`${fault} is not terminal`);
  }
}

let proxy: RunningProxy | undefined;
let provider: FaultyProvider | undefined;
const clients: Client[] = [];
afterAll(async () => {
  provider?.stop();
  for (const client of clients) await client.close().catch(() => {});
  await proxy?.close();
});

describe(`soak (seed ${SEED}, ${CALLS} calls)`, () => {
  it("ends every call exactly once with the outcome the provider's last word implies; re-asks and notifications follow the rules", { timeout: 120_000 }, async () => {
    proxy = await startProxy({ port: 0, programPort: 0, pgPort: 0, secretsGate: false });
    provider = new FaultyProvider(proxy.port, random(SEED));
    await provider.start();
    for (let s = 0; s < SESSIONS; s++) clients.push(await programClient(proxy.programPort));
    const heard: number[][] = clients.map(() => []);
    clients.forEach((client, s) => {
      client.fallbackNotificationHandler = async (notification) => {
        if (notification.method === "notifications/message") heard[s]!.push((notification.params as { data: number }).data);
      };
    });

    const outcomes = new Map<string, Outcome[]>();
    const started = performance.now();
    let next = 0;
    const worker = async () => {
      while (next < CALLS) {
        const i = next++;
        const outcome = await call(clients[i % SESSIONS]!, i);
        const list = outcomes.get(`c${i}`) ?? [];
        list.push(outcome);
        outcomes.set(`c${i}`, list);
      }
    };
    await Promise.all(Array.from({ length: IN_FLIGHT }, worker));
    const seconds = (performance.now() - started) / 1000;
    await delay(50);

    const handled = provider.handled;
    // Every call ended exactly once.
    expect(outcomes.size).toBe(CALLS);
    for (const list of outcomes.values()) expect(list).toHaveLength(1);
    // Channels ascend across the proxy's life and are never reused.
    const channels = [...handled.map((h) => h.ask.channel), ...provider.streams.map((s) => s.channel)].sort((a, b) => a - b);
    expect(new Set(channels).size).toBe(channels.length);
    expect(channels[0]).toBe(1);
    // Per call: asked until a terminal answer, never after one, and the program saw exactly that.
    const byId = new Map<string, Handled[]>();
    for (const h of handled) byId.set(h.id!, [...(byId.get(h.id!) ?? []), h]);
    let reasked = 0;
    for (const [id, [outcome]] of outcomes) {
      const asks = byId.get(id) ?? [];
      const terminal = asks.filter((h) => TERMINAL.has(h.outcome));
      expect(terminal, `${id}: ${asks.map((h) => h.outcome).join(",")}`).toHaveLength(1);
      expect(asks[asks.length - 1]).toBe(terminal[0]);
      for (let k = 1; k < asks.length; k++) {
        expect(asks[k]!.ask.channel).toBeGreaterThan(asks[k - 1]!.ask.channel);
        expect(asks[k]!.ask).toMatchObject({ variant: asks[0]!.ask.variant });
      }
      reasked += asks.length - 1;
      expect(outcome, id).toEqual(expectedOf(terminal[0]!.outcome as Fault, id));
    }
    // Notifications: first asked after the first exchange; one stream at a time; a deliberate end
    // is asked again only on a newer /requests connection.
    const streams = provider.streams;
    expect(streams.length).toBeGreaterThan(0);
    expect(streams[0]!.channel).toBeGreaterThan(Math.min(...handled.map((h) => h.ask.channel)));
    const opened = streams.filter((s) => s.opened !== undefined);
    for (let k = 1; k < opened.length; k++) expect(opened[k]!.opened!).toBeGreaterThanOrEqual(opened[k - 1]!.ended ?? Infinity);
    for (let k = 1; k < streams.length; k++) {
      const before = streams[k - 1]!;
      if (before.how === "clean" || before.how === "error") expect(streams[k]!.connection).toBeGreaterThan(before.endConnection!);
    }
    // Each session hears notifications in the order they were sent, each at most once.
    const received = heard.reduce((sum, list) => sum + list.length, 0);
    for (const list of heard) for (let k = 1; k < list.length; k++) expect(list[k]!).toBeGreaterThan(list[k - 1]!);
    for (const list of heard) for (const seq of list) expect(seq).toBeLessThanOrEqual(provider.notificationSeq);

    const counts: Record<string, number> = {};
    for (const h of handled) counts[h.outcome] = (counts[h.outcome] ?? 0) + 1;
    const summary = {
      seed: SEED,
      calls: CALLS,
      seconds: Number(seconds.toFixed(2)),
      callsPerSecond: Math.round(CALLS / seconds),
      asksPerSecond: Math.round((handled.length + streams.length) / seconds),
      asks: handled.length,
      reasked,
      requestsConnections: provider.connection,
      notificationStreams: streams.length,
      notificationsSent: provider.notificationSeq,
      notificationsReceived: received,
      faults: counts,
    };
    process.stdout.write(`soak: ${JSON.stringify(summary)}\n`);
    if (FAULTS.some(([fault]) => !TERMINAL.has(fault))) expect(reasked).toBeGreaterThan(0);
  });
});
