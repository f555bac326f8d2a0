// Case 11: agent containers (issue 28 §4), over loopback.
//   chunks/s: the example agent's `burst:N` (N text chunks written as fast as its socket takes them)
//     (w) read directly: `POST /run` to the program, its SSE body read and split into `data:` lines
//     (x) multiplexed: `agent.enqueue` → agents::begin scope → proxy → `POST /run` → SSE → Chunk
//         responses on the scope → `agent.chunks()`
//     (y) paths: `agent.enqueue` → `/agent/run` → proxy → program → SSE relayed → `agent.chunks()`
//   enqueue → first chunk: a one-line message, from the call to its first chunk (its user part), on
//     an idle agent (each loop ended before the next message), against `POST /run` → the first
//     `data:` line read directly.
// Four processes besides this one: an example agent and a proxy per transport (the direct reads go
// to the multiplexed proxy's program, never while a loop of its runs). Every measurement alternates
// direct, multiplexed and paths in the same run (the order rotating each round), so a busy moment
// on the machine falls on all three alike.
import { beginPathsAgent, openContainer, type Agent } from "@diverge/client";
import type { AgenticLoopChunk } from "@diverge/codec";
import { startChild } from "../processes.js";
import type { SuiteReport } from "../run.js";

type Path = "direct" | "multiplexed" | "paths";
const PATHS: readonly Path[] = ["direct", "multiplexed", "paths"];

const NAMES: Record<Path, string> = {
  direct: "(w) the program's SSE, read directly",
  multiplexed: "(x) agents::begin scope → proxy → program",
  paths: "(y) /agent/run → proxy → program",
};

export interface AgentsResult {
  readonly burst: number;
  /** Each round's chunks per second, per path. */
  readonly rates: Record<Path, number[]>;
  /** Milliseconds from the enqueue (or the direct POST) to the first chunk, per path, every sample. */
  readonly firstChunk: Record<Path, { readonly p50: number; readonly p99: number; readonly samples: number }>;
}

function quantile(sorted: readonly number[], q: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))]!;
}

/** `POST /run` with one message to the program; `onFirst` at the first `data:` line; resolves with the number of chunks once the stream ends. */
async function runDirect(base: string, key: string, text: string, onFirst?: () => void): Promise<number> {
  const response = await fetch(`${base}/run`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ messages: [{ key, content: [{ type: "text", text }] }] }),
  });
  if (response.status !== 200 || !response.body) throw new Error(`POST /run answered ${response.status}`);
  const decoder = new TextDecoder();
  let rest = "";
  let chunks = 0;
  for await (const piece of response.body as unknown as AsyncIterable<Uint8Array>) {
    rest += decoder.decode(piece, { stream: true });
    let at: number;
    while ((at = rest.indexOf("\n\n")) >= 0) {
      const event = rest.slice(0, at);
      rest = rest.slice(at + 2);
      if (event.startsWith("data:")) {
        // Parsed as the provider parses each chunk, so both sides do the same JSON work.
        JSON.parse(event.slice(5));
        if (chunks++ === 0) onFirst?.();
      }
    }
  }
  return chunks;
}

/** Pulls one agent's chunks; `until(predicate)` resolves with how many came up to the first that `predicate` takes. */
function reader(agent: Agent): { until(predicate: (chunk: AgenticLoopChunk) => boolean, onFirst?: () => void): Promise<number> } {
  const iterator = agent.chunks()[Symbol.asyncIterator]();
  return {
    async until(predicate, onFirst) {
      let n = 0;
      for (;;) {
        const next = await iterator.next();
        if (next.done) throw new Error("the agent's chunks ended");
        if (n++ === 0) onFirst?.();
        if (predicate(next.value)) return n;
      }
    },
  };
}

