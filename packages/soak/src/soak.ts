// The soak: a seeded run of many exchanges across both transports with random faults.
//
// - Many paths: the proxy's typed API (`proxy.mcp.*`, what the program's MCP endpoint calls) asks;
//   a provider over raw `ws` answers each ask with a seeded fault (answer, MCP error, decline, cut
//   before or after the message, dropped `/requests`, malformed, text first, two messages).
// - Multiplexed: the provider side (`openContainer`) makes MCP exchanges on the tools::begin scope of
//   a proxy in front of the example container, with faults of its own: unknown tools (MCP errors),
//   malformed channel requests (bare finish), and abrupt closes of the whole connection (every
//   exchange in flight is lost; the next exchanges go to a fresh proxy, since `/` is one per life).
//   Every cycle also meets the program-side faults of `program-faults.ts`: a driver reset and two
//   failed handshakes on `/` before the provider dials, and a daemon program that never reads.
//
// Checked for every exchange: it ends exactly once for its caller, with the outcome the faults imply;
// a watchdog fails the run when any exchange stays open too long; RSS is sampled against a bound.
import { ContainerError, openContainer, type MultiplexedConnection } from "@diverge/client";
import { McpExchangeError, startProxy, type RunningProxy } from "@diverge/server";
import { exampleRoot, startExampleContainer, type ExampleContainer } from "@diverge/example-container";
import { encodeToolsBeginChannelRequest } from "@diverge/codec";
import { setFlagsFromString } from "node:v8";
import { runInNewContext } from "node:vm";
import { errorCodeOf, FaultyProvider, TERMINAL_PATH_FAULTS, type PathFault } from "./paths.js";
import { beforeProvider, StalledDaemon, type ProgramFaultCounts } from "./program-faults.js";

export interface SoakOptions {
  /** Exchanges in all, over both transports. */
  readonly exchanges: number;
  readonly seed: number;
  /** Exchanges in flight at once. Default 64. */
  readonly concurrency?: number;
  /** Share of exchanges on the paths transport. Default 0.5. */
  readonly pathsShare?: number;
  /** Chance per multiplexed exchange that the connection is cut abruptly right after it is made. Default 1/1500. */
  readonly abruptCloseRate?: number;
  /** An exchange open this long fails the run. Default 30 s. */
  readonly watchdogMs?: number;
  /** Peak RSS above this fails the run, in MiB. Default 512. */
  readonly rssBoundMiB?: number;
  /** Progress lines. */
  readonly log?: (line: string) => void;
}

export interface SoakReport {
  readonly seed: number;
  readonly exchanges: number;
  readonly pathsExchanges: number;
  readonly multiplexedExchanges: number;
  readonly seconds: number;
  readonly exchangesPerSecond: number;
  /** Faults injected, by name (paths faults as the provider applied them, asks included). */
  readonly faults: Record<string, number>;
  readonly faultTotal: number;
  /** Asks the proxy made again after a cut or a lost `/requests`. */
  readonly reasked: number;
  /** Answer paths the provider tried to open for asks lost with a dropped `/requests` (404s). */
  readonly refusedPaths: number;
  readonly requestsConnections: number;
  readonly multiplexedConnections: number;
  readonly outcomes: Record<string, number>;
  readonly baselineRssMiB: number;
  readonly peakRssMiB: number;
  /** Heap in use after a full collection before the run, and after it with everything closed. */
  readonly baselineHeapMiB: number;
  readonly finalHeapMiB: number;
  readonly rssBoundMiB: number;
  readonly failures: readonly string[];
}

/** A full collection, whether or not node runs with --expose-gc. */
function collect(): void {
  let gc = (globalThis as { gc?: () => void }).gc;
  if (!gc) {
    setFlagsFromString("--expose-gc");
    gc = runInNewContext("gc") as () => void;
  }
  gc();
  gc();
}

