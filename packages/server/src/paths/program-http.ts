// The program port's HTTP plumbing for the APIs that turn a program's request into an ask (the vault's
// and the command's, beside `/mcp`): each request's exchange is given up when the program goes away
// or the proxy closes, and an outcome that is not an answer has one status.
import type { IncomingMessage, ServerResponse } from "node:http";
import type { AskOutcome } from "../exchanges/engine.js";

/** The exchanges of one API still waiting: each is given up when its program goes away, or all at once. */
export class InFlight {
  private readonly controllers = new Set<AbortController>();

  /** One controller per request: a program that goes away gives its exchange up. */
  track(request: IncomingMessage, response: ServerResponse): AbortController {
    const controller = new AbortController();
    this.controllers.add(controller);
    response.once("close", () => {
      if (!response.writableFinished) controller.abort();
    });
    request.once("error", () => controller.abort());
    return controller;
  }

  done(controller: AbortController): void {
    this.controllers.delete(controller);
  }

  /** Gives up every exchange still waiting. */
  abortAll(): void {
    for (const controller of [...this.controllers]) controller.abort();
  }
}

/** Not answered with a value: not served or lost is 503, an answer that could not be read 502, an ask too large to send 400. */
export function failed(response: ServerResponse, outcome: Exclude<AskOutcome<unknown>, { type: "answered" }>): void {
  switch (outcome.type) {
    case "notServed":
      return reply(response, 503, "the provider did not serve the ask\n");
    case "lost":
      return reply(response, 503, "the exchange was lost; it is not asked again\n");
    case "aborted":
      return reply(response, 503, "the proxy is closing\n");
    case "unreadable":
      return reply(response, 502, `the provider's answer could not be read: ${outcome.error.message}\n`);
    case "answerTooLarge":
      return reply(response, 502, `the provider's answer is larger than ${outcome.limit} bytes\n`);
    case "askTooLarge":
      return reply(response, 400, `the ask is ${outcome.bytes} bytes, more than one message may carry (${outcome.limit})\n`);
  }
}

export function reply(response: ServerResponse, status: number, text: string): void {
  if (response.headersSent) return void response.end();
  response.writeHead(status, { "content-type": "text/plain; charset=utf-8", ...closeUnlessRead(response) }).end(text);
}

/** `connection: close` when the request's body was not read to its end (it is not read on to find a next request). */
export function closeUnlessRead(response: ServerResponse): { connection?: string } {
  return response.req?.complete === false ? { connection: "close" } : {};
}

/**
 * The whole body, or undefined once it passes `limit` bytes: at once for a Content-Length over it
 * (nothing read), else as soon as it passes it; nothing more is read (answer with `reply`, which
 * closes the connection after a body left unread).
 */
export function readBody(request: IncomingMessage, limit: number): Promise<Uint8Array | undefined> {
  return new Promise((resolve) => {
    const declared = Number(request.headers["content-length"]);
    if (Number.isFinite(declared) && declared > limit) return resolve(undefined);
    const chunks: Buffer[] = [];
    let size = 0;
    const done = (value: Uint8Array | undefined) => {
      request.off("data", onData);
      request.pause();
      resolve(value);
    };
    const onData = (chunk: Buffer) => {
      size += chunk.length;
      if (size > limit) return done(undefined);
      chunks.push(chunk);
    };
    request.on("data", onData);
    request.once("end", () => done(new Uint8Array(Buffer.concat(chunks))));
    request.once("error", () => done(undefined));
  });
}

/** Resolves once `response` has drained what it holds, or has closed (the program went away). */
export function drained(response: ServerResponse): Promise<void> {
  return new Promise((resolve) => {
    if (response.destroyed || response.writableEnded) return resolve();
    const done = () => {
      response.off("drain", done);
      response.off("close", done);
      resolve();
    };
    response.on("drain", done);
    response.on("close", done);
  });
}

export function drain(request: IncomingMessage): void {
  request.resume();
}
