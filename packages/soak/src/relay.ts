// The relay soak: many relayed `tools/call` through the project's MCP relays at once, with the
// container's MCP server restarted on the same port now and then, watching memory and listeners over
// the run. The calls go round the relays chosen (all by default):
//
// - inward: the provider (openContainer) → the proxy's begin scope → the container's MCP server.
// - tool: the provider on the paths transport (PathsTools) → `/tool/*` → the same proxy's one inward
//   MCP session → the container's MCP server.
// - outward: a program (the MCP SDK's client) → the proxy's /mcp → /requests → relayToMcp → the same
//   MCP server (the far server of `diverge answer`), on a second proxy that nobody begins.
// - outward-scope: a program → the begun proxy's /mcp → the begin scope's outward channels (tags
//   7-11) → openContainer's handlers (mcpProviderHandlers over relayToMcp) → the same MCP server.
// Every fifth call of each relay carries a progress token, so the per-hop token maps are exercised too.
//
// Checked: every call answers with its own result (calls made while a restart is under way may fail
// with -32603, counted apart; none made after it may); heap after a full collection, the abort
// listeners on any one AbortSignal, program sessions, progress routes and the server's sessions stay
// flat after warm-up; no MaxListenersExceededWarning is printed.
import { randomUUID } from "node:crypto";
import { createServer, type IncomingMessage, type Server as HttpServer } from "node:http";
import type { AddressInfo } from "node:net";
import { setFlagsFromString } from "node:v8";
import { runInNewContext } from "node:vm";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { Server } from "@modelcontextprotocol/sdk/server/index.js";
import { StreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/streamableHttp.js";
import { CallToolRequestSchema, CallToolResultSchema, ListToolsRequestSchema } from "@modelcontextprotocol/sdk/types.js";
import { connectProxy, mcpProviderHandlers, openContainer, PathsTools, perRequestSignalFetch, relayToMcp } from "@diverge/client";
import { startProxy } from "@diverge/server";

/** The relays a soak can go through (see the top of this file). */
export const SOAK_RELAYS = ["inward", "outward", "tool", "outward-scope"] as const;
export type SoakRelay = (typeof SOAK_RELAYS)[number];

export interface RelaySoakOptions {
  /** Relayed tools/call in all, shared evenly by the relays. */
  readonly calls: number;
  /** The relays the calls go round. Default all of SOAK_RELAYS. */
  readonly relays?: readonly SoakRelay[];
  /** Calls in flight at once, per relay. Default 16. */
  readonly concurrency?: number;
  /** How many times the container's MCP server is stopped and started again on its port. Default 2. */
  readonly restarts?: number;
  /** Samples taken over the run (after a full collection each). Default 20. */
  readonly samples?: number;
  /** The share of the run counted as warm-up, whose samples are not judged. Default 0.2. */
  readonly warmUp?: number;
  /** Heap growth allowed from the first sample after warm-up to the last, in MiB. Default 16. */
  readonly heapGrowthMiB?: number;
  readonly log?: (line: string) => void;
}

export interface RelaySample {
  readonly calls: number;
  readonly heapMiB: number;
  readonly rssMiB: number;
  /** The most abort listeners alive on any one AbortSignal since the previous sample. */
  readonly abortListeners: number;
  readonly programSessions: number;
  readonly progressRoutes: number;
  readonly serverSessions: number;
}

export interface RelaySoakReport {
  readonly calls: number;
  readonly relays: readonly SoakRelay[];
  /** Calls answered per relay. */
  readonly perRelay: Readonly<Record<string, number>>;
  /** Progress notifications that reached their caller, per relay. */
  readonly progressPerRelay: Readonly<Record<string, number>>;
  readonly seconds: number;
  readonly callsPerSecond: number;
  readonly restarts: number;
  /** Calls that failed while a restart was under way (-32603), and after it (none allowed). */
  readonly failedDuringRestart: number;
  readonly progressDelivered: number;
  readonly progressAsked: number;
  readonly samples: readonly RelaySample[];
  readonly warnings: readonly string[];
  readonly failures: readonly string[];
}

function collect(): void {
  let gc = (globalThis as { gc?: () => void }).gc;
  if (!gc) {
    setFlagsFromString("--expose-gc");
    gc = runInNewContext("gc") as () => void;
  }
  gc();
  gc();
}

const MiB = 1024 * 1024;

/** The container program: `/register`, `/secrets`, and its MCP server at `/mcp` (the SDK's, one session per client). */
async function startFar(port = 0): Promise<{ port: number; sessions: () => number; stop(): Promise<void> }> {
  const sessions = new Map<string, StreamableHTTPServerTransport>();
  const build = () => {
    const server = new Server({ name: "soak-far", version: "1.0.0" }, { capabilities: { tools: {} } });
    server.setRequestHandler(ListToolsRequestSchema, () => ({ tools: [{ name: "echo", inputSchema: { type: "object" as const } }] }));
    server.setRequestHandler(CallToolRequestSchema, async (request, extra) => {
      const token = request.params._meta?.progressToken;
      if (token !== undefined) await extra.sendNotification({ method: "notifications/progress", params: { progressToken: token, progress: 1, total: 1 } });
      return { content: [{ type: "text", text: String((request.params.arguments as { id?: unknown } | undefined)?.id) }] };
    });
    return server;
  };
  const http: HttpServer = createServer(async (request, response) => {
    try {
      if (request.url === "/register" || request.url === "/secrets") {
        await readAll(request);
        response.writeHead(200, { "content-type": "application/json" }).end(request.url === "/register" ? "[]" : "{}");
        return;
      }
      const body = request.method === "POST" ? JSON.parse(await readAll(request)) : undefined;
      const id = request.headers["mcp-session-id"];
      let transport = typeof id === "string" ? sessions.get(id) : undefined;
      if (!transport) {
        if (typeof id === "string") {
          response.writeHead(404, { "content-type": "application/json" }).end(JSON.stringify({ jsonrpc: "2.0", error: { code: -32001, message: "Session not found" }, id: null }));
          return;
        }
        const fresh: StreamableHTTPServerTransport = new StreamableHTTPServerTransport({
          sessionIdGenerator: () => randomUUID(),
          onsessioninitialized: (sessionId) => void sessions.set(sessionId, fresh),
          onsessionclosed: (sessionId) => void sessions.delete(sessionId),
        });
        fresh.onclose = () => {
          if (fresh.sessionId) sessions.delete(fresh.sessionId);
        };
        transport = fresh;
        await build().connect(fresh);
      }
      await transport.handleRequest(request, response, body);
    } catch {
      if (!response.headersSent) response.writeHead(500).end();
    }
  });
  await new Promise<void>((resolve, reject) => {
    http.once("error", reject);
    http.listen(port, "127.0.0.1", () => resolve());
  });
  return {
    port: (http.address() as AddressInfo).port,
    sessions: () => sessions.size,
    async stop() {
      const all = [...sessions.values()];
      sessions.clear();
      http.closeAllConnections();
      await Promise.allSettled(all.map((transport) => transport.close()));
      await new Promise<void>((resolve) => http.close(() => resolve()));
    },
  };
}

function readAll(request: IncomingMessage): Promise<string> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    request.on("data", (chunk: Buffer) => chunks.push(chunk));
    request.on("end", () => resolve(Buffer.concat(chunks).toString("utf8")));
    request.on("error", reject);
  });
}

