// Faults from the program's side and from half-made connections, for the soak's multiplexed cycles
// (issue 12): before the provider dials, a database driver resets its connection and two upgrades of
// `/` fail (a bad Sec-WebSocket-Key; a client gone right after its request); once the container has
// begun, a daemon program that never reads is flooded by the provider until the proxy ends that
// pair. None of them may take the proxy's one connection, crash it, stall an exchange beside it, or
// grow its memory past the soak's bound.
import { randomBytes } from "node:crypto";
import { connect, type Socket } from "node:net";
import type { AnnouncedConnection } from "@diverge/client";
import type { RunningProxy } from "@diverge/server";
import { WebSocket } from "ws";

export interface ProgramFaultCounts {
  driverResetBeforeProvider: number;
  failedHandshake: number;
  stalledDaemon: number;
}

const MiB = 1024 * 1024;
/** The most the provider sends toward one stalled daemon; the proxy must end the pair well before. */
const FLOOD_LIMIT = 256 * MiB;

async function tcp(port: number): Promise<Socket> {
  const socket = connect({ host: "127.0.0.1", port });
  socket.on("error", () => {});
  await new Promise<void>((resolve, reject) => {
    socket.once("connect", () => resolve());
    socket.once("error", reject);
  });
  return socket;
}

const closedOf = (socket: Socket) => new Promise<void>((resolve) => (socket.destroyed && socket.closed ? resolve() : socket.once("close", () => resolve())));

const upgradeOf = (port: number, key: string) =>
  `GET / HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: ${key}\r\n\r\n`;

/** Before the provider dials: a driver reset, a bad-key upgrade and a vanishing one. Throws when the proxy did not come through. */
export async function beforeProvider(proxy: RunningProxy, counts: ProgramFaultCounts): Promise<void> {
  const driver = await tcp(proxy.multiplexed.pgPort);
  driver.resetAndDestroy();
  counts.driverResetBeforeProvider++;

  const badKey = await tcp(proxy.port);
  badKey.write(upgradeOf(proxy.port, "not-a-key"));
  const status = await new Promise<string>((resolve) => {
    badKey.once("data", (chunk: Buffer) => resolve(chunk.toString("latin1").slice(0, 12)));
    badKey.once("close", () => resolve("closed"));
  });
  badKey.destroy();
  if (status !== "HTTP/1.1 400") throw new Error(`a bad-key upgrade of / got ${JSON.stringify(status)}, not 400`);
  counts.failedHandshake++;

  const vanishing = await tcp(proxy.port);
  vanishing.write(upgradeOf(proxy.port, randomBytes(16).toString("base64")), () => vanishing.resetAndDestroy());
  await Promise.all([closedOf(driver), closedOf(badKey), closedOf(vanishing)]);
  counts.failedHandshake++;
  // The proxy may have completed that handshake before it saw the reset; it lets go of such a
  // connection (cut before its first frame) once it sees it close.
  const deadline = Date.now() + 5000;
  while (proxy.multiplexed.connection && !proxy.multiplexed.connection.frames.closed && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 5));
  while (proxy.multiplexed.connection && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 5));
  if (proxy.multiplexed.connection) throw new Error("a client that vanished before its first frame kept the proxy's one connection");
}

/** One stalled daemon per cycle: the program never reads; the provider floods it until the proxy ends the pair. */
export class StalledDaemon {
  private program: WebSocket | undefined;
  private floodedBytes = 0;
  /** Set once the provider's half ended: true when the proxy finished it, false when the connection was lost. */
  private endedByProxy: boolean | undefined;

  constructor(private readonly counts: ProgramFaultCounts) {}

  /** The provider's `onDaemon`: accepts and floods until its half ends. */
  readonly onDaemon = (announced: AnnouncedConnection): void => {
    let over = false;
    const half = announced.accept({
      data: () => {},
      end: (served) => {
        over = true;
        this.endedByProxy = served;
        // As a provider does when the program's side is gone: the daemon's side ends too.
        half.end();
      },
    });
    // One daemon server frame (a response on scope 1) of 256 KiB, again and again.
    const frame = new Uint8Array(256 * 1024);
    frame[0] = 2;
    frame[4] = 1;
    void (async () => {
      while (!over && this.floodedBytes < FLOOD_LIMIT) {
        half.send(frame);
        this.floodedBytes += frame.length;
        if (half.bufferedAmount > MiB) await half.drained(256 * 1024);
      }
    })();
  };

  /** The program dials `/daemon`, sends one request so its half has spoken, and then reads nothing. */
  async start(proxy: RunningProxy): Promise<void> {
    const program = new WebSocket(`ws://127.0.0.1:${proxy.programPort}/daemon`);
    this.program = program;
    program.on("error", () => {});
    await new Promise<void>((resolve, reject) => {
      program.once("open", () => resolve());
      program.once("error", reject);
    });
    program.send(Uint8Array.from([1, 0, 0, 0, 1, 0, 0, 0, 0]));
    program.pause();
    this.counts.stalledDaemon++;
  }

  /** Why this stall did not end as it must (the proxy ends the pair and closes the program), or undefined. */
  async problem(cut: boolean, ms = 10_000): Promise<string | undefined> {
    if (!this.program) return undefined;
    const deadline = Date.now() + ms;
    while (Date.now() < deadline && (this.endedByProxy === undefined || this.program.readyState !== WebSocket.CLOSED)) {
      if (this.floodedBytes >= FLOOD_LIMIT) break;
      // Once its pair has ended, the program reads again, and so sees the close the proxy sent.
      if (this.endedByProxy !== undefined) this.program.resume();
      await new Promise((resolve) => setTimeout(resolve, 10));
    }
    if (cut) return undefined;
    if (this.floodedBytes >= FLOOD_LIMIT) return `a stalled daemon was sent ${this.floodedBytes} bytes and its pair was not ended`;
    if (this.endedByProxy !== true) return `a stalled daemon's pair did not end by the proxy's finish (${String(this.endedByProxy)})`;
    if (this.program.readyState !== WebSocket.CLOSED) return "a stalled daemon's socket was not closed by the proxy";
    return undefined;
  }

  close(): void {
    this.program?.terminate();
  }
}
