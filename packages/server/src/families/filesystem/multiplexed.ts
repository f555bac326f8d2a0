// filesystem::tree, ::read and ::write on the multiplexed connection (fs-fuse.md §5, §7, §8): the
// scopes the provider opens, served from the filesystem service under the proxy's root. A failure is
// the FsError's JSON as the error value; whatever is in flight stops when the connection ends.
import type { Say } from "@diverge/multiplexer/log";
import { WriteContentError, decodeWriteContent, encodeReadResponse, encodeTreeResponse, encodeWriteResponse } from "@diverge/codec";
import { MultiplexerError, type FrameSocket, type Responder } from "@diverge/multiplexer";
import { ContentError, FsError, joined, messageHead, prepareWrite, readPieces, tooLarge, watchTreeEncoded } from "./index.js";
import { pathMembers, treeMembers } from "./requests.js";
import { ContentQueue, type Flow } from "./content-queue.js";
import type { ConnectionServices, ScopeRoutes } from "../../multiplexed/family.js";

/** The proxy's default message limit (16 MiB), when none is given. */
const DEFAULT_MAX_MESSAGE_BYTES = 16 * 1024 * 1024;

/** Bytes queued on the socket past which a tree or read waits for the provider to take them. */
const LOW_WATER = 4 * 1024 * 1024;

export interface FilesystemScopeOptions {
  readonly frames: FrameSocket;
  /** The proxy's root, resolved (a real path). */
  readonly root: () => Promise<string>;
  /** Aborted when the connection ends. */
  readonly signal: AbortSignal;
  /** Content bytes held for a write before they are on disk; past it the write fails. */
  readonly maxWriteBacklogBytes: number;
  /** The largest message the provider takes (its frame, header included); a tree frame past it ends the tree. */
  readonly maxMessageBytes?: number;
  /** Directories one tree watches at most (`TreeOptions.maxWatches`). */
  readonly maxTreeWatches?: number;
  /** Pauses reading the connection while a write catches up with its content; the returned function resumes (counted: paused while any holds). */
  readonly flow?: Flow;
  readonly log: Say;
}

/** A read Piece's bytes before the piece itself: the encoding of an empty piece. */
/** What a tree response puts before its frame (a Snapshot is written behind it as it is walked). */
const TREE_RESPONSE_HEAD = messageHead((frame) => encodeTreeResponse({ variant: "Frame", frame }));
const NO_BYTES = new Uint8Array(0);
const READ_PIECE_HEAD = encodeReadResponse({ variant: "Piece", piece: new Uint8Array(0) });

/** What a failure sends: the FsError's `{"kind","error"}`, or the provider's own content error as it came. */
function errorValue(problem: unknown): unknown {
  if (problem instanceof FsError) return problem.toJSON();
  if (problem instanceof ContentError) return problem.value;
  return undefined;
}

export class FilesystemScopes {
  /** Scopes that take a channel from the provider: the tree's stop, and a read's (see `read`). */
  private readonly stops = new Map<number, () => void>();
  /** Every filesystem scope being served: a channel the provider opens on one is ignored, never answered. */
  private readonly live = new Set<number>();

  constructor(private readonly options: FilesystemScopeOptions) {}

  /** A channel the provider opened on one of these scopes: the stop of a tree or a read; any other is ignored (never answered). */
  channel(responder: Responder): boolean {
    const stop = this.stops.get(responder.scope);
    if (!stop) return this.live.has(responder.scope);
    // The stop gets no answer of its own: the scope's finish is the answer.
    stop();
    return true;
  }

  /** Serves one scope: its channels are this module's business until `work` settles. */
  serve(scope: number, work: () => Promise<void>): Promise<void> {
    this.live.add(scope);
    return work().finally(() => this.live.delete(scope));
  }

  async tree(responder: Responder, request: Record<string, unknown>): Promise<void> {
    const members = treeMembers(request);
    if (!members) return responder.finish();
    const stop = new AbortController();
    const onEnd = () => stop.abort();
    this.options.signal.addEventListener("abort", onEnd, { once: true });
    this.stops.set(responder.scope, () => stop.abort());
    try {
      // A frame's header (type, scope, channel) is 9 bytes beside its payload.
      const limit = (this.options.maxMessageBytes ?? DEFAULT_MAX_MESSAGE_BYTES) - 9;
      const watch = watchTreeEncoded(await this.options.root(), { ignore: members.ignore, signal: stop.signal, head: TREE_RESPONSE_HEAD, maxBytes: limit, maxWatches: this.options.maxTreeWatches });
      for await (const output of watch) {
        if (responder.finished) break;
        if (output.variant === "EncodedSnapshot") {
          // Never an oversized frame: the tree ends with the spec's error instead (fs-fuse.md §5.2 step 3).
          if (output.length > limit) throw tooLarge("Snapshot", output.length, limit);
          // Its pieces copied once, into the frame.
          if (responder.respondParts) responder.respondParts(NO_BYTES, output.parts);
          else responder.respond(joined(output));
        } else {
          const payload = encodeTreeResponse({ variant: "Frame", frame: output });
          if (payload.length > limit) throw tooLarge(output.variant, payload.length, limit);
          responder.respond(payload);
        }
        await this.options.frames.drained(LOW_WATER);
      }
    } catch (problem) {
      const value = errorValue(problem);
      if (value === undefined) throw problem;
      responder.respond(encodeTreeResponse({ variant: "Failure", error: value }));
    } finally {
      this.stops.delete(responder.scope);
      this.options.signal.removeEventListener("abort", onEnd);
      stop.abort();
    }
    responder.finish();
  }

