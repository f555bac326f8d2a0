// Case 4: the relays over loopback, against the MCP SDK calling the same MCP server directly.
//
// Three processes, as in production: the example container (its MCP server at /mcp, Streamable
// HTTP), the proxy (both transports on one port), and this process (the caller and, for (b), the
// provider). Every call is `tools/call greet {name}` on the example container's MCP server.
//   (a) inward: a provider's `openContainer` → tools::begin scope → proxy → container's /mcp
//   (b) outward: the program's MCP SDK client → proxy's program /mcp → `/requests` ask → this
//       process's provider (`connectProxy` + `relayToMcp`) → container's /mcp → answer path
//   (c) baseline: the MCP SDK client → container's /mcp directly
// Only 127.0.0.1 is ever dialled, and every load loop is bounded in calls and in time.
import type { AddressInfo } from "node:net";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { connectProxy, openContainer, perRequestSignalFetch, relayToMcp } from "@diverge/client";
import { WebSocket, WebSocketServer } from "ws";
import { load, startChild, type LoadResult } from "../processes.js";
import type { SuiteReport, Target } from "../run.js";

export interface RelayResult {
  /** Best of the rounds for each path and concurrency. */
  readonly paths: Record<"a" | "b" | "c", Record<string, LoadResult>>;
  /** What one answer's WebSocket costs on loopback: open, one message, close; vs one message on an open socket. */
  readonly webSocket: { readonly openSendCloseMicros: number; readonly sendOnOpenMicros: number };
}

const PATH_NAMES = {
  c: "(c) MCP SDK → MCP server (baseline)",
  a: "(a) tools::begin scope → proxy → MCP server",
  b: "(b) program → proxy → /requests → provider → MCP server",
} as const;

async function sdkClient(url: string, name: string): Promise<Client> {
  const client = new Client({ name, version: "1.0.0" });
  // The bench's own clients (the direct baseline and the program) get a signal per request, as the
  // relays do: a plain MCP SDK 1.32.2 client under this load piles Node fetch's abort listeners on its
  // transport's one signal and prints MaxListenersExceededWarning, which would read as the relays'.
  await client.connect(new StreamableHTTPClientTransport(new URL(url), { fetch: perRequestSignalFetch() }));
  return client;
}

/** Loopback WebSocket costs, against a plain `ws` server in this process. */
async function webSocketCost(count: number): Promise<RelayResult["webSocket"]> {
  const server = new WebSocketServer({ host: "127.0.0.1", port: 0 });
  await new Promise<void>((resolve) => server.once("listening", () => resolve()));
  server.on("connection", (socket) => socket.on("message", (data) => socket.send(data)));
  const url = `ws://127.0.0.1:${(server.address() as AddressInfo).port}/`;
  const payload = new Uint8Array(100);
  const roundTrip = (socket: WebSocket) => new Promise<void>((resolve) => {
    socket.once("message", () => resolve());
    socket.send(payload);
  });
  const open = () => new Promise<WebSocket>((resolve, reject) => {
    const socket = new WebSocket(url);
    socket.once("open", () => resolve(socket));
    socket.once("error", reject);
  });
  try {
    // Warm up, then time: a fresh socket per message, then many messages on one socket.
    for (let i = 0; i < 20; i++) {
      const s = await open();
      await roundTrip(s);
      s.close();
    }
    let t = performance.now();
    for (let i = 0; i < count; i++) {
      const s = await open();
      await roundTrip(s);
      await new Promise<void>((resolve) => {
        s.once("close", () => resolve());
        s.close();
      });
    }
    const openSendCloseMicros = ((performance.now() - t) * 1000) / count;
    const kept = await open();
    t = performance.now();
    for (let i = 0; i < count; i++) await roundTrip(kept);
    const sendOnOpenMicros = ((performance.now() - t) * 1000) / count;
    kept.close();
    return { openSendCloseMicros, sendOnOpenMicros };
  } finally {
    for (const c of server.clients) c.terminate();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  }
}

