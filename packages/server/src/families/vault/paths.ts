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
// `<key>` is one percent-encoded path segment of UTF-8: the key is exactly its percent-decoded bytes,
// read from the raw request target (no URL normalisation: `.`, `..`, `%2E` and `\\` are keys like any). The asks go through the generated typed
// asks; which transport carries them is the engine's business.
import type { IncomingMessage, ServerResponse } from "node:http";
import type { RequestRoute } from "../../listener.js";
import type { AskOutcome } from "../../exchanges/engine.js";
import type { ProxyAsks } from "../../gen/exchanges.js";
import { drain, failed, InFlight, readBody, reply } from "../../paths/program-http.js";

/** A container's locks of one key, as its programs have them: grants not yet unlocked (each with its expiry), asks waiting, a departed waiter's release owed. */
interface LiveLocks {
  held: { seq: number; until: number }[];
  waiting: number;
  release: boolean;
}

/** The longest key a vault set can carry: its length is a u16. */
const MAX_SET_KEY_BYTES = 0xffff;

export class VaultApi {
  private readonly inFlight = new InFlight();
  /**
   * By key, the grants handed to programs (answered 204) and not yet seen unlocked, and the lock asks
   * of programs still waiting. The holder is the container: an unlock on behalf of a program that left
   * ends every program's hold of the key, so it is sent only when no program holds or awaits it.
   */
  private readonly live = new Map<string, LiveLocks>();
  private grants = 0;
  /**
   * By key, the release of a departed waiter's grant, until the provider answers it. A lock of that
   * key is asked only after: asked before, it could be granted at once as the container's re-lock and
   * then ended by the release, so a program would be told it holds a lock nobody holds.
   */
  private readonly releasing = new Map<string, Promise<void>>();

  private entry(key: string): LiveLocks {
    let entry = this.live.get(key);
    if (!entry) this.live.set(key, (entry = { held: [], waiting: 0, release: false }));
    // A grant whose time has run out is held no more.
    const now = Date.now();
    entry.held = entry.held.filter((grant) => grant.until > now);
    return entry;
  }

  /** Releases `key` for a program that left, once no program holds or awaits it; until then it waits. */
  private releaseDeparted(key: string, asked = true): void {
    const entry = this.entry(key);
    if (asked) entry.release = true;
    if (entry.held.length > 0 || entry.waiting > 0) return;
    this.live.delete(key);
    if (!entry.release) return;
    const released: Promise<void> = this.asks.vaultUnlock({ key }).then(
      () => {
        if (this.releasing.get(key) === released) this.releasing.delete(key);
      },
      () => {
        if (this.releasing.get(key) === released) this.releasing.delete(key);
      },
    );
    this.releasing.set(key, released);
  }

  constructor(
    private readonly asks: ProxyAsks,
    /** The largest body the API reads: one message of the wire, less the ask's header. */
    private readonly maxBodyBytes: number,
  ) {}

  /** Gives up every exchange still waiting; their programs get 503. */
  close(): void {
    this.inFlight.abortAll();
  }

