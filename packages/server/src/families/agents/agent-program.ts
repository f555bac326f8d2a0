// What the proxy asks the agent program on the multiplexed transport (agents.md §8), with every answer
// read by the generated decoders of its body (spec/2.3.0/agent-program.yaml): a body that does not
// decode becomes the spec's error value, never a crash.
import {
  ProgramDequeueOutcomeError,
  ProgramEnqueueFateError,
  ProgramRegisterAnswerError,
  decodeProgramDequeueOutcomeBody,
  decodeProgramEnqueueFateBody,
  decodeProgramRegisterAnswerBody,
  type AgentMessage,
  type AgentTools,
} from "@diverge/codec";
import { callProgram, garbageWords, isSuccess, programWords, readBody, unreachableWords } from "./program.js";
import { sseEvents } from "./sse.js";
import type { AgentProgram, Delivery, ProgramDequeue, RunStart } from "./run-loop.js";

const KIND = "program";

export type Registered = { readonly ok: true; readonly tools: AgentTools } | { readonly ok: false; readonly error: unknown; readonly status?: number };

/** A non-fatal notification chunk carrying an error value, in place of an event the proxy cannot relay. */
export function notificationOf(error: unknown): string {
  return JSON.stringify({ type: "notification", is_fatal: false, message: error });
}

export class HttpAgentProgram implements AgentProgram {
  constructor(
    private readonly port: () => number,
    /** The largest body or event the proxy reads, in bytes. */
    private readonly limit: number,
  ) {}

  /** `POST /register` with `{"arguments": …}`: the tools it declares, or its refusal in its words. */
  async register(args: unknown, signal: AbortSignal): Promise<Registered> {
    const reply = await callProgram(this.port(), "POST", "/register", JSON.stringify({ arguments: args }), signal);
    if ("unreachable" in reply) return { ok: false, error: unreachableWords(KIND, reply.unreachable) };
    const status = reply.response.statusCode ?? 0;
    let body: Buffer;
    try {
      body = await readBody(reply.response, this.limit);
    } catch (problem) {
      return { ok: false, status, error: unreachableWords(KIND, `the register answer could not be read: ${messageOf(problem)}`) };
    }
    if (!isSuccess(status)) return { ok: false, status, error: programWords(KIND, status, body) };
    try {
      return { ok: true, tools: decodeProgramRegisterAnswerBody(body).answer.tools ?? [] };
    } catch (problem) {
      if (!(problem instanceof ProgramRegisterAnswerError)) throw problem;
      return { ok: false, status, error: garbageWords(problem.message) };
    }
  }

  async run(messages: readonly AgentMessage[], signal: AbortSignal): Promise<RunStart> {
    const reply = await callProgram(this.port(), "POST", "/run", JSON.stringify({ messages: messages.map(({ key, content }) => ({ key, content })) }), signal);
    if ("unreachable" in reply) return { ok: false, error: unreachableWords(KIND, reply.unreachable) };
    const { response } = reply;
    const status = response.statusCode ?? 0;
    if (!isSuccess(status) || !isEventStream(response.headers["content-type"])) {
      let body: Buffer;
      try {
        body = await readBody(response, this.limit);
      } catch (problem) {
        return { ok: false, error: unreachableWords(KIND, `the run answer could not be read: ${messageOf(problem)}`) };
      }
      if (!isSuccess(status)) return { ok: false, error: programWords(KIND, status, body) };
      // The first item decides: a 2xx that is not an event stream started no loop the proxy can relay.
      return { ok: false, error: { kind: "agent", status, error: `the run answer is not an event stream (content-type ${response.headers["content-type"] ?? "none"})` } };
    }
    const limit = this.limit;
    return {
      ok: true,
      events: (async function* () {
        for await (const item of sseEvents(response, limit)) {
          yield "data" in item ? item.data : notificationOf(garbageWords(`an event of ${item.oversized} characters is larger than the message limit`));
        }
        if (!response.complete) throw new Error("the event stream ended before it was complete");
      })(),
    };
  }

  async enqueue(message: AgentMessage, signal: AbortSignal): Promise<Delivery> {
    const reply = await callProgram(this.port(), "POST", "/enqueue", JSON.stringify({ key: message.key, content: message.content }), signal);
    if ("unreachable" in reply) return { type: "failed", error: unreachableWords(KIND, reply.unreachable) };
    const status = reply.response.statusCode ?? 0;
    let body: Buffer;
    try {
      body = await readBody(reply.response, this.limit);
    } catch (problem) {
      return { type: "failed", error: unreachableWords(KIND, `the fate could not be read: ${messageOf(problem)}`) };
    }
    if (status >= 400 && status < 500) return { type: "refused", error: programWords(KIND, status, body) };
    if (!isSuccess(status)) return { type: "failed", error: programWords(KIND, status, body) };
    try {
      return { type: decodeProgramEnqueueFateBody(body).fate.type };
    } catch (problem) {
      if (!(problem instanceof ProgramEnqueueFateError)) throw problem;
      return { type: "failed", error: garbageWords(problem.message) };
    }
  }

  async dequeue(key: string, signal: AbortSignal): Promise<ProgramDequeue> {
    const reply = await callProgram(this.port(), "POST", "/dequeue", JSON.stringify({ key }), signal);
    if ("unreachable" in reply) return { type: "failed", error: unreachableWords(KIND, reply.unreachable) };
    const status = reply.response.statusCode ?? 0;
    let body: Buffer;
    try {
      body = await readBody(reply.response, this.limit);
    } catch (problem) {
      return { type: "failed", error: unreachableWords(KIND, `the outcome could not be read: ${messageOf(problem)}`) };
    }
    if (!isSuccess(status)) return { type: "failed", error: programWords(KIND, status, body) };
    try {
      return { type: decodeProgramDequeueOutcomeBody(body).outcome.type };
    } catch (problem) {
      if (!(problem instanceof ProgramDequeueOutcomeError)) throw problem;
      return { type: "failed", error: garbageWords(problem.message) };
    }
  }
}

export function isEventStream(contentType: string | undefined): boolean {
  return (contentType ?? "").split(";")[0]!.trim().toLowerCase() === "text/event-stream";
}

const messageOf = (problem: unknown) => (problem instanceof Error ? problem.message : String(problem));
