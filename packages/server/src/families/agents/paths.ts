// /agent/register, /agent/run, /agent/schema, /agent/enqueue and /agent/dequeue on the paths transport
// (agents.md §9, with its corrections to paths.md §10): straight relays to the program, whose queue
// this is. The first binary message is the ask (text messages are ignored); the proxy sends its
// answer(s) and closes; an ask that does not decode gets a close with no message; the provider
// leaving abandons the call to the program.
import { logEvent, type Say } from "@diverge/multiplexer/log";
import type { RawData, WebSocket } from "ws";
import {
  AgentRequestError,
  ProgramDequeueOutcomeError,
  ProgramEnqueueFateError,
  decodeAgentPromptRequest,
  decodeAgentRegisterRequest,
  decodeProgramDequeueOutcomeBody,
  decodeProgramEnqueueFateBody,
  encodeAgentDequeueAnswer,
  encodeAgentEnqueueAnswer,
  encodeAgentRegisterAnswer,
  encodeAgentSchemaAnswer,
  encodeAgenticLoopAnswer,
} from "@diverge/codec";
import type { UpgradeDecision, UpgradeRoute } from "../../listener.js";
import { isEventStream, notificationOf } from "./agent-program.js";
import { callProgram, garbageWords, isSuccess, programWords, readBody, unreachableWords, type ProgramReply } from "./program.js";
import { sseEvents } from "./sse.js";

const KIND = "agent";
const LOW_WATER = 1024 * 1024;
/** The run stream died after its first item (agents.md §9, correction 1; golden example P2). */
export const LOOP_DIED = { kind: "loop", error: "the loop ended without finishing" } as const;

type Ask = "register" | "run" | "schema" | "enqueue" | "dequeue";
const ASKS = new Map<string, Ask>([
  ["/agent/register", "register"],
  ["/agent/run", "run"],
  ["/agent/schema", "schema"],
  ["/agent/enqueue", "enqueue"],
  ["/agent/dequeue", "dequeue"],
]);

export interface AgentPathsOptions {
  /** The program's port (read at every call). */
  readonly appPort: () => number;
  readonly maxMessageBytes: number;
  readonly log: Say;
}

function bytesOf(data: RawData): Uint8Array {
  if (Array.isArray(data)) return new Uint8Array(Buffer.concat(data));
  return data instanceof ArrayBuffer ? new Uint8Array(data) : new Uint8Array(data.buffer, data.byteOffset, data.byteLength);
}

async function drained(socket: WebSocket, lowWater: number): Promise<void> {
  while (socket.bufferedAmount > lowWater && socket.readyState === socket.OPEN) await new Promise((resolve) => setTimeout(resolve, 5));
}

export class AgentPaths implements UpgradeRoute {
  private readonly sockets = new Set<WebSocket>();
  private closed = false;

  constructor(private readonly options: AgentPathsOptions) {}

  decide(pathname: string): UpgradeDecision {
    const ask = ASKS.get(pathname);
    if (!ask) return undefined;
    if (this.closed) return { refuse: 404 };
    return { accept: (socket) => this.open(socket, ask) };
  }

  /** Paths open now. */
  get openPaths(): number {
    return this.sockets.size;
  }

  /** Every open path ends abruptly (the proxy is ending), and its call to the program with it. */
  close(): void {
    this.closed = true;
    for (const socket of this.sockets) socket.terminate();
    this.sockets.clear();
  }

  private open(socket: WebSocket, ask: Ask): void {
    this.sockets.add(socket);
    const aborter = new AbortController();
    socket.on("error", () => {});
    socket.once("close", () => {
      this.sockets.delete(socket);
      aborter.abort();
    });
    const serve = (body: Uint8Array | undefined) =>
      void this.serve(socket, ask, body, aborter.signal).catch((problem: unknown) => {
        this.options.log(...logEvent(`/agent/${ask} failed: {error}; ending it`, { error: problem instanceof Error ? problem.message : String(problem) }));
        socket.terminate();
      });
    if (ask === "schema" || ask === "dequeue") return serve(undefined);
    let asked = false;
    socket.on("message", (data, isBinary) => {
      // Text messages carry nothing (the spec); a second binary message is ignored.
      if (!isBinary || asked) return;
      asked = true;
      const bytes = bytesOf(data);
      try {
        if (ask === "register") decodeAgentRegisterRequest(bytes);
        else decodeAgentPromptRequest(bytes);
      } catch (problem) {
        if (!(problem instanceof AgentRequestError)) throw problem;
        this.options.log(...logEvent(`/agent/${ask}: {error}; closing with no message`, { error: problem.message }));
        return socket.close();
      }
      serve(bytes.slice());
    });
  }

  private send(socket: WebSocket, bytes: Uint8Array): boolean {
    if (socket.readyState !== socket.OPEN) return false;
    socket.send(bytes);
    return true;
  }

