// The command family's backpressure on the proxy (issue 24 §2): a command's items are taken from its
// answer path only as fast as the program's connection takes them, and no slower. Driven without the
// kernel in the way, so that what is asserted is the order of events, never how long anything took:
// the real `POST /command` (CommandApi) on the real paths engine (RequestsEngine); the answer path
// played by the test as `ws` plays it (64 KiB of messages a read, one read a turn, none while the
// proxy has it paused); the program's connection a stream given to a real node:http server that takes
// every byte at once, or none until the test says.
import { createServer } from "node:http";
import { Duplex } from "node:stream";
import { afterEach, describe, expect, it } from "vitest";
import { encodeCommandResponse } from "@diverge/codec";
import { RequestsEngine } from "../src/exchanges/engine.js";
import { CommandApi, COMMAND_PAUSE_AT_BYTES } from "../src/families/command/paths.js";
import { bindProxyAsks } from "../src/gen/exchanges.js";
import type { AnswerPath, AskBoard, AskOwner } from "../src/paths/board.js";

const READ_BYTES = 64 * 1024;
const turn = () => new Promise<void>((resolve) => setImmediate(resolve));

const cleanups: (() => unknown)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

/** Turns until `check` holds; a hang guard only (it fails the test after `turns`). */
async function until(what: string, check: () => boolean, turns = 100_000): Promise<void> {
  for (let n = 0; !check(); n++) {
    if (n >= turns) throw new Error(`never: ${what}`);
    await turn();
  }
}

/** The program's end of its HTTP connection: while `accepting`, every write is taken at once; otherwise it waits for `accept()`. */
class ProgramConnection extends Duplex {
  private text = "";
  private accepting: boolean;
  private held: (() => void) | undefined;

  constructor(accepting: boolean) {
    super();
    this.accepting = accepting;
  }

  override _read(): void {}

  override _write(chunk: Buffer, _encoding: BufferEncoding, callback: (error?: Error | null) => void): void {
    this.receive([chunk], callback);
  }

  override _writev(chunks: { chunk: Buffer }[], callback: (error?: Error | null) => void): void {
    this.receive(chunks.map((c) => c.chunk), callback);
  }

  accept(): void {
    this.accepting = true;
    const held = this.held;
    this.held = undefined;
    held?.();
  }

  /** The items and the end line of the response so far, in order. */
  lines(): string[] {
    return [...this.text.matchAll(/\{"item":"([^"]*)"\}\n|(\{"end":[^\n]*\})\n/g)].map((m) => m[2] ?? Buffer.from(m[1]!, "base64").toString());
  }

  private receive(chunks: Buffer[], callback: () => void): void {
    for (const chunk of chunks) this.text += chunk.toString("latin1");
    if (this.accepting) callback();
    else this.held = callback;
  }
}

/** Item `i`: 64 bytes, as `yes` writes a line of the bench's command. */
const itemOf = (i: number) => `item ${String(i).padStart(10, "0")} `.padEnd(64, "y");

/** `POST /command` from `program`, its ask answered on a path the test drives. */
async function command(program: ProgramConnection) {
  const owners: AskOwner[] = [];
  const board = { ask: (owner: AskOwner) => void owners.push(owner) } as unknown as AskBoard;
  const api = new CommandApi(bindProxyAsks(new RequestsEngine({ board })), 1024 * 1024);
  const server = createServer((request, response) => {
    if (!api.route(request, response, "/command")) response.writeHead(404).end();
  });
  cleanups.push(() => {
    api.close();
    program.destroy();
    server.close();
  });
  server.emit("connection", program);
  program.push("POST /command HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 2\r\n\r\ngo");
  await until("the command asked", () => owners.length === 1);
  const path = { paused: false, pauses: 0, taken: 0, sent: 0 };
  const answer: AnswerPath = {
    channel: 1,
    close: () => {},
    send: () => {},
    pause: () => {
      path.paused = true;
      path.pauses++;
    },
    resume: () => {
      path.paused = false;
    },
  };
  const sink = owners[0]!.opened(answer);
  return {
    path,
    /** The provider's `count` items, a read of the path a turn while it is not paused; resolves when they are sent or `stop()` holds. */
    async send(count: number, stop: () => boolean = () => false): Promise<void> {
      while (path.sent < count && !stop()) {
        for (let bytes = 0; !path.paused && bytes < READ_BYTES && path.sent < count; ) {
          const message = encodeCommandResponse({ variant: "Item", item: new TextEncoder().encode(itemOf(path.sent++)) });
          sink.message(message);
          path.taken += message.length;
          bytes += message.length;
        }
        await turn();
      }
    },
    /** The provider closes the path: the command is done. */
    done: () => sink.ended({ how: "clean" }),
  };
}

describe("a command's items leave the proxy as fast as the program takes them", () => {
  it("a program that takes every byte at once never has the answer path paused, and reads every item in order", async () => {
    const program = new ProgramConnection(true);
    const answer = await command(program);
    // 4 MiB of items, four times the bound at which the proxy stops reading the path. Before, the
    // response waited for "drain" while corked until the end of its turn: 16 KiB left a turn while a
    // read brought 64 KiB, and the items sat at the bound (the path paused every few turns).
    const count = Math.ceil((4 * COMMAND_PAUSE_AT_BYTES) / 67);
    await answer.send(count);
    answer.done();
    await until("the end line", () => program.lines().at(-1) === '{"end":"done"}');
    expect(answer.path.pauses).toBe(0);
    const lines = program.lines();
    expect(lines.length).toBe(count + 1);
    for (let i = 0; i < count; i++) if (lines[i] !== itemOf(i)) expect(lines[i]).toBe(itemOf(i));
  });

  it("a program that takes nothing has the answer path paused at the bound, and reads every item in order once it takes them", async () => {
    const program = new ProgramConnection(false);
    const answer = await command(program);
    const count = Math.ceil((4 * COMMAND_PAUSE_AT_BYTES) / 67);
    await answer.send(count, () => answer.path.paused);
    expect(answer.path.paused).toBe(true);
    // What the proxy took from the path: the bound, the read that reached it, and what the response holds.
    expect(answer.path.taken).toBeLessThanOrEqual(COMMAND_PAUSE_AT_BYTES + READ_BYTES + 64 * 1024);
    // Turns pass; the program still takes nothing: the path stays paused.
    for (let n = 0; n < 100; n++) await turn();
    expect(answer.path.paused).toBe(true);
    expect(answer.path.sent).toBeLessThan(count);
    // The program takes everything from now on: the path is read again, to the end.
    program.accept();
    await answer.send(count);
    answer.done();
    await until("the end line", () => program.lines().at(-1) === '{"end":"done"}');
    const lines = program.lines();
    expect(lines.length).toBe(count + 1);
    for (let i = 0; i < count; i++) if (lines[i] !== itemOf(i)) expect(lines[i]).toBe(itemOf(i));
  });
});
