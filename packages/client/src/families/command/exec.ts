// The command family's behaviour on the provider's side: each command runs one executable with the
// command's bytes on its stdin; each line it writes to stdout is one item (without the newline);
// exit status 0 ends the answer cleanly, any other status ends it with the error
// `{"exit":<status>,"stderr":"<the last 4 KiB of stderr>"}`. The path ending stops the process.
import { spawn } from "node:child_process";
import { constants } from "node:os";
import { createInterface } from "node:readline";
import type { CommandResponse } from "@diverge/codec";
import type { RequestsAskBody } from "@diverge/codec/exchanges";
import type { AnswerContext } from "../../exchanges/engine.js";

/** How much of the end of stderr the error carries. */
export const STDERR_TAIL_BYTES = 4096;

/** A `command` handler for `ProviderHandlers` that runs `executable` once per command. */
export function commandExec(executable: string, args: readonly string[] = []): (ask: RequestsAskBody<"Command">, context: AnswerContext) => AsyncIterable<CommandResponse> {
  return async function* run({ command }, context) {
    const child = spawn(executable, [...args], { stdio: ["pipe", "pipe", "pipe"] });
    let stderr = Buffer.alloc(0);
    child.stderr.on("data", (chunk: Buffer) => {
      stderr = Buffer.concat([stderr, chunk]);
      if (stderr.length > STDERR_TAIL_BYTES) stderr = stderr.subarray(stderr.length - STDERR_TAIL_BYTES);
    });
    // A command the executable does not read in full is no failure of ours: EPIPE is its business.
    child.stdin.on("error", () => {});
    child.stdin.end(Buffer.from(command));
    const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null; error?: Error }>((resolve) => {
      child.once("error", (error) => resolve({ code: null, signal: null, error }));
      child.once("close", (code, signal) => resolve({ code, signal }));
    });
    const stop = () => child.kill("SIGKILL");
    context.signal.addEventListener("abort", stop, { once: true });
    try {
      const lines = createInterface({ input: child.stdout, crlfDelay: Infinity });
      for await (const line of lines) {
        if (context.signal.aborted) return;
        yield { variant: "Item", item: new TextEncoder().encode(line) };
      }
      const { code, signal, error } = await exited;
      if (error) throw error;
      const status = code ?? 128 + (signal ? (constants.signals[signal] ?? 0) : 0);
      if (status !== 0) yield { variant: "Error", error: { exit: status, stderr: stderr.toString("utf8") } };
    } finally {
      context.signal.removeEventListener("abort", stop);
      if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL");
    }
  };
}
