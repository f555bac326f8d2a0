// FUSE mounts on the paths transport from the provider's side: `/fuse/mount` asks the proxy for a
// mount under an id of the provider's choosing, and the `/requests` kinds 12–18 the proxy then asks
// (whole files each way) are answered from offset-based FuseHandlers, or a directory of this machine.
import { decodeFuseAck, encodeFuseMountPathsRequest, type FuseAck, type FuseListAnswer, type FusePathsStatAnswer, type FuseReadAnswer } from "@diverge/codec";
import { directoryHandlers, FUSE_CHUNK_SIZE, type FuseAckResult, type FuseHandlers } from "@diverge/multiplexer/fuse";
import type { ProviderHandlers } from "../../gen/exchanges.js";
import { openSocket, defaultWebSocket, type OpenFailure, type WebSocketConstructor } from "../../paths/socket.js";
import { endpointUrl, proxyBase } from "../../url.js";
import { FilesystemError } from "../filesystem/errors.js";
import { readOnlyHandlers, type MountOptions } from "./multiplexed.js";

export interface PathsMountOptions extends MountOptions {
  /** The mount's id, echoed on every ask. Default a fresh one. */
  readonly id?: string;
  readonly WebSocket?: WebSocketConstructor;
}

const ackOf = (r: FuseAckResult): FuseAck => (r.kind === "ok" ? { variant: "Ok" } : r.kind === "readOnly" ? { variant: "ReadOnly" } : { variant: "Refused", message: r.message });

/** The default message limit (the proxy's `--max-message-bytes` default): a whole file must fit in one. */
const DEFAULT_MAX_MESSAGE_BYTES = 16 * 1024 * 1024;

/**
 * The whole file at `path` from offset-based handlers: read in one piece as large as the file's
 * size says (so its bytes are not copied again to be joined), and on in pieces of FUSE_CHUNK_SIZE
 * should the file have grown meanwhile; a file past `limit` bytes is not read further (it could not
 * be sent): Failed.
 */
export async function wholeFile(handlers: FuseHandlers, path: string, limit: number): Promise<FuseReadAnswer> {
  const parts: Uint8Array[] = [];
  const s = await handlers.stat(path);
  // One byte past the size seen: a read that gives it shows the file grew.
  const firstLength = s.kind === "stat" && s.stat.size < BigInt(limit) ? Math.max(FUSE_CHUNK_SIZE, Number(s.stat.size) + 1) : FUSE_CHUNK_SIZE;
  let offset = 0n;
  for (;;) {
    if (offset > BigInt(limit)) return { variant: "Failed", message: `the file is larger than one message carries (${limit} bytes)` };
    const length = offset === 0n ? firstLength : FUSE_CHUNK_SIZE;
    const r = await handlers.read(path, offset, length);
    if (r.kind === "missing") return offset === 0n ? { variant: "Missing" } : { variant: "Failed", message: "the file went away while it was read" };
    if (r.kind === "error") return { variant: "Failed", message: r.message };
    // A file read in one piece is answered with that piece: the answer's encoder copies it anyway.
    if (offset === 0n && r.bytes.length < length) return { variant: "Data", data: r.bytes };
    parts.push(r.bytes.slice());
    offset += BigInt(r.bytes.length);
    if (r.bytes.length < length) break;
  }
  const out = new Uint8Array(Number(offset));
  let at = 0;
  for (const part of parts) {
    out.set(part, at);
    at += part.length;
  }
  return { variant: "Data", data: out };
}

/**
 * The provider's FUSE mounts on the paths transport. Spread `handlers()` into the handlers given to
 * `connectProxy`, then `mount(…)` each one; an ask for an id not mounted here is not served.
 */
export class PathsMounts {
  private readonly byId = new Map<string, FuseHandlers>();
  private counter = 0;
  private readonly maxFileBytes: number;

  /** `maxMessageBytes`: the proxy's message limit (default 16 MiB); a file read whole must fit in one answer. */
  constructor(
    private readonly proxy: string | URL,
    options: { readonly maxMessageBytes?: number } = {},
  ) {
    this.maxFileBytes = (options.maxMessageBytes ?? DEFAULT_MAX_MESSAGE_BYTES) - 16;
  }

