// The vault and command HTTP API the program inside the container calls, on the program port beside
// `/mcp` (loopback only). It is a contract (issue 15 §3–§4): tests outside this repository drive it.
//
//   GET /vault/<key>                    200 value · 404 no value · 502 provider's message · 503 not served or lost
//   PUT /vault/<key>  (body = value)    204 done · 502 · 503 · 400 cannot be asked
//   DELETE /vault/<key>                 204 · 502 · 503 · 400
//   POST /vault/<key>/lock?ttl=<s>      204 once held · 502 · 503 · 400
//   POST /vault/<key>/unlock            204 · 502 · 503 · 400
//   POST /command (body = the command)  200 application/x-ndjson: {"item":"<base64>"} per item, then
//                                       exactly one of {"end":"done"} · {"end":"error","error":…} ·
//                                       {"end":"notServed"} · {"end":"lost"}
//
// `<key>` is one percent-encoded path segment of UTF-8. The asks go through the generated typed
// asks; which transport carries them is the engine's business.
import type { IncomingMessage, ServerResponse } from "node:http";
import type { RequestRoute } from "../../listener.js";
import type { AskOutcome } from "../../exchanges/engine.js";
import type { ProxyAsks } from "../../gen/exchanges.js";

/** The longest key a vault set can carry: its length is a u16. */
const MAX_SET_KEY_BYTES = 0xffff;

export class ProgramApi {
  private readonly inFlight = new Set<AbortController>();

  constructor(
    private readonly asks: ProxyAsks,
    /** The largest body the API reads: one message of the wire, less the ask's header. */
    private readonly maxBodyBytes: number,
    private readonly log: (line: string) => void = () => {},
  ) {}

  /** Gives up every exchange still waiting; their programs get 503 (vault) or `lost` (command). */
  close(): void {
    for (const controller of [...this.inFlight]) controller.abort();
  }

  readonly route: RequestRoute = (request, response, pathname) => {
    if (pathname === "/command") {
      if (request.method !== "POST") return reply(response, 405, "use POST\n"), true;
      void this.command(request, response);
      return true;
    }
    const match = /^\/vault\/([^/]*)(\/lock|\/unlock)?$/.exec(pathname);
    if (!match) return false;
    let key: string;
    try {
      key = decodeURIComponent(match[1]!);
    } catch {
      return reply(response, 400, "the key is not a percent-encoded UTF-8 segment\n"), true;
    }
    const action = match[2];
    void this.vault(request, response, key, action, new URL(request.url ?? "/", "http://program").searchParams.get("ttl"));
    return true;
  };

  private async vault(request: IncomingMessage, response: ServerResponse, key: string, action: string | undefined, ttlText: string | null): Promise<void> {
    const method = request.method;
    const controller = this.track(request, response);
    try {
      if (action === undefined && method === "GET") {
        drain(request);
        const outcome = await this.asks.vaultGet({ key }, { signal: controller.signal });
        if (outcome.type !== "answered") return failed(response, outcome);
        const answer = outcome.answer;
        if (answer.variant === "Present") return void response.writeHead(200, { "content-type": "application/octet-stream", "content-length": answer.value.length }).end(Buffer.from(answer.value));
        if (answer.variant === "Missing") return reply(response, 404, "no value under the key\n");
        return reply(response, 502, answer.message);
      }
      let outcome: AskOutcome<{ variant: "Done" } | { variant: "Error"; message: string }>;
      if (action === undefined && method === "PUT") {
        if (Buffer.byteLength(key) > MAX_SET_KEY_BYTES) return drain(request), reply(response, 400, `the key is more than ${MAX_SET_KEY_BYTES} bytes\n`);
        const value = await readBody(request, this.maxBodyBytes);
        if (!value) return reply(response, 400, `the value is larger than ${this.maxBodyBytes} bytes\n`);
        outcome = await this.asks.vaultSet({ key, value }, { signal: controller.signal });
      } else if (action === undefined && method === "DELETE") {
        drain(request);
        outcome = await this.asks.vaultDelete({ key }, { signal: controller.signal });
      } else if (action === "/lock" && method === "POST") {
        drain(request);
        if (ttlText === null || !/^[0-9]{1,10}$/.test(ttlText) || Number(ttlText) > 0xffffffff) return reply(response, 400, "ttl must be a number of seconds from 0 to 4294967295\n");
        outcome = await this.asks.vaultLock({ key, ttl: Number(ttlText) }, { signal: controller.signal });
      } else if (action === "/unlock" && method === "POST") {
        drain(request);
        outcome = await this.asks.vaultUnlock({ key }, { signal: controller.signal });
      } else {
        drain(request);
        return reply(response, 405, "method not allowed\n");
      }
      if (outcome.type !== "answered") return failed(response, outcome);
      if (outcome.answer.variant === "Done") return void response.writeHead(204).end();
      return reply(response, 502, outcome.answer.message);
    } finally {
      this.inFlight.delete(controller);
    }
  }