/** mulberry32: small, seeded, good enough to pick faults. */
export function random(seed: number): () => number {
  let state = seed >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

type Outcome = string;

function pathsExpected(fault: PathFault, id: string): Outcome {
  switch (fault) {
    case "answer":
    case "textThenAnswer":
    case "double":
      return `result ${id}`;
    case "error":
      return `McpError ${errorCodeOf(id)}`;
    case "decline":
      return "NotServed";
    case "malformed":
      return "UnreadableAnswer";
    default:
      return `not terminal: ${fault}`;
  }
}

async function pathsExchange(proxy: RunningProxy, i: number): Promise<Outcome> {
  const id = `p${i}`;
  try {
    switch (i % 4) {
      case 0:
        return `result ${String(((await proxy.mcp.callTool({ name: "soak", arguments: { id } })).content[0] as { text: string }).text)}`;
      case 1:
        return `result ${(await proxy.mcp.listTools({ cursor: id })).tools[0]!.name}`;
      case 2:
        return `result ${(await proxy.mcp.listResources({ cursor: id })).resources[0]!.name}`;
      default:
        return `result ${String(((await proxy.mcp.readResource({ uri: `soak://${id}` })).contents[0] as { text: string }).text)}`;
    }
  } catch (error) {
    if (!(error instanceof McpExchangeError)) throw error;
    return error.detail.variant === "McpError" ? `McpError ${error.detail.error.code}` : error.detail.variant;
  }
}

/** One proxy in front of the example container and the provider's one connection to it. */
interface MuxCycle {
  readonly proxy: RunningProxy;
  readonly connection: MultiplexedConnection;
  /** A daemon program that never reads, flooded by the provider until the proxy ends its pair. */
  readonly stalled: StalledDaemon;
  cut: boolean;
}

type MuxFault = "greet" | "listTools" | "readResource" | "unknownTool" | "malformed";
const MUX_FAULTS: readonly (readonly [MuxFault, number])[] = [
  ["greet", 55],
  ["listTools", 10],
  ["readResource", 10],
  ["unknownTool", 15],
  ["malformed", 10],
];

async function muxExchange(cycle: MuxCycle, fault: MuxFault, id: string): Promise<Outcome> {
  const { connection } = cycle;
  try {
    switch (fault) {
      case "greet": {
        const result = await connection.mcp.callTool({ name: "greet", arguments: { name: id } });
        return `text ${(result.content[0] as { text: string }).text}`;
      }
      case "listTools":
        return `tools ${(await connection.mcp.listTools()).tools.length}`;
      case "readResource":
        return `text ${String(((await connection.mcp.readResource({ uri: "example://readme" })).contents[0] as { text: string }).text)}`;
      case "unknownTool": {
        const result = await connection.mcp.callTool({ name: `no-such-${id}`, arguments: {} });
        return result.isError ? "isError" : "unexpected result";
      }
      case "malformed":
        // A call-tool request whose JSON is cut short: the proxy finishes it bare ("not served").
        return await new Promise<Outcome>((resolve) => {
          const scope = (connection as unknown as { beginScope: number }).beginScope;
          const good = encodeToolsBeginChannelRequest({ variant: "McpCallTool", params: { name: "greet", arguments: { name: id } } });
          let responses = 0;
          try {
            connection.frames.mux.openChannel(scope, good.subarray(0, good.length - 3), {
              response: () => void responses++,
              finish: (served) => resolve(served ? `served ${responses}` : "bare finish"),
              lost: () => resolve("Lost"),
            });
          } catch {
            resolve("Lost");
          }
        });
    }
  } catch (error) {
    if (error instanceof ContainerError) return error.variant === "Mcp" ? `Mcp ${error.detail.variant === "Mcp" ? error.detail.error.code : ""}` : error.variant;
    throw error;
  }
}

function muxExpected(fault: MuxFault, id: string): readonly Outcome[] {
  switch (fault) {
    case "greet":
      return [`text Hi, ${id}!`];
    case "listTools":
      return ["tools 3"];
    case "readResource":
      return ["text The example greeter."];
    case "unknownTool":
      // The SDK's server answers an unknown tool with a result marked isError, or an MCP error.
      return ["isError", "Mcp -32602"];
    case "malformed":
      return ["bare finish"];
  }
}

export async function runSoak(options: SoakOptions): Promise<SoakReport> {
  const log = options.log ?? (() => {});
  const concurrency = options.concurrency ?? 64;
  const pathsShare = options.pathsShare ?? 0.5;
  const abruptRate = options.abruptCloseRate ?? 1 / 1500;
  const watchdogMs = options.watchdogMs ?? 30_000;
  const rssBound = options.rssBoundMiB ?? 512;
  const rng = random(options.seed);
  const faultRng = random(options.seed ^ 0x9e3779b9);
  const failures: string[] = [];
  const fail = (text: string) => {
    if (failures.length < 50) failures.push(text);
  };

  collect();
  const baselineHeap = process.memoryUsage().heapUsed;
  const baselineRss = process.memoryUsage().rss;
  let peakRss = baselineRss;
  const sampler = setInterval(() => {
    const rss = process.memoryUsage().rss;
    if (rss > peakRss) peakRss = rss;
  }, 100);

  const app: ExampleContainer = await startExampleContainer();
  const pathsProxy = await startProxy({ port: 0, programPort: 0, pgPort: 0, secretsGate: false });
  const provider = new FaultyProvider(pathsProxy.port, faultRng);
  await provider.start();

  // The multiplexed side: one cycle at a time; a cut starts the next one.
  let cycles = 0;
  const muxFaults: Record<string, number> = {};
  let current: Promise<MuxCycle> | undefined;
  const retired: MuxCycle[] = [];
  const programFaults: ProgramFaultCounts = { driverResetBeforeProvider: 0, failedHandshake: 0, stalledDaemon: 0 };
  const openCycle = async (): Promise<MuxCycle> => {
    cycles++;
    // A stalled daemon's backlog spills to disk past the pair's memory budget; a small disk cap per
    // pair (32 MiB, not the default 1 GiB) makes the proxy end it well within the flood.
    const proxy = await startProxy({ port: 0, programPort: 0, pgPort: 0, appPort: app.port, root: exampleRoot, maxPairSpillBytes: 32 * 1024 * 1024 });
    // Before the provider dials: a driver reset, a failed handshake, a client gone before the 101.
    await beforeProvider(proxy, programFaults);
    const stalled = new StalledDaemon(programFaults);
    const connection = await openContainer(`ws://127.0.0.1:${proxy.port}/`, { onDaemon: stalled.onDaemon });
    await connection.beginTools({ arguments: { greeting: "Hi" } });
    await connection.feedSecrets({ API_KEY: "soak-key" });
    await stalled.start(proxy);
    return { proxy, connection, stalled, cut: false };
  };
  const cycle = (): Promise<MuxCycle> => (current ??= openCycle());
  const cutCycle = (which: MuxCycle) => {
    if (which.cut) return;
    which.cut = true;
    muxFaults.abruptClose = (muxFaults.abruptClose ?? 0) + 1;
    current = undefined;
    retired.push(which);
    // No close frame: the TCP connection just ends under everything in flight.
    (which.connection.frames.socket as unknown as { terminate(): void }).terminate();
  };

  const settledCount = new Map<string, number>();
  const outcomes: Record<string, number> = {};
  const open = new Map<string, number>();
  const pathsOutcome = new Map<string, Outcome>();
  let pathsCount = 0;
  let muxCount = 0;
  let done = 0;
  let next = 0;
  const started = performance.now();

  let watchdogFired = false;
  let fireWatchdog!: () => void;
  /** Resolves when the watchdog fires, so a hung exchange ends the run instead of hanging it. */
  const hung = new Promise<"hung">((resolve) => (fireWatchdog = () => resolve("hung")));
  const watchdog = setInterval(() => {
    const now = performance.now();
    for (const [id, since] of open) {
      if (now - since > watchdogMs) {
        watchdogFired = true;
        fireWatchdog();
        fail(`watchdog: exchange ${id} open for more than ${watchdogMs} ms`);
      }
    }
    if (peakRss / 2 ** 20 > rssBound) fail(`RSS ${Math.round(peakRss / 2 ** 20)} MiB is over the bound of ${rssBound} MiB`);
  }, 1000);
  let lastReport = performance.now();

  const settle = (id: string, outcome: Outcome) => {
    const times = (settledCount.get(id) ?? 0) + 1;
    settledCount.set(id, times);
    if (times > 1) fail(`${id} ended ${times} times`);
    open.delete(id);
    outcomes[outcome.split(" ")[0]!] = (outcomes[outcome.split(" ")[0]!] ?? 0) + 1;
    done++;
    if (performance.now() - lastReport > 5000) {
      lastReport = performance.now();
      log(`soak: ${done}/${options.exchanges} exchanges, ${Math.round(done / ((lastReport - started) / 1000))}/s, RSS ${Math.round(process.memoryUsage().rss / 2 ** 20)} MiB`);
    }
  };

  const worker = async () => {
    while (next < options.exchanges && !watchdogFired) {
      const i = next++;
      if (rng() < pathsShare) {
        pathsCount++;
        const id = `p${i}`;
        open.set(id, performance.now());
        const outcome = await Promise.race([pathsExchange(pathsProxy, i), hung]);
        if (outcome === "hung") return;
        pathsOutcome.set(id, outcome);
        settle(id, outcome);
      } else {
        muxCount++;
        const id = `m${i}`;
        const pickAt = rng() * 100;
        let at = pickAt;
        let fault: MuxFault = "greet";
        for (const [name, weight] of MUX_FAULTS) if ((at -= weight) < 0) {
          fault = name;
          break;
        }
        const cutAfter = rng() < abruptRate;
        const which = await cycle();
        open.set(id, performance.now());
        const pending = muxExchange(which, fault, id);
        if (cutAfter) cutCycle(which);
        const outcome = await Promise.race([pending, hung]);
        if (outcome === "hung") return;
        if (fault === "unknownTool" || fault === "malformed") muxFaults[fault] = (muxFaults[fault] ?? 0) + 1;
        // An exchange whose connection was cut may have been answered before the cut, or lost.
        const allowed = which.cut ? [...muxExpected(fault, id), "Lost", "NotServed"] : muxExpected(fault, id);
        if (!allowed.includes(outcome)) fail(`${id} (${fault}${which.cut ? ", connection cut" : ""}): got ${outcome}, expected one of ${allowed.join(" | ")}`);
        settle(id, outcome);
      }
    }
  };
  await Promise.all(Array.from({ length: concurrency }, worker));
  const seconds = (performance.now() - started) / 1000;
  clearInterval(watchdog);

  // The paths side: each exchange's outcome is what the provider's one terminal answer implies,
  // and nothing was asked after it.
  let reasked = 0;
  for (const [id, outcome] of pathsOutcome) {
    const asks = provider.byId.get(id) ?? [];
    const terminal = asks.filter((ask) => TERMINAL_PATH_FAULTS.has(ask.outcome as PathFault));
    if (terminal.length !== 1) {
      fail(`${id}: ${terminal.length} terminal answers (${asks.map((ask) => ask.outcome).join(",")})`);
      continue;
    }
    if (asks[asks.length - 1] !== terminal[0]) fail(`${id}: asked again after its terminal answer`);
    for (let k = 1; k < asks.length; k++) if (asks[k]!.channel <= asks[k - 1]!.channel) fail(`${id}: channels do not ascend`);
    reasked += asks.length - 1;
    const expected = pathsExpected(terminal[0]!.outcome as PathFault, id);
    if (outcome !== expected) fail(`${id}: got ${outcome}, expected ${expected}`);
  }
  for (let i = 0; i < options.exchanges && !watchdogFired; i++) {
    const id = pathsOutcome.has(`p${i}`) ? `p${i}` : `m${i}`;
    if ((settledCount.get(id) ?? 0) !== 1) fail(`${id} ended ${settledCount.get(id) ?? 0} times`);
  }

  provider.stop();
  const endCycle = current;
  current = undefined;
  const last = endCycle ? await endCycle.catch(() => undefined) : undefined;
  for (const which of [...retired, ...(last ? [last] : [])]) {
    // Each cycle's stalled daemon ended by the proxy (unless its connection was cut first).
    const problem = await which.stalled.problem(which.cut);
    if (problem) fail(`multiplexed cycle: ${problem}`);
    which.stalled.close();
    which.connection.close();
    await which.proxy.close();
  }
  await pathsProxy.close();
  await app.close();
  clearInterval(sampler);
  // With every proxy closed and the run's own records dropped, the heap is back near where it began.
  const refusedPaths = provider.faults.refused ?? 0;
  provider.byId.clear();
  pathsOutcome.clear();
  settledCount.clear();
  retired.length = 0;
  await new Promise((resolve) => setTimeout(resolve, 100));
  collect();
  const finalHeap = process.memoryUsage().heapUsed;

  const faults: Record<string, number> = {};
  // "refused": answer paths the proxy had already forgotten (their /requests was dropped) are a
  // consequence of a fault, not one of their own; they are reported apart.
  for (const [name, count] of Object.entries(provider.faults)) if (name !== "answer" && name !== "refused") faults[`paths.${name}`] = count;
  for (const [name, count] of Object.entries(muxFaults)) faults[`multiplexed.${name}`] = count;
  for (const [name, count] of Object.entries(programFaults)) faults[`multiplexed.${name}`] = count;
  return {
    seed: options.seed,
    exchanges: options.exchanges,
    pathsExchanges: pathsCount,
    multiplexedExchanges: muxCount,
    seconds: Number(seconds.toFixed(2)),
    exchangesPerSecond: Math.round(options.exchanges / seconds),
    faults,
    faultTotal: Object.values(faults).reduce((sum, n) => sum + n, 0),
    reasked,
    refusedPaths,
    requestsConnections: provider.requestsConnections,
    multiplexedConnections: cycles,
    outcomes,
    baselineRssMiB: Math.round(baselineRss / 2 ** 20),
    peakRssMiB: Math.round(peakRss / 2 ** 20),
    baselineHeapMiB: Math.round(baselineHeap / 2 ** 20),
    finalHeapMiB: Math.round(finalHeap / 2 ** 20),
    rssBoundMiB: rssBound,
    failures,
  };
}