/** Counts the abort listeners alive per AbortSignal, as they are added and removed; `take()` gives the most since the last take. */
function countAbortListeners(): { take(): number; stop(): void } {
  const live = new WeakMap<EventTarget, number>();
  let most = 0;
  const add = EventTarget.prototype.addEventListener;
  const remove = EventTarget.prototype.removeEventListener;
  EventTarget.prototype.addEventListener = function (this: EventTarget, type: string, ...rest: unknown[]) {
    if (type === "abort" && this instanceof AbortSignal) {
      const count = (live.get(this) ?? 0) + 1;
      live.set(this, count);
      if (count > most) most = count;
    }
    return (add as (...args: unknown[]) => void).call(this, type, ...rest);
  } as typeof add;
  EventTarget.prototype.removeEventListener = function (this: EventTarget, type: string, ...rest: unknown[]) {
    if (type === "abort" && this instanceof AbortSignal && live.has(this)) live.set(this, Math.max(0, live.get(this)! - 1));
    return (remove as (...args: unknown[]) => void).call(this, type, ...rest);
  } as typeof remove;
  return {
    take() {
      const value = most;
      most = 0;
      return value;
    },
    stop() {
      EventTarget.prototype.addEventListener = add;
      EventTarget.prototype.removeEventListener = remove;
    },
  };
}

