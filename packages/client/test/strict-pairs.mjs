// Run by strict.test.ts as `node --unhandled-rejections=strict`: every way a backend of an announced
// pair can fail, against real proxies. Any unhandled rejection or uncaught exception kills the process
// with a non-zero code; on success it prints the events it saw as JSON and exits 0.
import { createServer, connect } from "node:net";
import { WebSocket } from "ws";
import { encodeClientFrame } from "@diverge/codec";
import { exampleRoot, startExampleContainer } from "@diverge/example-container";
import { startProxy } from "@diverge/server";
import { openContainer, pipePostgres } from "../dist/index.js";

const app = await startExampleContainer();
const closers = [() => app.close()];

/** A port nothing listens on. */
async function deadPort() {
  const server = createServer();
  await new Promise((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address();
  await new Promise((resolve) => server.close(resolve));
  return port;
}

/** A "database" that accepts and resets at once. */
const resetting = createServer((socket) => socket.resetAndDestroy());
await new Promise((resolve) => resetting.listen(0, "127.0.0.1", resolve));
closers.push(() => new Promise((resolve) => resetting.close(resolve)));

const events = [];
async function provider(name, options) {
  const proxy = await startProxy({ port: 0, programPort: 0, pgPort: 0, appPort: app.port, root: exampleRoot, secretsGate: false, log: () => {} });
  closers.push(() => proxy.close());
  const connection = await openContainer(`ws://127.0.0.1:${proxy.port}`, {
    ...options,
    onEvent: (event) => events.push({ provider: name, type: event.type, kind: event.kind, id: event.id, error: event.error?.message }),
  });
  closers.push(() => connection.close());
  await connection.beginTools({ arguments: { greeting: "Hi" } });
  return { proxy, connection };
}

/** The program's database driver: connects, writes, waits for its socket to end. */
async function driver(proxy) {
  const socket = connect({ host: "127.0.0.1", port: proxy.multiplexed.pgPort });
  socket.on("error", () => {});
  socket.write("startup");
  await new Promise((resolve) => socket.once("close", resolve));
}

/** The program's daemon connection: sends one frame, waits for its socket to end. */
async function daemon(proxy) {
  const socket = new WebSocket(`ws://127.0.0.1:${proxy.programPort}/daemon`);
  socket.on("error", () => {});
  socket.on("open", () => socket.send(encodeClientFrame({ variant: "Request", scope: 1, channel: 0, payload: new Uint8Array([0]) })));
  await new Promise((resolve) => socket.once("close", resolve));
}

const dead = `postgres://u@127.0.0.1:${await deadPort()}/db`;

// 1. The database option with the database down.
const a = await provider("database-down", { database: dead });
await driver(a.proxy);
// 2. The natural one-liner, returning pipePostgres's promise, with the database down.
const b = await provider("one-liner", { onPostgres: (c) => pipePostgres(c, dead) });
await driver(b.proxy);
// 3. A database that resets the connection as soon as it is made.
const c = await provider("database-resets", { database: { host: "127.0.0.1", port: resetting.address().port } });
await driver(c.proxy);
// 4. Handlers that throw, reject, or whose pair handlers throw.
let daemons = 0;
const d = await provider("throwing-handlers", {
  onPostgres: async () => {
    throw new Error("postgres handler rejected");
  },
  onDaemon: (announced) => {
    daemons++;
    if (daemons === 1) throw new Error("daemon handler threw");
    announced.accept({
      data() {
        throw new Error("daemon data handler threw");
      },
      end() {
        throw new Error("daemon end handler threw");
      },
    });
  },
});
await driver(d.proxy);
await daemon(d.proxy);
await daemon(d.proxy);
// 5. The connection dropped while a pair is open and an ask is in flight.
const e = await provider("dropped", { onDaemon: (announced) => announced.accept({ data() {}, end() {} }) });
const open = new WebSocket(`ws://127.0.0.1:${e.proxy.programPort}/daemon`);
open.on("error", () => {});
await new Promise((resolve) => open.once("open", resolve));
e.connection.mcp.notifications();
e.connection.mcp.listTools().catch(() => {});
await e.proxy.close();
await e.connection.ended();

await new Promise((resolve) => setTimeout(resolve, 200));
for (const close of closers.reverse()) await close().catch(() => {});
process.stdout.write(JSON.stringify(events));
process.exit(0);
