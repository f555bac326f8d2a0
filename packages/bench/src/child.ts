// A process of its own for the proxy or the example container, so the relay benchmarks measure
// three processes talking over loopback (as they run for real) and the memory benchmarks can read the
// proxy's RSS alone. Started by `fork` with an IPC channel; answers `{ type: "memory" }` with its
// memory after a full GC, `{ type: "stats" }` with the proxy's postgres pair statistics, and
// `{ type: "close" }` by closing and exiting.
//
//   node child.js container
//   node child.js proxy <appPort>
//   node child.js idle
//   node child.js filesystem <root>   (a proxy serving the filesystem under <root>, and FUSE mounts in it)
//   node child.js agent                the example agent program (no tools: the agents case asks for none)
//   node child.js agent-proxy <appPort> a proxy in front of an agent program (its root the example agent's)
//   node child.js vault-provider <proxyPort> <databaseUrl> <namespace>
//                                      a provider begun on the multiplexed connection, answering the vault from <databaseUrl>
//   node child.js pg-provider <proxyPort> <multiplexed|paths> <databaseUrl>
//                                      a provider carrying the proxy's database connections to <databaseUrl>
//   node child.js tcp-relay <targetPort> a plain Node TCP relay to <targetPort> (net.Socket piped both ways):
//                                      what one Node hop costs before any WebSocket or frame
import { connect, createServer } from "node:net";
import { monitorEventLoopDelay, PerformanceObserver } from "node:perf_hooks";
import { exampleAgentRoot, startExampleAgent } from "@diverge/example-agent";
import { exampleRoot, startExampleContainer } from "@diverge/example-container";
import { startProxy } from "@diverge/server";
import { connectProxy, openContainer, pipePostgres, postgresOverPaths, PostgresVault } from "@diverge/client";

export interface ChildReady {
  readonly type: "ready";
  readonly port: number;
  readonly programPort?: number;
  readonly pgPort?: number;
}

export interface ChildMemory {
  readonly type: "memory";
  readonly rss: number;
  readonly heapUsed: number;
  readonly external: number;
  readonly arrayBuffers: number;
  /** CPU time this process has used (user + system), in microseconds. */
  readonly cpu?: number;
  /** The highest RSS this process has had since it started (the kernel's count), in bytes. */
  readonly maxRss?: number;
}

/** The event loop's delay since the last `{ type: "loop" }` (percentiles in milliseconds), and the CPU used meanwhile. */
export interface ChildLoop {
  readonly type: "loop";
  readonly p50: number;
  readonly p99: number;
  readonly max: number;
  readonly mean: number;
  /** CPU time (user + system) since the last `loop` message, in milliseconds, and the wall time it covers. */
  readonly cpuMs: number;
  readonly wallMs: number;
  /** Garbage collections since the last `loop` message, and their pauses in milliseconds together. */
  readonly gcCount: number;
  readonly gcMs: number;
}

const cpuOf = (usage: NodeJS.CpuUsage) => usage.user + usage.system;

function gc(): void {
  (globalThis as { gc?: () => void }).gc?.();
}

