// Case 5: the proxy's memory, read from its own process (see child.ts).
//   - idle RSS, beside a Node process that loaded the same modules and serves nothing;
//   - bytes per open channel: notification channels on the tools::begin scope (a channel each,
//     held open by the proxy until the provider goes);
//   - bytes per pending ask: tools/calls of the program that a provider on /requests receives and
//     never answers (each holds the program's HTTP request and the ask in the proxy);
//   - the postgres pair streaming 100 MB from the provider to a program's socket that reads slowly
//     at times (after a 32 MB warm-up stream on another connection): the proxy's RSS is sampled
//     throughout and must stay flat.
// Only 127.0.0.1 is dialled; every wait is bounded in time.
import { connect, type Socket } from "node:net";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { openContainer, type AnnouncedConnection, type MultiplexedConnection } from "@diverge/client";
import { WebSocket } from "ws";
import type { ChildMemory } from "../child.js";
import { startChild, type Child } from "../processes.js";
import type { SuiteReport, Target } from "../run.js";
import { familiesMemory, type FamiliesMemory } from "./memory-families.js";

const MB = 1024 * 1024;

export interface MemoryResult {
  readonly idle: { readonly proxyRss: number; readonly proxyHeap: number; readonly bareNodeRss: number };
  /** `openChannels` and `pendingAsks`: what the proxy's own counters said while they were open. */
  readonly perChannel: { readonly channels: number; readonly bytes: number; readonly rssBytes: number; readonly openChannels: number };
  readonly perAsk: { readonly asks: number; readonly bytes: number; readonly rssBytes: number; readonly pendingAsks: number };
  readonly stream: {
    readonly bytes: number;
    readonly seconds: number;
    readonly rssBefore: number;
    readonly rssPeak: number;
    readonly rssAfter: number;
    readonly samples: number;
    /** The highest RSS in the first and in the last quarter of the stream: flat means no climb between them. */
    readonly rssFirstQuarterPeak: number;
    readonly rssLastQuarterPeak: number;
    /** The proxy's own account of its buffers (PairStats): the most bytes ever waiting on each side. */
    readonly maxProgramBuffered: number;
    readonly maxProviderBuffered: number;
  };
  /** The families' rows (tree Snapshot, command backpressure). */
  readonly families: FamiliesMemory;
}

const used = (m: ChildMemory) => m.heapUsed + m.external;
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

async function until(what: string, done: () => boolean, ms: number): Promise<void> {
  const deadline = Date.now() + ms;
  while (!done()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(10);
  }
}

async function perChannel(proxy: Child, connection: MultiplexedConnection, count: number): Promise<MemoryResult["perChannel"]> {
  // One stream first, so the proxy's upstream MCP session exists before the baseline.
  const first = connection.mcp.notifications();
  await connection.mcp.callTool({ name: "greet", arguments: { name: "warm" } });
  const before = await proxy.memory();
  // Raw tag-7 channels: notifications() shares one channel per connection, so each is opened here
  // directly and stays open until the connection ends.
  const ignore = { response() {}, finish() {}, lost() {} };
  for (let i = 0; i < count; i++) connection.openChannel("notifications", { variant: "McpNotifications" }, ignore);
  // Frames are handled in order: once a later call is answered, every channel before it is open.
  await connection.mcp.callTool({ name: "greet", arguments: { name: "after" } });
  await sleep(200);
  const after = await proxy.memory();
  const openChannels = (await proxy.stats()).openChannels ?? NaN;
  if (openChannels < count) throw new Error(`the proxy holds ${openChannels} channels open, not ${count}`);
  first.close();
  return { channels: count, bytes: (used(after) - used(before)) / count, rssBytes: (after.rss - before.rss) / count, openChannels };
}