  /** Answers of kinds 12–18, from the mounts made here. */
  handlers(): Pick<ProviderHandlers, "fuseRead" | "fuseWrite" | "fuseList" | "fuseRemove" | "fuseRename" | "fuseMkdir" | "fuseStat"> {
    const of = (id: string) => this.byId.get(id);
    return {
      fuseRead: async ({ id, path }) => {
        const h = of(id);
        return h && wholeFile(h, path, this.maxFileBytes);
      },
      fuseWrite: async ({ id, path, data }): Promise<FuseAck | undefined> => {
        const h = of(id);
        if (!h) return undefined;
        // Replace whole: write every byte, then cut what an older, longer file left after them.
        const written = await h.write(path, 0n, data);
        if (written.kind !== "ok") return ackOf(written);
        return ackOf(await h.truncate(path, BigInt(data.length)));
      },
      fuseList: async ({ id, path }): Promise<FuseListAnswer | undefined> => {
        const h = of(id);
        if (!h) return undefined;
        const r = await h.list(path);
        if (r.kind === "entries") return { variant: "Entries", entries: r.entries.map((e) => ({ kind: e.kind === "directory" ? 1 : 0, name: e.name })) };
        return r.kind === "missing" ? { variant: "Missing" } : { variant: "Failed", message: r.message };
      },
      fuseRemove: async ({ id, path }) => {
        const h = of(id);
        return h && ackOf(await h.remove(path));
      },
      fuseRename: async ({ id, from, to }) => {
        const h = of(id);
        return h && ackOf(await h.rename(from, to));
      },
      fuseMkdir: async ({ id, path }) => {
        const h = of(id);
        return h && ackOf(await h.mkdir(path));
      },
      fuseStat: async ({ id, path }): Promise<FusePathsStatAnswer | undefined> => {
        const h = of(id);
        if (!h) return undefined;
        const r = await h.stat(path);
        if (r.kind === "stat") return { variant: "Stat", file_kind: r.stat.kind === "directory" ? 1 : 0, size: r.stat.size };
        return r.kind === "missing" ? { variant: "Missing" } : { variant: "Failed", message: r.message };
      },
    };
  }

  /**
   * Opens `/fuse/mount`: the proxy mounts at `path` (components from the container's root) and asks
   * this mount's operations on `/requests`. Resolves with the id once the mount serves.
   */
  async mount(path: readonly string[], target: FuseHandlers | string, options: PathsMountOptions = {}): Promise<string> {
    const what = "/fuse/mount";
    const kind = options.kind ?? "directory";
    const readonly = options.readonly ?? false;
    const id = options.id ?? `mount-${++this.counter}`;
    const handlers = typeof target === "string" ? directoryHandlers(target, { readonly }) : readonly ? readOnlyHandlers(target) : target;
    // Answering starts before the mount is asked for: the kernel may ask as soon as it serves.
    this.byId.set(id, handlers);
    const url = endpointUrl(proxyBase(this.proxy), "/fuse/mount");
    let socket;
    try {
      socket = await openSocket(options.WebSocket ?? defaultWebSocket, url);
    } catch (failure) {
      this.byId.delete(id);
      const f = failure as OpenFailure;
      throw new FilesystemError({ variant: "Unreachable", what, url, status: f.status, reason: f.message });
    }
    let answer: Uint8Array | undefined;
    socket.onMessage((bytes) => {
      answer ??= bytes;
    });
    socket.send(encodeFuseMountPathsRequest({ request: { path: [...path], id, readonly, kind } }));
    const ending = await socket.ended;
    const fail = (error: FilesystemError) => {
      this.byId.delete(id);
      throw error;
    };
    if (!answer) return fail(new FilesystemError({ variant: ending.clean ? "NotServed" : "Lost", what }));
    let ack;
    try {
      ack = decodeFuseAck(answer);
    } catch (problem) {
      return fail(new FilesystemError({ variant: "Unreadable", what, reason: (problem as Error).message }));
    }
    if (ack.variant !== "Ok") return fail(new FilesystemError({ variant: "Failed", what, error: ack.variant === "Refused" ? ack.message : "read-only" }));
    return id;
  }

  /** Stops answering the mount `id`: its operations then fail in the container with EIO. */
  forget(id: string): void {
    this.byId.delete(id);
  }

  /**
   * Ends the mount `id` on this side: its asks are no longer answered, so every operation on it fails
   * in the container with EIO at once. The mount point itself stays until the proxy ends (the paths
   * transport has no unmount: paths.md §8.1). True when `id` was mounted here.
   */
  unmount(id: string): boolean {
    return this.byId.delete(id);
  }
}