async function main(): Promise<void> {
  const [mode, arg, transport, databaseUrl] = process.argv.slice(2);
  let close: () => Promise<void>;
  let ready: ChildReady;
  let stats: () => unknown = () => undefined;
  if (mode === "container") {
    const container = await startExampleContainer({ host: "127.0.0.1" });
    close = () => container.close();
    ready = { type: "ready", port: container.port };
  } else if (mode === "proxy") {
    const proxy = await startProxy({ port: 0, programPort: 0, pgPort: 0, appPort: Number(arg), root: exampleRoot, secretsGate: false });
    close = () => proxy.close();
    stats = () => proxy.stats();
    ready = { type: "ready", port: proxy.port, programPort: proxy.programPort, pgPort: proxy.multiplexed.pgPort };
  } else if (mode === "filesystem") {
    const proxy = await startProxy({ port: 0, programPort: 0, pgPort: 0, appPort: 9, root: arg, secretsGate: false, log: () => {} });
    close = () => proxy.close();
    ready = { type: "ready", port: proxy.port };
  } else if (mode === "agent") {
    const agent = await startExampleAgent({ port: 0, requiredSecrets: [] });
    close = () => agent.close();
    ready = { type: "ready", port: agent.port };
  } else if (mode === "agent-proxy") {
    const proxy = await startProxy({ port: 0, programPort: 0, pgPort: 0, appPort: Number(arg), root: exampleAgentRoot, secretsGate: false, log: () => {} });
    close = () => proxy.close();
    ready = { type: "ready", port: proxy.port, programPort: proxy.programPort };
  } else if (mode === "vault-provider") {
    const vault = await PostgresVault.connect(transport!, { namespace: databaseUrl! });
    const connection = await openContainer(`ws://127.0.0.1:${arg}/`, { handlers: vault.handlers() });
    await connection.beginTools({ arguments: { greeting: "Hello" }, image: { name: "diverge/example-greeter", digest: "sha256:00" } });
    await connection.feedSecrets({ API_KEY: "bench-key" });
    close = async () => {
      connection.close();
      await vault.close();
    };
    ready = { type: "ready", port: 0 };
  } else if (mode === "pg-provider") {
    const url = `ws://127.0.0.1:${arg}`;
    if (transport === "paths") {
      const connection = connectProxy(url, { raw: postgresOverPaths(databaseUrl!) });
      close = async () => connection.close();
    } else {
      const connection = await openContainer(`${url}/`, { onPostgres: (announced) => void pipePostgres(announced, databaseUrl!).catch(() => {}) });
      await connection.beginTools({ arguments: { greeting: "Hello" }, image: { name: "diverge/example-greeter", digest: "sha256:00" } });
      await connection.feedSecrets({ API_KEY: "bench-key" });
      close = async () => connection.close();
    }
    ready = { type: "ready", port: 0 };
  } else if (mode === "tcp-relay") {
    const target = Number(arg);
    const server = createServer({ noDelay: true }, (socket) => {
      const upstream = connect({ host: "127.0.0.1", port: target, noDelay: true });
      socket.pipe(upstream).on("error", () => socket.destroy());
      upstream.pipe(socket).on("error", () => upstream.destroy());
      socket.on("error", () => upstream.destroy());
      upstream.on("error", () => socket.destroy());
      socket.on("close", () => upstream.destroy());
      upstream.on("close", () => socket.destroy());
    });
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    close = () => new Promise<void>((resolve) => server.close(() => resolve()));
    ready = { type: "ready", port: (server.address() as { port: number }).port };
  } else if (mode === "idle") {
    // A Node process that has loaded the same modules and serves nothing: the floor under the proxy.
    close = async () => {};
    ready = { type: "ready", port: 0 };
  } else {
    throw new Error(`unknown mode ${mode}`);
  }
  // The event loop's delay, sampled every 1 ms (perf_hooks' timer histogram), read and reset on `loop`.
  // Enabled by the first `loop` (the slow reader's reset): a timer waking the process 1,000 times a
  // second is the harness's, not the relay's, and the socat and pgbench rows have none.
  const delay = monitorEventLoopDelay({ resolution: 1 });
  let delayOn = false;
  let gcCount = 0;
  let gcMs = 0;
  new PerformanceObserver((list) => {
    for (const entry of list.getEntries()) {
      gcCount++;
      gcMs += entry.duration;
    }
  }).observe({ entryTypes: ["gc"] });
  let loopCpu = process.cpuUsage();
  let loopWall = performance.now();
  process.on("message", (message: { type: string; gc?: boolean }) => {
    if (message.type === "loop") {
      if (!delayOn) {
        delayOn = true;
        delay.enable();
      }
      const cpu = process.cpuUsage(loopCpu);
      const now = performance.now();
      const ms = (ns: number) => ns / 1e6;
      process.send!({ type: "loop", p50: ms(delay.percentile(50)), p99: ms(delay.percentile(99)), max: ms(delay.max), mean: ms(delay.mean), cpuMs: cpuOf(cpu) / 1000, wallMs: now - loopWall, gcCount, gcMs } satisfies ChildLoop);
      gcCount = 0;
      gcMs = 0;
      delay.reset();
      loopCpu = process.cpuUsage();
      loopWall = now;
    } else if (message.type === "memory") {
      if (message.gc !== false) {
        gc();
        gc();
      }
      const m = process.memoryUsage();
      process.send!({ type: "memory", rss: m.rss, heapUsed: m.heapUsed, external: m.external, arrayBuffers: m.arrayBuffers, cpu: cpuOf(process.cpuUsage()), maxRss: process.resourceUsage().maxRSS * 1024 } satisfies ChildMemory);
    } else if (message.type === "stats") {
      process.send!({ type: "stats", stats: stats() });
    } else if (message.type === "close") {
      close().finally(() => process.exit(0));
    }
  });
  // The parent going away ends the child: nothing is left running.
  process.on("disconnect", () => process.exit(0));
  process.send!(ready);
}

main().catch((problem) => {
  console.error(problem);
  process.exit(1);
});