async function perAsk(proxy: Child, port: number, programPort: number, count: number): Promise<MemoryResult["perAsk"]> {
  // A provider that holds /requests and answers nothing.
  let asks = 0;
  const provider = new WebSocket(`ws://127.0.0.1:${port}/requests`);
  provider.on("message", () => asks++);
  await new Promise<void>((resolve, reject) => {
    provider.once("open", () => resolve());
    provider.once("error", reject);
  });
  const program = new Client({ name: "bench-memory-program", version: "1.0.0" });
  await program.connect(new StreamableHTTPClientTransport(new URL(`http://127.0.0.1:${programPort}/mcp`)));
  try {
    await sleep(100);
    const baseAsks = asks;
    const before = await proxy.memory();
    const pending = Array.from({ length: count }, (_, i) =>
      program.callTool({ name: "greet", arguments: { name: `pending ${i}` } }, undefined, { timeout: 60_000 }).catch(() => undefined),
    );
    await until(`${count} asks on /requests`, () => asks - baseAsks >= count, 30_000);
    await sleep(200);
    const after = await proxy.memory();
    const pendingAsks = (await proxy.stats()).pendingAsks ?? NaN;
    if (pendingAsks < count) throw new Error(`the proxy has ${pendingAsks} asks pending, not ${count}`);
    provider.terminate();
    await program.close().catch(() => {});
    await Promise.race([Promise.all(pending), sleep(5_000)]);
    return { asks: count, bytes: (used(after) - used(before)) / count, rssBytes: (after.rss - before.rss) / count, pendingAsks };
  } finally {
    provider.terminate();
    await program.close().catch(() => {});
  }
}

/**
 * The provider answers the program's first bytes with `total` bytes in 64 KB pieces, waiting on the
 * connection's send buffer; the program's socket stops reading for 50 ms after every 8 MB.
 */
async function stream(proxy: Child, pgPort: number, announced: Promise<AnnouncedConnection>, total: number): Promise<MemoryResult["stream"]> {
  const before = await proxy.memory();
  const chunk = new Uint8Array(64 * 1024).fill(0x44);
  let received = 0;
  const samples: { at: number; rss: number }[] = [];
  let sampling = true;
  const sampler = (async () => {
    while (sampling) {
      const m = await proxy.memory(false);
      samples.push({ at: received, rss: m.rss });
      await sleep(50);
    }
  })();
  const start = performance.now();
  const socket: Socket = connect(pgPort, "127.0.0.1");
  let nextPause = 8 * MB;
  const finished = new Promise<void>((resolve, reject) => {
    socket.on("data", (data: Buffer) => {
      received += data.length;
      if (received >= nextPause) {
        nextPause += 8 * MB;
        socket.pause();
        setTimeout(() => socket.resume(), 50);
      }
      if (received >= total) resolve();
    });
    socket.on("error", reject);
    socket.on("close", () => (received >= total ? resolve() : reject(new Error(`socket closed after ${received} bytes`))));
  });
  socket.write(Buffer.from("hello database"));
  const connection = await announced;
  let firstBytes!: () => void;
  const asked = new Promise<void>((resolve) => (firstBytes = resolve));
  const half = connection.accept({ data: () => firstBytes(), end: () => {} });
  await asked;
  for (let sent = 0; sent < total; sent += chunk.length) {
    if (half.bufferedAmount > 1 * MB) await half.drained(256 * 1024);
    half.send(chunk);
  }
  const timeout = setTimeout(() => socket.destroy(new Error("the stream took more than 120 s")), 120_000);
  try {
    await finished;
  } finally {
    clearTimeout(timeout);
    sampling = false;
    await sampler;
  }
  const seconds = (performance.now() - start) / 1000;
  half.end();
  socket.destroy();
  const after = await proxy.memory();
  const stats = await proxy.stats();
  const peakOf = (from: number, to: number) => Math.max(before.rss, ...samples.filter((s) => s.at >= from * total && s.at <= to * total).map((s) => s.rss));
  return {
    bytes: received,
    seconds,
    rssBefore: before.rss,
    rssPeak: peakOf(0, 1),
    rssAfter: after.rss,
    samples: samples.length,
    rssFirstQuarterPeak: peakOf(0, 0.25),
    rssLastQuarterPeak: peakOf(0.75, 1),
    maxProgramBuffered: stats.postgres?.maxProgramBuffered ?? NaN,
    maxProviderBuffered: stats.postgres?.maxProviderBuffered ?? NaN,
  };
}