  private async serve(socket: WebSocket, ask: Ask, body: Uint8Array | undefined, signal: AbortSignal): Promise<void> {
    const port = this.options.appPort();
    const limit = this.options.maxMessageBytes;
    const path = `/${ask}`;
    const reply: ProgramReply = ask === "schema" ? await callProgram(port, "GET", path, undefined, signal) : await callProgram(port, "POST", path, ask === "dequeue" ? "{}" : body, signal);
    if (signal.aborted) return;
    // The error answer of each path; the relays below decide the rest.
    const error = (value: unknown): Uint8Array => {
      switch (ask) {
        case "register":
          return encodeAgentRegisterAnswer({ variant: "Error", error: value });
        case "run":
          return encodeAgenticLoopAnswer({ variant: "Error", error: value });
        case "schema":
          return encodeAgentSchemaAnswer({ variant: "Error", error: value });
        case "enqueue":
          return encodeAgentEnqueueAnswer({ variant: "Error", error: value });
        case "dequeue":
          return encodeAgentDequeueAnswer({ variant: "Error", error: value });
      }
    };
    const finish = (bytes: Uint8Array) => {
      this.send(socket, bytes);
      socket.close(1000);
    };
    if ("unreachable" in reply) return finish(error(unreachableWords(KIND, reply.unreachable)));
    const { response } = reply;
    const status = response.statusCode ?? 0;
    if (ask === "run" && isSuccess(status) && isEventStream(response.headers["content-type"])) return this.relayRun(socket, response, signal);
    let answer: Buffer;
    try {
      answer = await readBody(response, limit);
    } catch (problem) {
      if (signal.aborted) return;
      return finish(error(unreachableWords(KIND, `the answer could not be read: ${problem instanceof Error ? problem.message : String(problem)}`)));
    }
    if (signal.aborted) return;
    if (!isSuccess(status)) return finish(error(programWords(KIND, status, answer)));
    switch (ask) {
      case "register":
        // This generation's register answers nothing but its status.
        return finish(encodeAgentRegisterAnswer({ variant: "Registered" }));
      case "run":
        return finish(error({ kind: KIND, status, error: `the run answer is not an event stream (content-type ${response.headers["content-type"] ?? "none"})` }));
      case "schema": {
        // The body unparsed (agents.md §9, correction 3).
        const bytes = new Uint8Array(answer.length + 1);
        bytes.set(answer, 1);
        if (bytes.length > limit) return finish(error(garbageWords(`the schema is ${answer.length} bytes, larger than the message limit`)));
        return finish(bytes);
      }
      case "enqueue": {
        let fate: "delivered" | "dequeued" | "missed";
        try {
          fate = decodeProgramEnqueueFateBody(answer).fate.type;
        } catch (problem) {
          if (!(problem instanceof ProgramEnqueueFateError)) throw problem;
          return finish(error(garbageWords(problem.message)));
        }
        return finish(encodeAgentEnqueueAnswer({ variant: fate === "delivered" ? "Delivered" : fate === "dequeued" ? "Dequeued" : "Missed" }));
      }
      case "dequeue": {
        let outcome: "dequeued" | "empty";
        try {
          outcome = decodeProgramDequeueOutcomeBody(answer).outcome.type;
        } catch (problem) {
          if (!(problem instanceof ProgramDequeueOutcomeError)) throw problem;
          return finish(error(garbageWords(problem.message)));
        }
        return finish(encodeAgentDequeueAnswer({ variant: outcome === "dequeued" ? "Withdrew" : "Nothing" }));
      }
    }
  }

  /** One Chunk message per event, in order (unstamped); the stream's clean end closes, its death ends with the loop error. */
  private async relayRun(socket: WebSocket, response: import("node:http").IncomingMessage, signal: AbortSignal): Promise<void> {
    const limit = this.options.maxMessageBytes;
    let died = false;
    try {
      for await (const item of sseEvents(response, limit)) {
        if (signal.aborted || socket.readyState !== socket.OPEN) return;
        this.send(socket, this.chunk("data" in item ? item.data : notificationOf(garbageWords(`an event of ${item.oversized} characters is larger than the message limit`))));
        await drained(socket, LOW_WATER);
      }
      if (!response.complete) died = true;
    } catch {
      died = true;
    }
    if (signal.aborted) return;
    if (died) this.send(socket, encodeAgenticLoopAnswer({ variant: "Error", error: LOOP_DIED }));
    socket.close(1000);
  }

  /** `[0][chunk]`: the program's JSON verbatim when it is an object; otherwise the error value in a notification. */
  private chunk(data: string): Uint8Array {
    let object = false;
    try {
      const value: unknown = JSON.parse(data);
      object = typeof value === "object" && value !== null && !Array.isArray(value);
    } catch {
      object = false;
    }
    const text = object ? data : notificationOf(garbageWords(`agentic loop chunk did not parse: ${data === "" ? "an empty event" : "not a JSON object"}`));
    const bytes = new TextEncoder().encode("\u0000" + text);
    if (bytes.length > this.options.maxMessageBytes) return encodeAgenticLoopAnswer({ variant: "Chunk", chunk: JSON.parse(notificationOf(garbageWords(`a chunk of ${bytes.length - 1} bytes is larger than the message limit`))) as Record<string, unknown> });
    return bytes;
  }
}
