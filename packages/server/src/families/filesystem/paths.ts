// /filesystem/tree, /filesystem/read and /filesystem/write on the paths transport (paths.md §9 as
// corrected by fs-fuse.md §10): one WebSocket per opening, the request its first message, errors
// the UTF-8 text `kind: error`. The provider closing the socket stops a tree and abandons a write.
import { logEvent, type Say } from "@diverge/multiplexer/log";
import type { IncomingMessage } from "node:http";
import type { RawData, WebSocket } from "ws";
import { FilesystemPathsRequestError, decodeFilesystemPathsRequest, encodeReadAnswer, encodeTreeMessage, encodeWriteAnswer } from "@diverge/codec";
import { FsError, messageHead, prepareWrite, readPieces, realRoot, tooLarge, watchTreeEncoded } from "./index.js";
import { pathMembers, treeMembers } from "./requests.js";
import { ContentQueue } from "./content-queue.js";
import type { UpgradeDecision, UpgradeRoute } from "../../listener.js";

const LOW_WATER = 4 * 1024 * 1024;
/** What a tree message puts before its frame (a Snapshot is written behind it as it is walked). */
const TREE_MESSAGE_HEAD = messageHead((frame) => encodeTreeMessage({ variant: "Frame", frame }));

export interface FilesystemPathsOptions {
  readonly root: string;
  /** Content bytes held for a write before they are on disk; past it the write fails. */
  readonly maxWriteBacklogBytes: number;
  /** The largest message the provider takes; a tree frame past it ends the tree with its error. Default 16 MiB. */
  readonly maxMessageBytes?: number;
  /** Directories one tree watches at most (`TreeOptions.maxWatches`). */
  readonly maxTreeWatches?: number;
  readonly log: Say;
}

type Endpoint = "tree" | "read" | "write";
const ENDPOINTS = new Map<string, Endpoint>([
  ["/filesystem/tree", "tree"],
  ["/filesystem/read", "read"],
  ["/filesystem/write", "write"],
]);

function bytesOf(data: RawData): Uint8Array {
  if (Array.isArray(data)) return new Uint8Array(Buffer.concat(data));
  return data instanceof ArrayBuffer ? new Uint8Array(data) : new Uint8Array(data.buffer, data.byteOffset, data.byteLength);
}

/** Waits until the socket's queue is below `lowWater`, or it closed. */
async function drained(socket: WebSocket, lowWater: number): Promise<void> {
  while (socket.bufferedAmount > lowWater && socket.readyState === socket.OPEN) await new Promise((resolve) => setTimeout(resolve, 5));
}

export class FilesystemPaths implements UpgradeRoute {
  private root: Promise<string> | undefined;
  private readonly sockets = new Set<WebSocket>();
  private closed = false;

  constructor(private readonly options: FilesystemPathsOptions) {}

  decide(pathname: string, _request: IncomingMessage): UpgradeDecision {
    const endpoint = ENDPOINTS.get(pathname);
    if (!endpoint || this.closed) return undefined;
    return { accept: (socket) => this.open(socket, endpoint) };
  }

  /** Every opening ends (its socket closed; a tree stops, a write is abandoned). */
  close(): void {
    this.closed = true;
    for (const socket of this.sockets) socket.terminate();
    this.sockets.clear();
  }

  private realRoot(): Promise<string> {
    return (this.root ??= realRoot(this.options.root));
  }

