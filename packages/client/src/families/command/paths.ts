// The command family on the paths transport (`/requests` kind 10, `/command/{channel}`): the
// `command` handler's items sent on the open path as the path drains, and an answer that cannot be
// sent once the handler has started ends with the command's error, never with a bare close (which the
// proxy reads as "not served", so a program could run the command again; paths.md §5).
//
//   an item over the message limit      → the error {"refused":"itemTooLarge","maxItemBytes":<limit − 1>}, last
//   the handler throwing                → an abrupt end (lost: outcome unknown, never run again); the
//                                         reason goes to the provider's error event only
// (A handler that ends having sent nothing is still a clean close with no message: the wire has no
// other way to say "done, no items".)
//
// Backpressure: the next item is pulled from the handler only once the path's send buffer is below
// {@link COMMAND_SEND_HIGH_WATER_BYTES}; with `commandExec`, the executable then blocks on its pipe.
import { encodeCommandResponse, EncodeError, type CommandResponse } from "@diverge/codec";
import type { ProviderHandlers } from "../../gen/exchanges.js";
import { ProviderError } from "../../paths/errors.js";
import type { PathsAnswerHost, PathsFamily } from "../../paths/answering.js";
import type { OpenSocket } from "../../paths/socket.js";
import { DEFAULT_MAX_MESSAGE_BYTES } from "../../limits.js";
import type { CommandContext } from "./exec.js";

/** Bytes a command's path may hold unsent before the next item waits. */
export const COMMAND_SEND_HIGH_WATER_BYTES = 1024 * 1024;
/** How often a waiting item looks at the path's send buffer again. */
const DRAIN_POLL_MS = 5;

/** Resolves once the socket's send buffer is below the high-water mark, or it is no longer open. */
async function drained(socket: OpenSocket): Promise<void> {
  while (socket.isOpen && socket.bufferedAmount >= COMMAND_SEND_HIGH_WATER_BYTES) await new Promise((resolve) => setTimeout(resolve, DRAIN_POLL_MS));
}

async function answerCommand(ask: Extract<Parameters<NonNullable<PathsFamily<ProviderHandlers>["answer"]>>[0], { variant: "Command" }>, handler: NonNullable<ProviderHandlers["command"]>, path: string, host: PathsAnswerHost): Promise<void> {
  const socket = await host.openPath(path);
  if (!socket) return;
  const controller = new AbortController();
  void socket.ended.then(() => controller.abort());
  const limit = host.maxMessageBytes ?? DEFAULT_MAX_MESSAGE_BYTES;
  const context: CommandContext = { channel: ask.channel, path, signal: controller.signal, maxItemBytes: limit - 1 };
  let sent = 0;
  const send = (response: CommandResponse) => {
    socket.send(encodeCommandResponse(response));
    sent++;
  };
  const iterator = handler({ command: ask.command }, context)[Symbol.asyncIterator]();
  try {
    for (;;) {
      // Most items find the path below its mark: no wait (and no promise turn) for them.
      if (socket.bufferedAmount >= COMMAND_SEND_HIGH_WATER_BYTES) await drained(socket);
      if (!socket.isOpen) break;
      const next = await iterator.next();
      if (next.done || !socket.isOpen) break;
      const bytes = encodeCommandResponse(next.value);
      if (bytes.length > limit) {
        host.emit({ type: "error", error: new ProviderError({ variant: "AnswerUnwritable", path, reason: `the answer is ${bytes.length} bytes, larger than the proxy's message limit of ${limit}` }) });
        send({ variant: "Error", error: { refused: "itemTooLarge", maxItemBytes: limit - 1 } });
        break;
      }
      socket.send(bytes);
      sent++;
      if (next.value.variant === "Error") break;
    }
  } catch (problem) {
    const reason = problem instanceof Error ? problem.message : String(problem);
    host.emit({ type: "error", error: new ProviderError({ variant: problem instanceof EncodeError ? "AnswerUnwritable" : "HandlerFailed", path, reason }) });
    // The handler started: whatever it did, the path ends abruptly, which the program reads as a failed
    // command (outcome unknown, never run again). The reason may name the provider's own files: it stays here.
    socket.terminate();
  } finally {
    // Ends the handler (and with `commandExec` its process group) if it has not ended itself.
    void iterator.return?.()?.catch(() => {});
  }
  socket.close();
  const ending = await socket.ended;
  host.emit({ type: "pathEnded", path, outcome: sent === 0 ? "declined" : "streamEnded", ending });
}

export const commandPaths: PathsFamily<ProviderHandlers> = {
  answer: (ask, handlers, path, host) => (ask.variant === "Command" && handlers.command ? answerCommand(ask, handlers.command, path, host) : undefined),
};