export async function runRelaySoak(options: RelaySoakOptions): Promise<RelaySoakReport> {
  const log = options.log ?? (() => {});
  const concurrency = options.concurrency ?? 16;
  const restarts = options.restarts ?? 2;
  const sampleCount = options.samples ?? 20;
  const warmUp = options.warmUp ?? 0.2;
  const heapGrowthMiB = options.heapGrowthMiB ?? 16;
  const failures: string[] = [];
  const warnings: string[] = [];
  const onWarning = (warning: Error) => {
    if (warnings.length < 20) warnings.push(`${warning.name}: ${warning.message}`);
  };
  process.on("warning", onWarning);
  const listeners = countAbortListeners();

  const relays = options.relays && options.relays.length > 0 ? [...options.relays] : [...SOAK_RELAYS];
  const uses = (relay: SoakRelay) => relays.includes(relay);
  let far = await startFar();
  const farUrl = () => `http://127.0.0.1:${far.port}/mcp`;
  const closers: (() => Promise<unknown> | unknown)[] = [];
  // The begun proxy: the inward relays (begin scope, /tool/*) and the begin scope's outward channels.
  const proxy = await startProxy({ port: 0, programPort: 0, pgPort: 0, appPort: far.port, secretsGate: false });
  closers.push(() => proxy.close());
  const scopeRelay = relayToMcp({ url: farUrl() });
  closers.unshift(() => scopeRelay.close());
  const container = await openContainer(`ws://127.0.0.1:${proxy.port}/`, { handlers: mcpProviderHandlers(scopeRelay) });
  closers.unshift(() => container.close());
  await container.beginTools({ arguments: null });
  const tools = new PathsTools(`ws://127.0.0.1:${proxy.port}`);
  // Once a provider has begun tools on `/`, the program's asks go on the begin scope; the /requests
  // relay is soaked on a second proxy that nobody begins.
  const outward = await startProxy({ port: 0, programPort: 0, pgPort: 0, appPort: far.port, secretsGate: false });
  closers.push(() => outward.close());
  const relay = relayToMcp({ url: farUrl() });
  closers.unshift(() => relay.close());
  const provider = connectProxy(`ws://127.0.0.1:${outward.port}`, relay, { minBackoffMs: 10 });
  closers.unshift(() => provider.close());
  await provider.whenConnected();
  // The programs' own clients get a signal per request too: what is counted is the relays'.
  const programOf = async (port: number, name: string) => {
    const client = new Client({ name, version: "1.0.0" });
    await client.connect(new StreamableHTTPClientTransport(new URL(`http://127.0.0.1:${port}/mcp`), { fetch: perRequestSignalFetch() }));
    closers.unshift(() => client.close());
    return client;
  };
  const program = uses("outward") ? await programOf(outward.programPort, "soak-program") : undefined;
  const scopeProgram = uses("outward-scope") ? await programOf(proxy.programPort, "soak-scope-program") : undefined;

  let progressDelivered = 0;
  let progressAsked = 0;
  // Inward progress arrives on each relay's notification stream with the provider's token.
  const progressPerRelay: Record<string, number> = {};
  const progressed = (relay: SoakRelay) => {
    progressDelivered++;
    progressPerRelay[relay] = (progressPerRelay[relay] ?? 0) + 1;
  };
  const readProgress = (relay: SoakRelay, what: string, stream: AsyncIterable<{ method: string }> & { close(): void }) => {
    const reading = (async () => {
      try {
        for await (const notification of stream) if (notification.method === "notifications/progress") progressed(relay);
      } catch (error) {
        failures.push(`the ${what} notification stream ended: ${String(error)}`);
      }
    })();
    closers.unshift(async () => {
      stream.close();
      await reading;
    });
  };
  if (uses("inward")) readProgress("inward", "begin scope's", container.mcp.notifications());
  if (uses("tool")) readProgress("tool", "/tool/notifications", tools.notifications());

  const samples: RelaySample[] = [];
  const sample = (calls: number) => {
    collect();
    const memory = process.memoryUsage();
    const figures: RelaySample = {
      calls,
      heapMiB: Math.round((memory.heapUsed / MiB) * 10) / 10,
      rssMiB: Math.round((memory.rss / MiB) * 10) / 10,
      abortListeners: listeners.take(),
      programSessions: Math.max(outward.paths.programMcp.sessionCount, proxy.paths.programMcp.sessionCount),
      progressRoutes: outward.paths.programMcp.progressRoutes + proxy.paths.programMcp.progressRoutes,
      serverSessions: far.sessions(),
    };
    samples.push(figures);
    log(`relay soak ${JSON.stringify(figures)}`);
  };

  let failedDuringRestart = 0;
  let restarting = false;
  const perRelay: Record<string, number> = Object.fromEntries(relays.map((relay) => [relay, 0]));
  const textOf = (result: { content: unknown[] }) => String((result.content[0] as { text: string }).text);
  const viaProgram = async (relay: SoakRelay, client: Client, params: object, withProgress: boolean) =>
    textOf(await client.request({ method: "tools/call", params: params as never }, CallToolResultSchema, withProgress ? { onprogress: () => progressed(relay), timeout: 60_000 } : { timeout: 60_000 }));
  const call = async (i: number): Promise<void> => {
    const id = `c${i}`;
    const relay = relays[i % relays.length]!;
    const withProgress = Math.floor(i / relays.length) % 5 === 0;
    if (withProgress) progressAsked++;
    const params = { name: "echo", arguments: { id }, ...(withProgress ? { _meta: { progressToken: `soak-${i}` } } : {}) };
    try {
      let text: string;
      switch (relay) {
        case "inward":
          text = textOf(await container.mcp.callTool(params));
          break;
        case "tool":
          text = textOf(await tools.callTool(params));
          break;
        case "outward":
          text = await viaProgram(relay, program!, params, withProgress);
          break;
        case "outward-scope":
          text = await viaProgram(relay, scopeProgram!, params, withProgress);
          break;
      }
      perRelay[relay]!++;
      if (text !== id && failures.length < 20) failures.push(`call ${i} (${relay}) answered ${JSON.stringify(text)}`);
    } catch (error) {
      if (restarting) failedDuringRestart++;
      else if (failures.length < 20) failures.push(`call ${i} (${relay}) failed: ${error instanceof Error ? error.message : String(error)}`);
    }
  };

  const started = Date.now();
  const sampleEvery = Math.max(1, Math.floor(options.calls / sampleCount));
  const restartEvery = restarts > 0 ? Math.floor(options.calls / (restarts + 1)) : Infinity;
  let next = 0;
  let sinceSample = 0;
  let sinceRestart = 0;
  sample(0);
  while (next < options.calls) {
    const batch = Math.min(concurrency * relays.length, options.calls - next);
    await Promise.all(Array.from({ length: batch }, (_, k) => call(next + k)));
    next += batch;
    sinceSample += batch;
    sinceRestart += batch;
    if (sinceRestart >= restartEvery && next < options.calls) {
      sinceRestart = 0;
      // The container's MCP server exits and comes back on its port, forgetting every session.
      restarting = true;
      const port = far.port;
      await far.stop();
      far = await startFar(port);
      // One call through each relay as the restart settles: may fail (-32603) only if the relay had not yet noticed.
      await Promise.all(relays.map((_, k) => call(next + k)));
      next += relays.length;
      restarting = false;
      log(`relay soak: container MCP server restarted after ${next} calls`);
    }
    if (sinceSample >= sampleEvery) {
      sinceSample = 0;
      sample(next);
    }
  }
  const seconds = (Date.now() - started) / 1000;
  if (samples[samples.length - 1]!.calls !== next) sample(next);

  for (const close of closers) {
    try {
      await close();
    } catch {
      // Closing what is already closed.
    }
  }
  await far.stop();
  listeners.stop();
  process.off("warning", onWarning);

  // Judged after warm-up: the first sample past it against the last.
  const judged = samples.filter((s) => s.calls >= options.calls * warmUp);
  if (judged.length >= 2) {
    const first = judged[0]!;
    const last = judged[judged.length - 1]!;
    if (last.heapMiB - first.heapMiB > heapGrowthMiB) failures.push(`heap grew ${(last.heapMiB - first.heapMiB).toFixed(1)} MiB after warm-up (${first.heapMiB} → ${last.heapMiB}), more than ${heapGrowthMiB}`);
    const mostListeners = Math.max(...judged.map((s) => s.abortListeners));
    if (mostListeners > concurrency * relays.length + 16) failures.push(`${mostListeners} abort listeners on one signal, more than the calls in flight allow`);
    if (Math.max(...judged.map((s) => s.programSessions)) > 1) failures.push("program sessions piled up");
    if (Math.max(...judged.map((s) => s.progressRoutes)) > concurrency * 2) failures.push("progress routes piled up");
    if (Math.max(...judged.map((s) => s.serverSessions)) > 6) failures.push("the container's MCP server holds sessions the relays left behind");
  }
  for (const warning of warnings) if (warning.startsWith("MaxListenersExceededWarning")) failures.push(warning);
  return {
    calls: next,
    relays,
    perRelay,
    progressPerRelay,
    seconds,
    callsPerSecond: Math.round(next / seconds),
    restarts,
    failedDuringRestart,
    progressDelivered,
    progressAsked,
    samples,
    warnings,
    failures,
  };
}