  /**
   * A read's pieces, one at a time at the connection's pace. A channel the provider opens on a read
   * scope is taken as the tree's stop is (fs-fuse.md gives no receiving rule for it, §2; this is the
   * one way a reader that gave up can say so): the file is closed, nothing more is sent, the scope
   * finishes and the channel gets no answer of its own. A proxy that ignores such a channel, as the
   * recommendation there says, simply reads on; a provider drops what still comes.
   */
  async read(responder: Responder, request: Record<string, unknown>): Promise<void> {
    const members = pathMembers(request);
    if (!members) return responder.finish();
    const stop = new AbortController();
    this.stops.set(responder.scope, () => stop.abort());
    const signal = AbortSignal.any([this.options.signal, stop.signal]);
    try {
      for await (const piece of readPieces(await this.options.root(), members.path, { signal })) {
        if (responder.finished || stop.signal.aborted) break;
        // The piece is the answer's last field: its tag (an empty piece's encoding) and the piece go into the frame in one copy.
        if (responder.respondParts) responder.respondParts(READ_PIECE_HEAD, piece);
        else responder.respond(encodeReadResponse({ variant: "Piece", piece }));
        await this.options.frames.drained(LOW_WATER);
      }
    } catch (problem) {
      if (this.options.signal.aborted) return;
      if (!stop.signal.aborted) {
        const value = errorValue(problem);
        if (value === undefined) throw problem;
        responder.respond(encodeReadResponse({ variant: "Failure", error: value }));
      }
    } finally {
      this.stops.delete(responder.scope);
    }
    if (!responder.finished) responder.finish();
  }

  async write(responder: Responder, request: Record<string, unknown>): Promise<void> {
    const members = pathMembers(request);
    if (!members) return responder.finish();
    let prepared;
    try {
      prepared = await prepareWrite(await this.options.root(), members.path);
    } catch (problem) {
      const value = errorValue(problem);
      if (value === undefined) throw problem;
      responder.respond(encodeWriteResponse({ variant: "Failure", error: value }));
      return responder.finish();
    }
    const content = new ContentQueue(this.options.maxWriteBacklogBytes, this.options.flow);
    const onEnd = () => content.fail(new DOMException("the connection ended", "AbortError"));
    this.options.signal.addEventListener("abort", onEnd, { once: true });
    try {
      try {
        // The content channel: no tag, an empty payload.
        this.options.frames.mux.openChannel(responder.scope, new Uint8Array(0), {
          response: (payload) => {
            let answer;
            try {
              answer = decodeWriteContent(payload);
            } catch (problem) {
              if (!(problem instanceof WriteContentError)) throw problem;
              return content.fail(new FsError("content", problem.message));
            }
            if (answer.variant === "Piece") content.push(answer.piece.slice());
            else content.fail(new ContentError(answer.error));
          },
          // A bare finish is a zero-byte file, unlike every other bare finish.
          finish: () => content.end(),
          lost: onEnd,
        });
      } catch (problem) {
        if (!(problem instanceof MultiplexerError)) throw problem;
        await prepared.abandon();
        return;
      }
      await prepared.complete(content, { signal: this.options.signal });
      if (responder.finished) return;
      responder.respond(encodeWriteResponse({ variant: "Written" }));
    } catch (problem) {
      await prepared.abandon();
      if (this.options.signal.aborted) return;
      const value = errorValue(problem);
      if (value === undefined) throw problem;
      responder.respond(encodeWriteResponse({ variant: "Failure", error: value }));
    } finally {
      this.options.signal.removeEventListener("abort", onEnd);
    }
    responder.finish();
  }
}

/** The family's scopes on one connection: what each of its endpoints does, and its channels' claim. */
export function filesystemScopes(services: ConnectionServices, root: () => Promise<string>) {
  const { frames, options } = services;
  const filesystem = new FilesystemScopes({
    frames,
    // Resolved once, on first use; a root that cannot be resolved fails each request that needs it.
    root,
    signal: services.signal,
    maxWriteBacklogBytes: options.maxPairBacklogBytes,
    maxMessageBytes: options.maxMessageBytes,
    maxTreeWatches: options.maxTreeWatches,
    // The same counted pause as the pairs': the socket reads again only once no stream holds it.
    flow: () => frames.pauseIncoming(),
    log: options.log,
  });
  const routes: Pick<ScopeRoutes, "FilesystemTree" | "FilesystemRead" | "FilesystemWrite"> = {
    FilesystemTree: (request, responder) => filesystem.serve(responder.scope, () => filesystem.tree(responder, request.request)),
    FilesystemRead: (request, responder) => filesystem.serve(responder.scope, () => filesystem.read(responder, request.request)),
    FilesystemWrite: (request, responder) => filesystem.serve(responder.scope, () => filesystem.write(responder, request.request)),
  };
  /** A channel on a filesystem scope: a tree's stop, or one nobody opens (ignored, never answered). */
  const claimsChannel = (responder: Responder) => filesystem.channel(responder);
  return { routes, claimsChannel };
}