export async function memorySuite(quick: boolean, log: (line: string) => void): Promise<SuiteReport> {
  const channels = quick ? 50 : 1000;
  const asks = quick ? 20 : 500;
  const streamBytes = quick ? 8 * MB : 100 * MB;
  const warmBytes = quick ? 2 * MB : 32 * MB;
  const idleNode = await startChild(["idle"]);
  const bareNodeRss = (await idleNode.memory()).rss;
  await idleNode.close();
  const container = await startChild(["container"]);
  const proxy = await startChild(["proxy", String(container.ready.port)]);
  let connection: MultiplexedConnection | undefined;
  try {
    await sleep(quick ? 100 : 1000);
    const idleMem = await proxy.memory();
    // Each database connection the proxy announces, in order (a warm-up stream, then the measured one).
    const announcements: AnnouncedConnection[] = [];
    let announce: ((a: AnnouncedConnection) => void) | undefined;
    const nextAnnounced = () => new Promise<AnnouncedConnection>((resolve) => (announcements.length > 0 ? resolve(announcements.shift()!) : (announce = resolve)));
    connection = await openContainer(`ws://127.0.0.1:${proxy.ready.port}/`, {
      onPostgres: (a) => {
        if (announce) {
          announce(a);
          announce = undefined;
        } else announcements.push(a);
      },
    });
    await connection.beginTools({ arguments: { greeting: "Hello" }, image: { name: "diverge/example-greeter", digest: "sha256:00" } });
    await connection.feedSecrets({ API_KEY: "bench-key" });
    log(`  memory: ${channels} open channels`);
    const channel = await perChannel(proxy, connection, channels);
    log(`  memory: ${asks} pending asks`);
    // Once a provider has begun tools on `/`, the program's asks go on the begin scope: pending asks
    // on /requests are measured on a second proxy that nobody begins.
    const requestsProxy = await startChild(["proxy", String(container.ready.port)]);
    const ask = await perAsk(requestsProxy, requestsProxy.ready.port, requestsProxy.ready.programPort!, asks).finally(() => requestsProxy.close());
    // A warm-up stream first: V8 grows its young generation once under this allocation rate (a step
    // of some tens of MB), and whether that step lands in the first quarter or later decided the
    // climb below, not the proxy's buffers. Warmed, the measured stream shows what the bytes cost.
    log(`  memory: the postgres pair, a ${warmBytes / MB} MB warm-up`);
    await stream(proxy, proxy.ready.pgPort!, nextAnnounced(), warmBytes);
    log(`  memory: the postgres pair streaming ${streamBytes / MB} MB`);
    const streamed = await stream(proxy, proxy.ready.pgPort!, nextAnnounced(), streamBytes);
    const families = await familiesMemory(quick, log);
    const result: MemoryResult = {
      idle: { proxyRss: idleMem.rss, proxyHeap: idleMem.heapUsed, bareNodeRss },
      perChannel: channel,
      perAsk: ask,
      stream: streamed,
      families: families.result,
    };
    const growth = streamed.rssPeak - streamed.rssBefore;
    const climb = streamed.rssLastQuarterPeak - streamed.rssFirstQuarterPeak;
    // Flat: RSS does not climb from the first quarter of the stream to the last (a leak or an
    // unbounded buffer grows with the bytes sent), and the peak stays far below the stream's size.
    // V8's young generation grows by a few tens of MB under this allocation rate, which is the step
    // at the start that the peak allows for.
    const flatLimit = 48 * MB;
    const climbLimit = 16 * MB;
    const targets: Target[] = [
      {
        case: 5,
        what: "idle proxy RSS",
        goal: "reported",
        value: `${(idleMem.rss / MB).toFixed(1)} MB (a Node process that loaded the same modules and serves nothing: ${(bareNodeRss / MB).toFixed(1)} MB)`,
        met: null,
      },
      {
        case: 5,
        what: "bytes per open channel (begin scope)",
        goal: "reported",
        value: `${(channel.bytes / 1024).toFixed(1)} KB heap + external (${channels} notification channels)`,
        met: null,
      },
      {
        case: 5,
        what: "bytes per pending ask (/requests)",
        goal: "reported",
        value: `${(ask.bytes / 1024).toFixed(1)} KB heap + external, with the program's HTTP request it holds (${asks} asks)`,
        met: null,
      },
      {
        case: 5,
        what: `postgres pair streaming ${(streamed.bytes / MB).toFixed(0)} MB`,
        goal: `proxy RSS flat (no climb over ${climbLimit / MB} MB from the first quarter to the last; peak within ${flatLimit / MB} MB of the start)`,
        value:
          `${climb >= 0 ? "+" : ""}${(climb / MB).toFixed(1)} MB from the first quarter's peak to the last's; +${(growth / MB).toFixed(1)} MB at the peak ` +
          `(${(streamed.rssBefore / MB).toFixed(1)} → ${(streamed.rssPeak / MB).toFixed(1)} MB, ${streamed.samples} samples); ` +
          `largest buffers ${(streamed.maxProviderBuffered / 1024).toFixed(0)} KB to the provider, ${(streamed.maxProgramBuffered / 1024).toFixed(0)} KB to the program; ${(streamed.bytes / MB / streamed.seconds).toFixed(0)} MB/s`,
        met: growth <= flatLimit && climb <= climbLimit,
      },
      ...families.targets,
    ];
    return {
      result,
      targets,
      tables: [
        {
          title: "Case 5: proxy memory",
          columns: ["what", "measured"],
          rows: [
            ["idle proxy RSS", `${(idleMem.rss / MB).toFixed(1)} MB (heap ${(idleMem.heapUsed / MB).toFixed(1)} MB)`],
            ["Node process, same modules loaded, serving nothing", `${(bareNodeRss / MB).toFixed(1)} MB`],
            [`per open channel (${channels}; the proxy counted ${channel.openChannels} open)`, `${(channel.bytes / 1024).toFixed(2)} KB heap+external, ${(channel.rssBytes / 1024).toFixed(2)} KB RSS`],
            [`per pending ask (${asks}; the proxy counted ${ask.pendingAsks} pending)`, `${(ask.bytes / 1024).toFixed(2)} KB heap+external, ${(ask.rssBytes / 1024).toFixed(2)} KB RSS`],
            [
              `postgres pair, ${(streamed.bytes / MB).toFixed(0)} MB to the program`,
              `RSS ${(streamed.rssBefore / MB).toFixed(1)} MB before, peak ${(streamed.rssFirstQuarterPeak / MB).toFixed(1)} MB in the first quarter and ${(streamed.rssLastQuarterPeak / MB).toFixed(1)} MB in the last, ` +
                `${(streamed.rssAfter / MB).toFixed(1)} MB after; ${(streamed.bytes / MB / streamed.seconds).toFixed(0)} MB/s`,
            ],
            [
              "largest buffers of the pair (the proxy's PairStats)",
              `${(streamed.maxProviderBuffered / 1024).toFixed(0)} KB waiting to the provider, ${(streamed.maxProgramBuffered / 1024).toFixed(0)} KB waiting in the program's socket`,
            ],
            ...families.rows,
          ],
        },
      ],
    };
  } finally {
    connection?.close();
    await proxy.close();
    await container.close();
  }
}
