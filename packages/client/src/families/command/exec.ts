// The command family's behaviour on the provider's side: each command runs one executable with the
// command's bytes on its stdin; each line it writes to stdout is one item (its bytes, without the
// `\n` and a `\r` before it); exit status 0 ends the answer cleanly, any other status ends it with the
// error `{"exit":<status>,"stderr":"<the last 4 KiB of stderr>"}`. A line longer than the item limit
// (the message limit less the tag byte) is never held whole: the command is stopped and its answer
// ends with the error `{"refused":"lineTooLong","maxLineBytes":<limit>}` (a split would hand the
// program two items it cannot tell from two lines).
//
// Each command runs in a process group of its own (a session, `detached`), and the group is ended —
// SIGTERM, then SIGKILL after a grace — when the command's own process exits (what it left behind
// goes with it), when the path ends (the program left, the exchange ended) and when this process
// exits (the provider stops). Its stdout is read only as fast as the answer path drains: the
// executable blocks on a full pipe instead of the provider holding its output.
import type { ChildProcess } from "node:child_process";
import { constants } from "node:os";
import type { CommandResponse } from "@diverge/codec";
import type { RequestsAskBody } from "@diverge/codec/exchanges";
import type { AnswerContext } from "../../exchanges/engine.js";
import { DEFAULT_MAX_MESSAGE_BYTES } from "../../limits.js";
import { endGroup, spawnInGroup } from "../../process-group.js";

/** How much of the end of stderr the error carries. */
export const STDERR_TAIL_BYTES = 4096;
/** How long a command's group has between SIGTERM and SIGKILL. */
export const DEFAULT_KILL_GRACE_MS = 2000;

export interface CommandExecOptions {
  /** The longest line that is one item, in bytes. Default: what the path carries (its message limit less the tag byte; 16 MiB − 1 by default). */
  readonly maxLineBytes?: number;
  /** Between SIGTERM and SIGKILL of a command's group. Default {@link DEFAULT_KILL_GRACE_MS}. */
  readonly killGraceMs?: number;
}

/** What the command's answerer on the paths connection adds to the context: the largest item the path carries. */
export interface CommandContext extends AnswerContext {
  readonly maxItemBytes?: number;
}

/** A `command` handler for `ProviderHandlers` that runs `executable` once per command. */
export function commandExec(executable: string, args: readonly string[] = [], options: CommandExecOptions = {}): (ask: RequestsAskBody<"Command">, context: AnswerContext) => AsyncIterable<CommandResponse> {
  const graceMs = options.killGraceMs ?? DEFAULT_KILL_GRACE_MS;
  return async function* run({ command }, context: CommandContext) {
    const maxLine = options.maxLineBytes ?? (context.maxItemBytes ?? DEFAULT_MAX_MESSAGE_BYTES - 1);
    if (context.signal.aborted) return;
    const child: ChildProcess = spawnInGroup(executable, args, { stdio: ["pipe", "pipe", "pipe"] });
    let ending = false;
    const end = () => {
      if (ending) return;
      ending = true;
      void endGroup(child, graceMs);
    };
    let stderr = Buffer.alloc(0);
    child.stderr!.on("data", (chunk: Buffer) => {
      stderr = Buffer.concat([stderr, chunk]);
      if (stderr.length > STDERR_TAIL_BYTES) stderr = stderr.subarray(stderr.length - STDERR_TAIL_BYTES);
    });
    child.stderr!.on("error", () => {});
    child.stdout!.on("error", () => {});
    // A command the executable does not read in full is no failure of ours: EPIPE is its business.
    child.stdin!.on("error", () => {});
    child.stdin!.end(Buffer.from(command));
    const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null; error?: Error }>((resolve) => {
      child.once("error", (error) => resolve({ code: null, signal: null, error }));
      child.once("exit", (code, signal) => resolve({ code, signal }));
    });
    // The command's own process exiting ends what it left in its group (which would hold stdout open).
    child.once("exit", end);
    context.signal.addEventListener("abort", end, { once: true });
    try {
      // Lines as bytes. The stream is read as the answer is pulled: a full pipe blocks the executable.
      let pending: Buffer[] = [];
      let pendingBytes = 0;
      const line = (tail: Buffer): CommandResponse => {
        let bytes = pending.length === 0 ? tail : Buffer.concat([...pending, tail]);
        pending = [];
        pendingBytes = 0;
        if (bytes.length > 0 && bytes[bytes.length - 1] === 0x0d) bytes = bytes.subarray(0, bytes.length - 1);
        return { variant: "Item", item: new Uint8Array(bytes.buffer, bytes.byteOffset, bytes.length) };
      };
      const tooLong: CommandResponse = { variant: "Error", error: { refused: "lineTooLong", maxLineBytes: maxLine } };
      for await (const chunk of child.stdout! as AsyncIterable<Buffer>) {
        if (context.signal.aborted) return;
        let from = 0;
        for (;;) {
          const at = chunk.indexOf(0x0a, from);
          const upTo = at < 0 ? chunk.length : at;
          // The line so far, without its `\n` (and a `\r` before it, which is the one byte allowed over).
          const lineBytes = pendingBytes + upTo - from;
          const last = at > from ? chunk[at - 1] : pending.at(-1)?.at(-1);
          if (lineBytes > maxLine && !(at >= 0 && lineBytes === maxLine + 1 && last === 0x0d)) {
            end();
            yield tooLong;
            return;
          }
          if (at < 0) {
            if (from < chunk.length) {
              pending.push(chunk.subarray(from));
              pendingBytes += chunk.length - from;
            }
            break;
          }
          yield line(chunk.subarray(from, at));
          if (context.signal.aborted) return;
          from = at + 1;
        }
      }
      if (pendingBytes > 0) yield line(Buffer.alloc(0));
      const { code, signal, error } = await exited;
      if (error) throw error;
      const status = code ?? 128 + (signal ? (constants.signals[signal] ?? 0) : 0);
      if (status !== 0) yield { variant: "Error", error: { exit: status, stderr: stderr.toString("utf8") } };
    } finally {
      context.signal.removeEventListener("abort", end);
      end();
      child.stdout!.destroy();
      child.stderr!.destroy();
    }
  };
}