export async function agentsSuite(quick: boolean, log: (line: string) => void): Promise<SuiteReport> {
  const burst = quick ? 500 : 10_000;
  const rounds = quick ? 1 : 5;
  const latencySamples = quick ? 5 : 200;
  const closers: (() => Promise<unknown> | unknown)[] = [];
  try {
    const programX = await startChild(["agent"]);
    closers.push(() => programX.close());
    const proxyX = await startChild(["agent-proxy", String(programX.ready.port)]);
    closers.unshift(() => proxyX.close());
    const programY = await startChild(["agent"]);
    closers.push(() => programY.close());
    const proxyY = await startChild(["agent-proxy", String(programY.ready.port)]);
    closers.unshift(() => proxyY.close());
    const direct = `http://127.0.0.1:${programX.ready.port}`;

    const connection = await openContainer(`ws://127.0.0.1:${proxyX.ready.port}/`);
    closers.unshift(() => connection.close());
    const multiplexed = await connection.beginAgent({ arguments: { name: "bench" } });
    const paths = await beginPathsAgent(`ws://127.0.0.1:${proxyY.ready.port}/`, { arguments: { name: "bench" } });
    closers.unshift(() => paths.close());
    const agents = { multiplexed, paths } as const;
    const readers = { multiplexed: reader(multiplexed), paths: reader(paths) } as const;
    const isUsage = (chunk: AgenticLoopChunk) => chunk.type === "usage";
    let keys = 0;

    /** One message through an agent: its chunks up to the turn's usage, then the loop's end. */
    const viaAgent = async (path: "multiplexed" | "paths", text: string, onFirst?: () => void): Promise<number> => {
      const agent = agents[path];
      const fate = agent.enqueue(`m${keys++}`, text);
      const n = await readers[path].until(isUsage, onFirst);
      if ((await fate) !== "delivered") throw new Error(`a message through ${path} was not delivered`);
      // The loop's end (not timed): the next message starts a loop of its own.
      await agent.settled({ idleMs: 20 });
      return n;
    };
    const once = (path: Path, text: string, onFirst?: () => void) => (path === "direct" ? runDirect(direct, `m${keys++}`, text, onFirst) : viaAgent(path, text, onFirst));
    const rotated = (r: number) => PATHS.map((_, i) => PATHS[(i + r) % PATHS.length]!);

    // Warm up every path (JIT, sockets, the MCP-free loop).
    for (const path of PATHS) {
      await once(path, `burst:${Math.min(burst, 2000)}`);
      for (let i = 0; i < (quick ? 1 : 5); i++) await once(path, "hi");
    }

    const rates: Record<Path, number[]> = { direct: [], multiplexed: [], paths: [] };
    for (let r = 0; r < rounds; r++) {
      log(`  chunks round ${r + 1} of ${rounds}`);
      for (const path of rotated(r)) {
        const start = performance.now();
        const n = await once(path, `burst:${burst}`);
        const seconds = (performance.now() - start) / 1000;
        if (n < burst) throw new Error(`${path} carried ${n} of ${burst} chunks`);
        rates[path].push(n / seconds);
      }
    }

    const latencies: Record<Path, number[]> = { direct: [], multiplexed: [], paths: [] };
    log(`  enqueue → first chunk, ${latencySamples} samples per path`);
    for (let s = 0; s < latencySamples; s++) {
      for (const path of rotated(s)) {
        const start = performance.now();
        let first = NaN;
        await once(path, "hi", () => (first = performance.now() - start));
        latencies[path].push(first);
      }
    }
    const firstChunk = Object.fromEntries(
      PATHS.map((path) => {
        const sorted = [...latencies[path]].sort((a, b) => a - b);
        return [path, { p50: quantile(sorted, 0.5), p99: quantile(sorted, 0.99), samples: sorted.length }];
      }),
    ) as AgentsResult["firstChunk"];

    const best = (path: Path) => Math.max(...rates[path]);
    const result: AgentsResult = { burst, rates, firstChunk };
    const ms = (x: number) => `${x.toFixed(2)} ms`;
    return {
      result,
      targets: [
        ...(["multiplexed", "paths"] as const).map((path) => ({
          case: 11,
          what: `agent chunks/s through the proxy on ${path} vs the program's SSE read directly (burst:${burst})`,
          goal: "reported",
          value: `${(best(path) / best("direct")).toFixed(2)}× (${best(path).toFixed(0)} vs ${best("direct").toFixed(0)} chunks/s, best of ${rounds})`,
          met: null,
        })),
        ...(["multiplexed", "paths"] as const).map((path) => ({
          case: 11,
          what: `agent enqueue → first chunk on ${path}, p50 / p99`,
          goal: "reported",
          value: `${ms(firstChunk[path].p50)} / ${ms(firstChunk[path].p99)} (direct POST /run → first data: ${ms(firstChunk.direct.p50)} / ${ms(firstChunk.direct.p99)})`,
          met: null,
        })),
      ],
      tables: [
        {
          title: `Case 11: agent chunks through the proxy (burst:${burst}, one text chunk each)`,
          columns: ["path", "chunks/s (best)", "vs (w)", "chunks/s per round"],
          rows: PATHS.map((path) => [NAMES[path], best(path).toFixed(0), `${(best(path) / best("direct")).toFixed(2)}×`, rates[path].map((x) => x.toFixed(0)).join(", ")]),
          notes: [
            `${rounds} round(s), the three paths alternating in each (order rotated every round); a round is one message from the POST or the enqueue to the turn's last chunk (its usage), ${burst} text chunks of ~50 bytes of JSON each plus the turn's own.`,
            "Each side parses every chunk's JSON. The example agent and the proxy are processes of their own; the caller is this process.",
          ],
        },
        {
          title: "Case 11: enqueue → first chunk (a one-line message, the agent idle)",
          columns: ["path", "p50", "p99", "samples"],
          rows: PATHS.map((path) => [NAMES[path].replace("the program's SSE, read directly", "POST /run → the first data: line, directly"), ms(firstChunk[path].p50), ms(firstChunk[path].p99), String(firstChunk[path].samples)]),
          notes: ["The three paths alternate sample by sample. Each sample waits for the loop before it to end (multiplexed: 20 ms of quiet, since A4d marks no loop's end; paths: its stream's end), untimed."],
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