  private open(socket: WebSocket, endpoint: Endpoint): void {
    this.sockets.add(socket);
    const aborter = new AbortController();
    socket.on("error", () => {});
    socket.once("close", () => {
      this.sockets.delete(socket);
      aborter.abort();
    });
    // The first message is the request; what follows belongs to the write's content (or ends the connection).
    let content: ContentQueue | undefined;
    let requested = false;
    socket.on("message", (data, isBinary) => {
      if (!requested) {
        requested = true;
        let request: Record<string, unknown>;
        try {
          if (!isBinary) throw new Error("a text message");
          request = decodeFilesystemPathsRequest(bytesOf(data)).request;
        } catch (problem) {
          if (!(problem instanceof FilesystemPathsRequestError) && !(problem instanceof Error && problem.message === "a text message")) throw problem;
          this.options.log(`/filesystem/${endpoint}: unreadable request; closing`);
          return socket.close();
        }
        if (endpoint === "write") content = new ContentQueue(this.options.maxWriteBacklogBytes, () => {
          socket.pause();
          return () => socket.resume();
        });
        void this.serve(socket, endpoint, request, aborter.signal, content).catch((problem: unknown) => {
          this.options.log(...logEvent(`/filesystem/${endpoint} failed: {error}; closing`, { error: problem instanceof Error ? problem.message : String(problem) }));
          socket.close();
        });
        return;
      }
      if (!content || !isBinary) {
        // Nothing more is expected from the provider here: the connection ends.
        content?.fail(new FsError("content", "the content carried a text message"));
        return socket.close();
      }
      const bytes = bytesOf(data);
      // One empty message ends the content.
      if (bytes.length === 0) content.end();
      else content.push(bytes.slice());
    });
    socket.once("close", () => content?.fail(new DOMException("the connection ended", "AbortError")));
  }

  private async serve(socket: WebSocket, endpoint: Endpoint, request: Record<string, unknown>, signal: AbortSignal, content: ContentQueue | undefined): Promise<void> {
    if (endpoint === "tree") {
      const members = treeMembers(request);
      if (!members) return socket.close();
      try {
        const limit = this.options.maxMessageBytes ?? 16 * 1024 * 1024;
        for await (const output of watchTreeEncoded(await this.realRoot(), { ignore: members.ignore, signal, head: TREE_MESSAGE_HEAD, maxBytes: limit, maxWatches: this.options.maxTreeWatches })) {
          // Closing (the provider's close frame came): the stop, before the socket's own end.
          if (socket.readyState !== socket.OPEN) return;
          if (output.variant === "EncodedSnapshot") {
            // One message sent as the pieces it was written in (WebSocket fragments): never copied whole.
            if (output.length > limit) throw tooLarge("Snapshot", output.length, limit);
            output.parts.forEach((part, i) => socket.send(part, { binary: true, fin: i === output.parts.length - 1 }));
          } else {
            const message = encodeTreeMessage({ variant: "Frame", frame: output });
            // Never an oversized message: the tree ends with the spec's error instead.
            if (message.length > limit) throw tooLarge(output.variant, message.length, limit);
            socket.send(message);
          }
          await drained(socket, LOW_WATER);
        }
      } catch (problem) {
        if (!(problem instanceof FsError)) throw problem;
        socket.send(encodeTreeMessage({ variant: "Failure", message: problem.message }));
      }
      return socket.close();
    }
    const members = pathMembers(request);
    if (!members) return socket.close();
    if (endpoint === "read") {
      try {
        for await (const piece of readPieces(await this.realRoot(), members.path, { signal })) {
          // A reader that gave up closed the socket: its close frame ends the read at once (the
          // socket's 'close' comes only once the pieces already queued have drained), the file closed.
          if (socket.readyState !== socket.OPEN) return;
          socket.send(encodeReadAnswer({ variant: "Piece", piece }));
          await drained(socket, LOW_WATER);
        }
        // Every piece handed to the kernel before the close: ws destroys a socket whose closing
        // handshake has not finished 30 s after close(), dropping what it still holds, and a
        // provider whose reader lags stops reading (the kernel delivers what it was given).
        await drained(socket, 0);
      } catch (problem) {
        if (signal.aborted) return;
        if (!(problem instanceof FsError)) throw problem;
        socket.send(encodeReadAnswer({ variant: "Failure", message: problem.message }));
      }
      return socket.close();
    }
    let prepared;
    try {
      prepared = await prepareWrite(await this.realRoot(), members.path);
    } catch (problem) {
      if (!(problem instanceof FsError)) throw problem;
      socket.send(encodeWriteAnswer({ variant: "Failure", message: problem.message }));
      return socket.close();
    }
    try {
      await prepared.complete(content!, { signal });
      socket.send(encodeWriteAnswer({ variant: "Written" }));
    } catch (problem) {
      await prepared.abandon();
      if (signal.aborted) return;
      if (!(problem instanceof FsError)) throw problem;
      socket.send(encodeWriteAnswer({ variant: "Failure", message: problem.message }));
    }
    socket.close();
  }
}