  readonly route: RequestRoute = (request, response) => {
    // The raw request target, not the normalised pathname: `/vault/%2E` is the key ".", and
    // `/vault/..` the key "..", never the segment URL normalisation would make of them.
    const target = rawTarget(request.url ?? "");
    const match = /^\/vault\/([^/]*)(\/lock|\/unlock)?$/.exec(target.path);
    if (!match) return false;
    const key = decodeKey(match[1]!);
    if (key === undefined) return drain(request), reply(response, 400, "the key is not a percent-encoded UTF-8 segment\n"), true;
    void this.vault(request, response, key, match[2], new URLSearchParams(target.query).get("ttl"));
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
        // A lock of zero seconds is refused by the lock's semantics (paths.md §7.2): refused here, before asking.
        if (ttlText === null || !/^[0-9]{1,10}$/.test(ttlText) || Number(ttlText) < 1 || Number(ttlText) > 0xffffffff) return reply(response, 400, "ttl must be a number of seconds from 1 to 4294967295\n");
        const entry = this.entry(key);
        entry.waiting++;
        let waiting = true;
        const stopWaiting = () => {
          if (!waiting) return;
          waiting = false;
          this.entry(key).waiting--;
        };
        // A program that leaves while waiting no longer awaits the key.
        controller.signal.addEventListener("abort", () => (stopWaiting(), this.releaseDeparted(key, false)), { once: true });
        if (this.releasing.has(key)) {
          // The wait ends with the program too: a release the provider is slow to answer holds no one who left.
          const gone = new Promise<void>((resolve) => controller.signal.addEventListener("abort", () => resolve(), { once: true }));
          for (let release = this.releasing.get(key); release && !controller.signal.aborted; release = this.releasing.get(key)) await Promise.race([release, gone]);
        }
        if (controller.signal.aborted) return; // Gone while a release was answered: nothing was asked.
        try {
          outcome = await this.asks.vaultLock(
            { key, ttl: Number(ttlText) },
            {
              signal: controller.signal,
              // Granted after its program left (a begin-scope channel cannot be withdrawn): released at
              // once, so nobody holds it for its TTL, unless a live program of this container holds or
              // awaits the key. On `/requests` the closed path withdraws the ask instead.
              answeredAfterAbort: (answer) => {
                if ((answer as { variant?: string }).variant === "Done") this.releaseDeparted(key);
              },
            },
          );
        } finally {
          stopWaiting();
        }
        if (outcome.type === "answered" && outcome.answer.variant === "Done" && !programGone(response)) this.entry(key).held.push({ seq: ++this.grants, until: Date.now() + Number(ttlText) * 1000 });
        else this.releaseDeparted(key, false);
      } else if (action === "/unlock" && method === "POST") {
        drain(request);
        const before = this.grants;
        outcome = await this.asks.vaultUnlock({ key }, { signal: controller.signal });
        // Answered (done, or not held): the container's hold is gone, a departed waiter's with it;
        // grants made since are kept.
        if (outcome.type === "answered") {
          const entry = this.entry(key);
          entry.held = entry.held.filter((grant) => grant.seq > before);
          entry.release = false;
          this.releaseDeparted(key, false);
        }
      } else {
        drain(request);
        return reply(response, 405, "method not allowed\n");
      }
      if (outcome.type !== "answered") return failed(response, outcome);
      if (outcome.answer.variant === "Done" && action === "/lock" && programGone(response)) {
        // Granted as its program left: nobody is told, so nobody keeps it (unless a live program holds or awaits it).
        this.releaseDeparted(key);
        return;
      }
      if (outcome.answer.variant === "Done") return void response.writeHead(204).end();
      return reply(response, 502, outcome.answer.message);
    } finally {
      this.inFlight.done(controller);
    }
  }
}

/** The path and query of a request target as sent: origin-form, or absolute-form with its scheme and authority dropped. */
function rawTarget(url: string): { path: string; query: string } {
  const origin = /^[A-Za-z][A-Za-z0-9+.-]*:\/\/[^/?#]*/.exec(url);
  const rest = origin ? url.slice(origin[0].length) || "/" : url;
  const hash = rest.indexOf("#");
  const withoutHash = hash < 0 ? rest : rest.slice(0, hash);
  const question = withoutHash.indexOf("?");
  return question < 0 ? { path: withoutHash, query: "" } : { path: withoutHash.slice(0, question), query: withoutHash.slice(question + 1) };
}

const utf8 = new TextDecoder("utf-8", { fatal: true, ignoreBOM: true });

/** The key: exactly the percent-decoded bytes of the raw segment, as UTF-8; undefined when they are not UTF-8 or a `%` is not an escape. */
function decodeKey(segment: string): string | undefined {
  const bytes: number[] = [];
  for (let i = 0; i < segment.length; i++) {
    const code = segment.charCodeAt(i);
    if (code === 0x25) {
      const hex = segment.slice(i + 1, i + 3);
      if (!/^[0-9A-Fa-f]{2}$/.test(hex)) return undefined;
      bytes.push(parseInt(hex, 16));
      i += 2;
    } else if (code > 0xff) return undefined;
    // Node hands the target over byte for byte (latin1): a raw byte is itself.
    else bytes.push(code);
  }
  try {
    return utf8.decode(new Uint8Array(bytes));
  } catch {
    return undefined;
  }
}

/** Whether the program's connection has gone, so an answer written now would reach nobody. */
function programGone(response: ServerResponse): boolean {
  const socket = response.socket;
  return response.destroyed || !socket || socket.destroyed || !socket.writable;
}