  private async command(request: IncomingMessage, response: ServerResponse): Promise<void> {
    const controller = this.track(request, response);
    try {
      const command = await readBody(request, this.maxBodyBytes);
      if (!command) return reply(response, 400, `the command is larger than ${this.maxBodyBytes} bytes\n`);
      const stream = this.asks.command({ command }, { signal: controller.signal });
      response.writeHead(200, { "content-type": "application/x-ndjson", "cache-control": "no-store" });
      let ended = false;
      for await (const message of stream) {
        if (message.variant === "Item") response.write(`${JSON.stringify({ item: Buffer.from(message.item).toString("base64") })}\n`);
        else {
          // The error is the last message: it is the end.
          ended = true;
          response.write(`${JSON.stringify({ end: "error", error: message.error })}\n`);
        }
      }
      if (!ended) {
        const ending = await stream.ended;
        const end = ending.type === "done" ? "done" : ending.type === "notServed" ? "notServed" : "lost";
        // Outcome unknown: the program reads lost; the proxy's log says why, with the decoder's exact text.
        if (ending.type !== "done" && ending.type !== "notServed") this.log(`/command ended ${ending.type}${ending.type === "unreadable" ? `: ${ending.error.message}` : ending.type === "answerTooLarge" ? `: an answer over ${ending.limit} bytes` : ""}`);
        response.write(`${JSON.stringify({ end })}\n`);
      }
      response.end();
    } finally {
      this.inFlight.delete(controller);
    }
  }

  /** One controller per request: a program that goes away gives its exchange up. */
  private track(request: IncomingMessage, response: ServerResponse): AbortController {
    const controller = new AbortController();
    this.inFlight.add(controller);
    response.once("close", () => {
      if (!response.writableFinished) controller.abort();
    });
    request.once("error", () => controller.abort());
    return controller;
  }
}

/** Not answered with a value: not served or lost is 503, an answer that could not be read 502, an ask too large to send 400. */
function failed(response: ServerResponse, outcome: Exclude<AskOutcome<unknown>, { type: "answered" }>): void {
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

function reply(response: ServerResponse, status: number, text: string): void {
  if (response.headersSent) return void response.end();
  response.writeHead(status, { "content-type": "text/plain; charset=utf-8" }).end(text);
}

/** The whole body, or undefined once it passes `limit` bytes (the rest is discarded unread). */
function readBody(request: IncomingMessage, limit: number): Promise<Uint8Array | undefined> {
  return new Promise((resolve) => {
    const chunks: Buffer[] = [];
    let size = 0;
    let over = false;
    request.on("data", (chunk: Buffer) => {
      if (over) return;
      size += chunk.length;
      if (size > limit) {
        over = true;
        chunks.length = 0;
        return;
      }
      chunks.push(chunk);
    });
    request.once("end", () => resolve(over ? undefined : new Uint8Array(Buffer.concat(chunks))));
    request.once("error", () => resolve(undefined));
  });
}

function drain(request: IncomingMessage): void {
  request.resume();
}
