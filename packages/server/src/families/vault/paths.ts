// The vault on the paths transport's program side: the HTTP API the program inside the container
// calls on the program port beside `/mcp` (loopback only), each request one vault ask (kinds 5-9, or
// proxy-opened tags 2-6 on the begin scope). It is a contract (issue 15 §3): tests outside this
// repository drive it.
//
//   GET /vault/<key>                    200 value · 404 no value · 502 provider's message · 503 not served or lost
//   PUT /vault/<key>  (body = value)    204 done · 502 · 503 · 400 cannot be asked
//   DELETE /vault/<key>                 204 · 502 · 503 · 400
//   POST /vault/<key>/lock?ttl=<s>      204 once held · 502 · 503 · 400
//   POST /vault/<key>/unlock            204 · 502 · 503 · 400
//
// `<key>` is one percent-encoded path segment of UTF-8. The asks go through the generated typed
// asks; which transport carries them is the engine's business.
import type { IncomingMessage, ServerResponse } from "node:http";
import type { RequestRoute } from "../../listener.js";
import type { AskOutcome } from "../../exchanges/engine.js";
import type { ProxyAsks } from "../../gen/exchanges.js";
import { drain, failed, InFlight, readBody, reply } from "../../paths/program-http.js";

/** The longest key a vault set can carry: its length is a u16. */
const MAX_SET_KEY_BYTES = 0xffff;

export class VaultApi {
  private readonly inFlight = new InFlight();

  constructor(
    private readonly asks: ProxyAsks,
    /** The largest body the API reads: one message of the wire, less the ask's header. */
    private readonly maxBodyBytes: number,
  ) {}

  /** Gives up every exchange still waiting; their programs get 503. */
  close(): void {
    this.inFlight.abortAll();
  }

  readonly route: RequestRoute = (request, response, pathname) => {
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
    const controller = this.inFlight.track(request, response);
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
      this.inFlight.done(controller);
    }
  }
}
