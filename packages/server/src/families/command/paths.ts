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
/** The most bytes of lines gathered for one write to the program. */
const COMMAND_LINES_WRITE_BYTES = 64 * 1024;

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
      // The lines of one turn (those one read of the answer path brought) leave in one write: they
      // are gathered into one string, written once the turn's I/O is done or as soon as they reach
      // COMMAND_LINES_WRITE_BYTES. A write per line costs the response four pieces of its socket's
      // writev (chunked encoding's size, CRLF, the line, CRLF); a write per turn, four per turn.
      // When a write finds the response full, the next line waits until the program has drained it,
      // so what the proxy holds stays bounded and the answer path stops being read (bench case 5).
      let lines = "";
      let writeScheduled = false;
      const writeLines = () => {
        if (lines.length === 0) return;
        response.write(lines);
        lines = "";
      };
      const endOfTurn = () => {
        writeScheduled = false;
        writeLines();
      };
      for await (const message of stream) {
        if (message.variant === "Item") {
          // Full since the last write: the program reads first.
          if (response.writableNeedDrain) await drained(response);
          if (controller.signal.aborted) break;
          // Base64 needs no JSON escaping: the line is built as it is, from a view of the item (no copy).
          const item = message.item;
          lines += `{"item":"${Buffer.from(item.buffer, item.byteOffset, item.byteLength).toString("base64")}"}\n`;
          if (lines.length >= COMMAND_LINES_WRITE_BYTES) writeLines();
          else if (!writeScheduled) {
            writeScheduled = true;
            setImmediate(endOfTurn);
          }
        } else {
          // The error is the last message: it is the end.
          ended = true;
          writeLines();
          response.write(`${JSON.stringify({ end: "error", error: message.error })}\n`);
        }
      }
      writeLines();
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
