// The command family on the paths transport's program side: `POST /command` on the program port
// beside `/mcp` (loopback only), one command ask (kind 10) streamed back. It is a contract (issue 15
// §4): tests outside this repository drive it.
//
//   POST /command (body = the command)  200 application/x-ndjson: {"item":"<base64>"} per item, then
//                                       exactly one of {"end":"done"} · {"end":"error","error":…} ·
//                                       {"end":"notServed"} · {"end":"lost"}
//
// The items are taken from the provider only as fast as the program reads them (see `pauseAtBytes`).
//
// The ask goes through the generated typed asks; which transport carries it is the engine's business.
import { logEvent, type Say } from "@diverge/multiplexer/log";
import type { IncomingMessage, ServerResponse } from "node:http";
import type { RequestRoute } from "../../listener.js";
import type { ProxyAsks } from "../../gen/exchanges.js";
import { drained, InFlight, readBody, reply } from "../../paths/program-http.js";

/** Bytes of a command's items the proxy holds for a program that does not read before it stops reading the answer path. */
export const COMMAND_PAUSE_AT_BYTES = 1024 * 1024;

export class CommandApi {
  private readonly inFlight = new InFlight();

  constructor(
    private readonly asks: ProxyAsks,
    /** The largest body the API reads: one message of the wire, less the ask's header. */
    private readonly maxBodyBytes: number,
    private readonly log: Say = () => {},
  ) {}

  /** Gives up every exchange still waiting; their programs read `lost`. */
  close(): void {
    this.inFlight.abortAll();
  }

  readonly route: RequestRoute = (request, response, pathname) => {
    if (pathname !== "/command") return false;
    if (request.method !== "POST") return reply(response, 405, "use POST\n"), true;
    void this.command(request, response);
    return true;
  };

  private async command(request: IncomingMessage, response: ServerResponse): Promise<void> {
    const controller = this.inFlight.track(request, response);
    try {
      const command = await readBody(request, this.maxBodyBytes);
      if (!command) return reply(response, 400, `the command is larger than ${this.maxBodyBytes} bytes\n`);
      // Backpressure end to end: the next item is taken only once the program's response has drained,
      // and what waits for it is bounded, so the answer path stops being read and the provider waits.
      const stream = this.asks.command({ command }, { signal: controller.signal, pauseAtBytes: COMMAND_PAUSE_AT_BYTES });
      response.writeHead(200, { "content-type": "application/x-ndjson", "cache-control": "no-store" });
      let ended = false;
      // The items of one turn (those one read of the answer path brought) leave in one write: the
      // response is corked at the first and uncorked once the turn's I/O is done, or as soon as it is
      // full. A wait for "drain" while corked would last until that uncork, a turn later: the program
      // would be sent one high-water mark (16 KiB) a turn while a turn's reads of the answer path
      // bring 64 KiB each, so the items would sit at `COMMAND_PAUSE_AT_BYTES` even for a program that
      // reads at once, each held long enough to reach V8's old space (the proxy's peak RSS grew
      // ~100 MB over a 256 MB answer: bench case 5).
      let corked = false;
      let uncorkScheduled = false;
      const uncork = () => {
        if (!corked) return;
        corked = false;
        response.uncork();
      };
      const endOfTurn = () => {
        uncorkScheduled = false;
        uncork();
      };
      for await (const message of stream) {
        if (message.variant === "Item") {
          if (!corked) {
            corked = true;
            response.cork();
            if (!uncorkScheduled) {
              uncorkScheduled = true;
              setImmediate(endOfTurn);
            }
          }
          // Base64 needs no JSON escaping: the line is written as it is, from a view of the item (no copy).
          const item = message.item;
          const line = `{"item":"${Buffer.from(item.buffer, item.byteOffset, item.byteLength).toString("base64")}"}\n`;
          if (!response.write(line)) {
            // Full: what is corked goes to the program now, and the next item waits only for the program.
            uncork();
            await drained(response);
          }
          if (controller.signal.aborted) break;
        } else {
          // The error is the last message: it is the end.
          ended = true;
          response.write(`${JSON.stringify({ end: "error", error: message.error })}\n`);
        }
      }
      if (!ended) {
        const ending = await stream.ended;
        const end = ending.type === "done" ? "done" : ending.type === "notServed" ? "notServed" : "lost";
        // Outcome unknown: the program reads lost; the proxy's log says why, with the decoder's exact text.
        if (ending.type !== "done" && ending.type !== "notServed") this.log(...logEvent(`/command ended ${ending.type}${ending.type === "unreadable" ? ": {error}" : ending.type === "answerTooLarge" ? `: an answer over ${ending.limit} bytes` : ""}`, ending.type === "unreadable" ? { error: ending.error.message } : {}));
        response.write(`${JSON.stringify({ end })}\n`);
      }
      response.end();
    } finally {
      this.inFlight.done(controller);
    }
  }
}