export async function relaySuite(quick: boolean, log: (line: string) => void): Promise<SuiteReport> {
  const seconds = quick ? 0.3 : 3;
  const rounds = quick ? 1 : 2;
  const maxCalls = quick ? 300 : 200_000;
  const concurrencies = [1, 32];
  const container = await startChild(["container"]);
  const proxy = await startChild(["proxy", String(container.ready.port)]);
  const mcpUrl = `http://127.0.0.1:${container.ready.port}/mcp`;
  const closers: (() => Promise<unknown> | unknown)[] = [() => proxy.close(), () => container.close()];
  try {
    // (c) the baseline client.
    const direct = await sdkClient(mcpUrl, "bench-direct");
    closers.unshift(() => direct.close());
    // (a) a provider on the multiplexed connection, the tools::begin scope begun.
    const connection = await openContainer(`ws://127.0.0.1:${proxy.ready.port}/`);
    closers.unshift(() => connection.close());
    await connection.beginTools({ arguments: { greeting: "Hello" }, image: { name: "diverge/example-greeter", digest: "sha256:00" } });
    await connection.feedSecrets({ API_KEY: "bench-key" });
    // (b) a provider on /requests relaying to the container's MCP server, and a program calling the proxy.
    const relay = relayToMcp({ url: mcpUrl });
    closers.unshift(() => relay.close());
    // Once a provider has begun tools on `/`, the program's asks go on the begin scope: (b) measures
    // /requests on a second proxy that nobody begins.
    const outward = await startChild(["proxy", String(container.ready.port)]);
    closers.push(() => outward.close());
    const provider = connectProxy(`ws://127.0.0.1:${outward.ready.port}`, relay);
    closers.unshift(() => provider.close());
    await provider.whenConnected();
    const program = await sdkClient(`http://127.0.0.1:${outward.ready.programPort}/mcp`, "bench-program");
    closers.unshift(() => program.close());

    let n = 0;
    const args = () => ({ name: "greet", arguments: { name: `caller ${n++ % 1000}` } });
    const calls = {
      c: () => direct.callTool(args()),
      a: () => connection.mcp.callTool(args()),
      b: () => program.callTool(args()),
    };
    // Each path must answer as the server does before it is timed.
    for (const key of ["c", "a", "b"] as const) {
      const result = (await calls[key]()) as { content?: { text?: string }[] };
      if (!result.content?.[0]?.text?.includes("caller")) throw new Error(`path ${key} answered ${JSON.stringify(result)}`);
      await load(calls[key], 8, quick ? 0.05 : 0.5, quick ? 50 : 2000);
    }
    const best: RelayResult["paths"] = { a: {}, b: {}, c: {} };
    for (let round = 0; round < rounds; round++) {
      for (const concurrency of concurrencies) {
        for (const key of round % 2 ? (["b", "a", "c"] as const) : (["c", "a", "b"] as const)) {
          log(`  relay ${key} N=${concurrency} round ${round + 1}`);
          const r = await load(calls[key], concurrency, seconds, maxCalls);
          const prev = best[key][String(concurrency)];
          if (!prev || r.callsPerSecond > prev.callsPerSecond) best[key][String(concurrency)] = r;
        }
      }
    }
    const webSocket = await webSocketCost(quick ? 20 : 500);
    const result: RelayResult = { paths: best, webSocket };

    const base32 = best.c["32"]!.callsPerSecond;
    const a32 = best.a["32"]!.callsPerSecond;
    const b32 = best.b["32"]!.callsPerSecond;
    const extra1 = best.b["1"]!.p50 - best.c["1"]!.p50;
    const targets: Target[] = [
      {
        case: 4,
        what: "(a) inward tools/call on the begin scope, N = 32",
        goal: "≥ 1.0× the direct MCP SDK's calls/s",
        value: `${(a32 / base32).toFixed(2)}× (${a32.toFixed(0)} vs ${base32.toFixed(0)} calls/s)`,
        met: a32 >= base32,
      },
      {
        case: 4,
        what: "(b) outward tools/call through /requests, N = 32",
        goal: "reported",
        value: `${(b32 / base32).toFixed(2)}× the direct MCP SDK's calls/s (${b32.toFixed(0)} calls/s)`,
        met: null,
      },
      {
        case: 4,
        what: "one WebSocket per answer",
        goal: "reported",
        value:
          `${webSocket.openSendCloseMicros.toFixed(0)} µs to open, answer and close a loopback WebSocket vs ` +
          `${webSocket.sendOnOpenMicros.toFixed(0)} µs for a message on an open one; (b) adds ${extra1.toFixed(2)} ms to the direct p50 at N = 1`,
        met: null,
      },
    ];
    const rows = (["c", "a", "b"] as const).flatMap((key) =>
      concurrencies.map((c) => {
        const r = best[key][String(c)]!;
        return [
          PATH_NAMES[key],
          String(c),
          r.callsPerSecond.toFixed(0),
          `${(r.callsPerSecond / best.c[String(c)]!.callsPerSecond).toFixed(2)}×`,
          `${r.p50.toFixed(2)} ms`,
          `${r.p99.toFixed(2)} ms`,
          String(r.calls),
        ];
      }),
    );
    return {
      result,
      targets,
      tables: [
        {
          title: "Case 4: relays over loopback (tools/call greet)",
          columns: ["path", "N", "calls/s", "vs (c)", "p50", "p99", "calls"],
          rows,
          notes: [
            `Best of ${rounds} round(s) of ${seconds} s per path and concurrency; the container, the proxy and the caller are three processes on ${"the same"} machine.`,
            `One WebSocket per answer: open + one message + close on loopback ${webSocket.openSendCloseMicros.toFixed(0)} µs; one message on an open socket ${webSocket.sendOnOpenMicros.toFixed(0)} µs.`,
          ],
        },
      ],
    };
  } finally {
    for (const close of closers) {
      try {
        await close();
      } catch {
        // Closing what is already closed.
      }
    }
  }
}
