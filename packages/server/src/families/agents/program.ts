// The proxy's HTTP calls to the agent program on loopback (agents.md §8): `POST /register`, `/run`,
// `/enqueue`, `/dequeue`, `GET /schema`. Plain node:http, so that nothing here times out (fetch's
// client gives up on headers and bodies after five minutes; an `/enqueue` is held until its fate and
// a `/run` stream lasts the loop): every call ends when its signal aborts, and only then or when the
// program answers.
import { request as httpRequest, type IncomingMessage } from "node:http";

/** The program answered (any status), or could not be reached (`reason`). */
export type ProgramReply = { readonly response: IncomingMessage } | { readonly unreachable: string };

/** Which word the error values carry: the multiplexed proxy says `program`, the paths proxy `agent` (agents.md §6.5, §9). */
export type ErrorKind = "program" | "agent";

/**
 * One call to the program at `127.0.0.1:<port><path>`. Resolves once the status line and headers are
 * in; the body is the caller's to read. `signal` destroys the request (and its response) at once.
 */
export function callProgram(port: number, method: "GET" | "POST", path: string, body: Uint8Array | string | undefined, signal: AbortSignal): Promise<ProgramReply> {
  return new Promise((resolve) => {
    if (signal.aborted) return resolve({ unreachable: "the call was abandoned" });
    const payload = body === undefined ? undefined : typeof body === "string" ? Buffer.from(body) : Buffer.from(body.buffer, body.byteOffset, body.byteLength);
    const request = httpRequest({
      host: "127.0.0.1",
      port,
      method,
      path,
      // A socket of its own per call: an abandoned call takes nothing with it.
      agent: false,
      headers: payload ? { "content-type": "application/json", "content-length": payload.length } : {},
    });
    let settled = false;
    const onAbort = () => {
      request.destroy();
      finish({ unreachable: "the call was abandoned" });
    };
    const finish = (reply: ProgramReply) => {
      if (settled) return;
      settled = true;
      resolve(reply);
    };
    signal.addEventListener("abort", onAbort, { once: true });
    request.once("response", (response) => {
      // The response lives on after this promise: an abort still destroys it.
      response.once("close", () => signal.removeEventListener("abort", onAbort));
      response.on("error", () => {});
      finish({ response });
    });
    request.once("error", (error) => {
      signal.removeEventListener("abort", onAbort);
      finish({ unreachable: describe(error) });
    });
    request.end(payload);
  });
}

/** The whole body (at most `limit` bytes); rejects when the body died or was larger. */
export async function readBody(response: IncomingMessage, limit: number): Promise<Buffer> {
  const parts: Buffer[] = [];
  let size = 0;
  for await (const part of response as AsyncIterable<Buffer>) {
    size += part.length;
    if (size > limit) {
      response.destroy();
      throw new Error(`the body is larger than ${limit} bytes`);
    }
    parts.push(part);
  }
  // An abrupt end of the program's connection ends the iteration without an error on some Node versions.
  if (!response.complete) throw new Error("the body ended before it was complete");
  return Buffer.concat(parts);
}

/** Whether a status is a 2xx. */
export const isSuccess = (status: number | undefined): boolean => status !== undefined && status >= 200 && status < 300;

/** The program's own words as the error value: a JSON body verbatim, else `{"kind", "status", "error": <text>}` (agents.md §6.5). */
export function programWords(kind: ErrorKind, status: number, body: Buffer): unknown {
  const text = body.toString("utf8");
  try {
    return JSON.parse(text);
  } catch {
    return { kind, status, error: text };
  }
}

/** The error value of a program that could not be reached, or whose answer could not be read. */
export const unreachableWords = (kind: ErrorKind, reason: string): unknown => ({ kind, error: reason });

/** The error value of a body that does not decode (`program-program.yaml`): `{"kind":"agent","error":<the decoder's message>}`. */
export const garbageWords = (message: string): unknown => ({ kind: "agent", error: message });

function describe(error: unknown): string {
  const code = (error as { code?: string }).code;
  return code ? `the program could not be reached: ${code}` : error instanceof Error ? error.message : String(error);
}
