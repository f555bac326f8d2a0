// The generic engine of the paths the provider opens (`/tool/*`, …): the generated surface
// (src/gen/exchanges.ts, `bindProviderPaths`) hands it one handler per path with the path's
// descriptor; it reads the one request message, runs the handler and sends the answer messages as
// the descriptor says. Nothing here names a path or a kind; the descriptors do.
import { logEvent, type Say } from "@diverge/multiplexer/log";
import type { OpenedPathDescriptor } from "@diverge/codec/exchanges";
import { checkMcp, loadMcpChecks } from "../mcp-checks.js";
import type { WebSocket } from "ws";
import type { UpgradeDecision, UpgradeRoute } from "../listener.js";

/** The request a handler answers: decoded, or why its bytes did not decode. */
export type PathRequest<R> = { readonly ok: true; readonly value: R } | { readonly ok: false; readonly reason: string };

export interface PathContext {
  /** The path, e.g. `/tool/call-tool`. */
  readonly path: string;
  /** Aborted when the path has ended, whoever ended it. */
  readonly signal: AbortSignal;
  /** The largest message the provider takes, in bytes. */
  readonly maxMessageBytes: number;
  /** The size of an answer once encoded, in bytes (so a handler can replace one too large with an error). */
  encodedSize(answer: unknown): number;
}

/** One path and its handler, from the generated `bindProviderPaths`. */
export interface BoundPath {
  readonly descriptor: OpenedPathDescriptor<any, any> | OpenedPathDescriptor<never, any>;
  readonly one?: (request: PathRequest<any>, context: PathContext) => Promise<unknown>;
  /** `request` is undefined for a path on which the provider sends nothing. */
  readonly stream?: (request: PathRequest<any> | undefined, context: PathContext) => AsyncIterable<unknown>;
}

export interface PathsEngineOptions {
  readonly maxMessageBytes: number;
  /** Bytes that may wait in a streamed path's send buffer; beyond it that path's messages are dropped (counted in `dropped`). */
  readonly maxStreamBacklogBytes: number;
  readonly log: Say;
}

/** Serves every bound path on the provider-facing listener; any number of openings of each. */
export class PathsEngine implements UpgradeRoute {
  private readonly byPath = new Map<string, BoundPath>();
  private readonly open = new Set<WebSocket>();
  private closed = false;
  /** Stream messages dropped because a provider did not read, or larger than the message limit. */
  dropped = 0;

  constructor(
    bound: readonly BoundPath[],
    private readonly options: PathsEngineOptions,
  ) {
    for (const entry of bound) this.byPath.set(entry.descriptor.path, entry);
  }

  decide(pathname: string): UpgradeDecision {
    const entry = this.byPath.get(pathname);
    if (!entry) return undefined;
    if (this.closed) return { refuse: 404 };
    // The request and answer checks are loaded (on first use) before the upgrade completes.
    return { accept: (socket) => this.serve(entry, socket), prepare: () => loadMcpChecks() };
  }

  /** Paths open now. */
  get openPaths(): number {
    return this.open.size;
  }

  /** Ends every open path (the proxy is ending): each provider sees its path end abruptly. */
  close(): void {
    this.closed = true;
    for (const socket of this.open) socket.terminate();
    this.open.clear();
  }

  private serve(entry: BoundPath, socket: WebSocket): void {
    const { descriptor } = entry;
    const path = descriptor.path;
    const controller = new AbortController();
    this.open.add(socket);
    socket.on("error", () => {});
    socket.on("close", () => {
      this.open.delete(socket);
      controller.abort();
    });
    const context: PathContext = {
      path,
      signal: controller.signal,
      maxMessageBytes: this.options.maxMessageBytes,
      encodedSize: (answer) => descriptor.answer!.encode(answer).length,
    };
    const send = (value: unknown, streamed = false): boolean => {
      if (socket.readyState !== socket.OPEN) return false;
      if (streamed && socket.bufferedAmount > this.options.maxStreamBacklogBytes) {
        this.dropped++;
        return false;
      }
      const bytes = descriptor.answer!.encode(value);
      if (bytes.length > this.options.maxMessageBytes) {
        this.dropped++;
        this.options.log(`${path}: an answer of ${bytes.length} bytes is larger than the message limit; not sent`);
        return false;
      }
      socket.send(bytes);
      return true;
    };
    const fail = (problem: unknown) => {
      this.options.log(...logEvent("{path}: {error}", { path, error: problem instanceof Error ? problem.message : String(problem) }));
      // A handler that fails leaves nothing to say: the path ends abruptly, which the provider reads as a failed exchange.
      socket.terminate();
    };

    const answer = (request: PathRequest<unknown> | undefined) => {
      if (entry.stream) {
        const stream = entry.stream;
        void (async () => {
          for await (const value of stream(request, context)) {
            if (controller.signal.aborted) return;
            send(value, true);
          }
          // The stream's own end (its last message sent): the proxy closes.
          if (!controller.signal.aborted) socket.close(1000);
        })().catch(fail);
        return;
      }
      void entry.one!(request!, context).then((value) => {
        if (controller.signal.aborted) return;
        send(value);
        socket.close(1000);
      }, fail);
    };
    if (descriptor.request.messages !== "one") return answer(undefined);
    let asked = false;
    socket.on("message", (data, isBinary) => {
      // Text messages carry nothing on any path; a second binary message is ignored.
      if (!isBinary || asked) return;
      asked = true;
      const bytes = Buffer.isBuffer(data) ? data : Buffer.concat(Array.isArray(data) ? data : [Buffer.from(data)]);
      let request: PathRequest<unknown>;
      try {
        request = { ok: true, value: descriptor.request.codec!.decode(new Uint8Array(bytes.buffer, bytes.byteOffset, bytes.length), { check: checkMcp }) };
      } catch (problem) {
        request = { ok: false, reason: problem instanceof Error ? problem.message : String(problem) };
      }
      answer(request);
    });
  }
}
