// /fuse/mount and `/requests` kinds 12–18 (paths.md §8 as corrected by fs-fuse.md §10): the provider
// opens /fuse/mount with `{"path", "id", "readonly"?, "kind"}`; the proxy mounts real kernel FUSE
// inside its root and asks every operation there on /requests, whole files each way. The kernel's
// operations are offset-based, so a whole-file adapter sits between: a read slices the whole file,
// a write or truncate reads the whole file, changes it and writes it whole.
import type { IncomingMessage } from "node:http";
import type { RawData, WebSocket } from "ws";
import { FuseMountPathsRequestError, decodeFuseMountPathsRequest, encodeFuseAck } from "@diverge/codec";
import type { FuseAckResult, FuseHandlers, FuseStat, FuseTime } from "@diverge/multiplexer/fuse";
import { checkPath, realRoot } from "../filesystem/path-checks.js";
import { NOT_A_MOUNT_PATH } from "./place.js";
import type { FuseMount } from "./index.js";
import type { UpgradeDecision, UpgradeRoute } from "../../listener.js";
import type { AskOutcome } from "../../exchanges/engine.js";
import type { ProxyAsks } from "../../gen/exchanges.js";

export interface FuseMountPathsOptions {
  readonly root: string;
  readonly asks: Pick<ProxyAsks, "fuseRead" | "fuseWrite" | "fuseList" | "fuseRemove" | "fuseRename" | "fuseMkdir" | "fuseStat">;
  readonly log: (line: string) => void;
  /** The largest message either way (`--max-message-bytes`): a whole file must fit in one. */
  readonly maxMessageBytes?: number;
  /** Whether a `/requests` connection is open: without one an operation fails at once (EIO), never waits. */
  readonly requestsOpen?: () => boolean;
  /**
   * How many `/requests` connections have opened so far (the current one's number while one is open).
   * With `requestsOpen`, it tells a mount whose provider left: a new `/fuse/mount` at its path replaces it.
   */
  readonly requestsConnection?: () => number;
}

/** Room left in a message for the file itself: the ask's kind, channel, id and path (at most 4 KiB) aside. */
export const pathsMaxFileBytes = (maxMessageBytes: number, id: string) => Math.max(0, maxMessageBytes - 16 - Buffer.byteLength(id) - 4096);

/** `{"path": [string…], "id": string, "readonly"?: bool, "kind": "file" | "directory"}`, or undefined. */
export function pathsMountMembers(request: Record<string, unknown>): { path: string[]; id: string; readonly: boolean; kind: "file" | "directory" } | undefined {
  const { path, id, readonly, kind } = request;
  if (!Array.isArray(path) || !path.every((c) => typeof c === "string")) return undefined;
  if (typeof id !== "string") return undefined;
  if (readonly !== undefined && typeof readonly !== "boolean") return undefined;
  if (kind !== "file" && kind !== "directory") return undefined;
  return { path: path as string[], id, readonly: readonly ?? false, kind };
}

/** The answer of an ask, or a thrown error (the operation fails with EIO) when it was not answered. */
function answered<A>(outcome: AskOutcome<A>): A {
  if (outcome.type === "answered") return outcome.answer;
  throw new Error(`the provider did not answer (${outcome.type})`);
}

const READ_ONLY: FuseAckResult = { kind: "readOnly" };

/**
 * Offset-based FUSE handlers over the whole-file asks of kinds 12–18 for the mount `id`. A read-only
 * mount refuses every change here (EROFS) and never asks one. Setattr has no ask on this transport:
 * it succeeds and changes nothing; modes and times are the proxy's own (0644 / 0755, the mount time).
 */
export function wholeFileHandlers(
  asks: FuseMountPathsOptions["asks"],
  id: string,
  readonly: boolean,
  limits: { readonly maxFileBytes?: number; readonly requestsOpen?: () => boolean } = {},
): FuseHandlers {
  const { maxFileBytes = Number.MAX_SAFE_INTEGER, requestsOpen = () => true } = limits;
  /** The provider must be there to ask: with no `/requests` connection the ask is not queued (the operation fails with EIO at once). */
  const present = () => {
    if (!requestsOpen()) throw new Error("no /requests connection: the provider is gone");
  };
  const tooLarge = (size: number): FuseAckResult => ({ kind: "error", message: `a file of ${size} bytes does not fit in one message` });
  const mountedAt: FuseTime = { secs: BigInt(Math.floor(Date.now() / 1000)), nanos: 0 };
  const uid = process.getuid?.() ?? 0;
  const gid = process.getgid?.() ?? 0;
  const ack = (a: { ack: "Ok" } | { ack: "Refused"; message: string } | { ack: "ReadOnly" }): FuseAckResult =>
    a.ack === "Ok" ? { kind: "ok" } : a.ack === "ReadOnly" ? READ_ONLY : { kind: "error", message: a.message };
  /** The whole file: its bytes, empty when nothing is held yet; undefined with the error's message. */
  const whole = async (path: string): Promise<{ bytes: Uint8Array } | { message: string }> => {
    present();
    const a = answered(await asks.fuseRead({ id, path }));
    if (a.answer === "Data") return { bytes: a.data };
    if (a.answer === "Missing") return { bytes: new Uint8Array(0) };
    return { message: a.message };
  };
  const store = async (path: string, data: Uint8Array) => (present(), ack(answered(await asks.fuseWrite({ id, path, data }))));
  return {
    async read(path, offset, length) {
      const file = await whole(path);
      if ("message" in file) return { kind: "error", message: file.message };
      const start = Number(offset);
      return { kind: "data", bytes: file.bytes.subarray(Math.min(start, file.bytes.length), Math.min(start + length, file.bytes.length)) };
    },
    async write(path, offset, bytes) {
      if (readonly) return READ_ONLY;
      const start = Number(offset);
      if (start + bytes.length > maxFileBytes) return tooLarge(start + bytes.length);
      const file = await whole(path);
      if ("message" in file) return { kind: "error", message: file.message };
      const out = new Uint8Array(Math.max(file.bytes.length, start + bytes.length));
      out.set(file.bytes);
      out.set(bytes, start);
      return store(path, out);
    },
    async truncate(path, size) {
      if (readonly) return READ_ONLY;
      if (size > BigInt(maxFileBytes)) return tooLarge(Number(size));
      const file = await whole(path);
      if ("message" in file) return { kind: "error", message: file.message };
      const out = new Uint8Array(Number(size));
      out.set(file.bytes.subarray(0, out.length));
      return store(path, out);
    },
    async setattr() {
      return readonly ? READ_ONLY : { kind: "ok" };
    },
    async list(path) {
      present();
      const a = answered(await asks.fuseList({ id, path }));
      if (a.answer === "Entries") return { kind: "entries", entries: a.entries.map((e) => ({ name: e.name, kind: e.kind === 1 ? "directory" : "file" })) };
      return a.answer === "Missing" ? { kind: "missing" } : { kind: "error", message: a.message };
    },
    remove: async (path) => (readonly ? READ_ONLY : (present(), ack(answered(await asks.fuseRemove({ id, path }))))),
    rename: async (from, to) => (readonly ? READ_ONLY : (present(), ack(answered(await asks.fuseRename({ id, from, to }))))),
    mkdir: async (path) => (readonly ? READ_ONLY : (present(), ack(answered(await asks.fuseMkdir({ id, path }))))),
    async stat(path) {
      present();
      const a = answered(await asks.fuseStat({ id, path }));
      if (a.answer === "Failed") return { kind: "error", message: a.message };
      // On a file mount, nothing held yet is an empty file.
      if (a.answer === "Missing") return path === "" ? { kind: "stat", stat: stat("file", 0n) } : { kind: "missing" };
      return { kind: "stat", stat: stat(a.file_kind === 1 ? "directory" : "file", a.size) };
    },
  };
  function stat(kind: "file" | "directory", size: bigint): FuseStat {
    return { kind, size, mode: kind === "directory" ? 0o755 : readonly ? 0o444 : 0o644, uid, gid, atime: mountedAt, mtime: mountedAt, ctime: mountedAt };
  }
}

function bytesOf(data: RawData): Uint8Array {
  if (Array.isArray(data)) return new Uint8Array(Buffer.concat(data));
  return data instanceof ArrayBuffer ? new Uint8Array(data) : new Uint8Array(data.buffer, data.byteOffset, data.byteLength);
}

/** Every FuseMountPaths of this process, so a mount over either transport can replace a paths mount whose provider is gone. */
const pathsMounters = new Set<FuseMountPaths>();

/**
 * Before a mount at `components` beneath `root` (a real path): a paths mount this process holds
 * there whose provider is gone is unmounted (by descriptor); a live one is left (the mount then
 * refuses "already a mount"). Resolves when done.
 */
export async function releaseGonePathsMount(root: string, components: readonly string[]): Promise<void> {
  await Promise.all([...pathsMounters].map((m) => m.releaseGone(root, "/" + components.join("/"))));
}

export class FuseMountPaths implements UpgradeRoute {
  /** Every mount made here, by its path under the root (`/a/b`), with the `/requests` connection serving it. */
  private readonly mounts = new Map<string, { readonly mount: FuseMount; readonly servedBy: number }>();
  private root: Promise<string> | undefined;
  private closed = false;

  constructor(private readonly options: FuseMountPathsOptions) {
    pathsMounters.add(this);
  }

  /** Unmounts the mount made here at `key` (`/a/b`) beneath `root` when its provider is gone. */
  async releaseGone(root: string, key: string): Promise<void> {
    if (!this.root || (await this.root.catch(() => undefined)) !== root) return;
    const held = this.mounts.get(key);
    if (!held || !this.providerGone(held.servedBy)) return;
    this.mounts.delete(key);
    this.options.log(`fuse: replacing the mount at ${key}, whose /fuse/mount provider is gone`);
    await held.mount.close();
  }

  decide(pathname: string, _request: IncomingMessage): UpgradeDecision {
    if (pathname !== "/fuse/mount" || this.closed) return undefined;
    return { accept: (socket) => this.open(socket) };
  }

  /** Unmounts every mount made here (the proxy is ending); resolves when they are gone. */
  async close(): Promise<void> {
    this.closed = true;
    pathsMounters.delete(this);
    const mounts = [...this.mounts.values()];
    this.mounts.clear();
    await Promise.allSettled(mounts.map((m) => m.mount.close()));
  }

  private requestsOpen(): boolean {
    return this.options.requestsOpen?.() ?? true;
  }

  private connection(): number {
    return this.options.requestsConnection?.() ?? 0;
  }

  /** No `/requests` connection is open, or the one that served the mount has closed since. */
  private providerGone(servedBy: number): boolean {
    return !this.requestsOpen() || this.connection() > servedBy;
  }

  private open(socket: WebSocket): void {
    socket.on("error", () => {});
    socket.once("message", (data, isBinary) => {
      let request: Record<string, unknown>;
      try {
        if (!isBinary) return socket.close();
        request = decodeFuseMountPathsRequest(bytesOf(data)).request;
      } catch (problem) {
        if (!(problem instanceof FuseMountPathsRequestError)) throw problem;
        return socket.close();
      }
      void this.mount(socket, request).catch((problem: unknown) => {
        this.options.log(`/fuse/mount failed: ${problem instanceof Error ? problem.message : String(problem)}`);
        socket.close();
      });
    });
  }

  private async mount(socket: WebSocket, request: Record<string, unknown>): Promise<void> {
    const members = pathsMountMembers(request);
    // Not readable: a clean close with no message.
    if (!members) return socket.close();
    const refuse = (reason: string) => {
      this.options.log(`/fuse/mount refused: ${reason}`);
      socket.send(encodeFuseAck({ ack: "Refused", message: reason }));
      socket.close();
    };
    const components = checkPath(members.path);
    if (!components) return refuse(NOT_A_MOUNT_PATH);
    const root = await (this.root ??= realRoot(this.options.root));
    const { mountFuse, MountError } = await import("./mount.js");
    const key = "/" + components.join("/");
    // A mount made here whose provider is gone (its asks fail with EIO) is replaced: unmounted (by
    // descriptor), then the place mounted again. A live one is left and refused below.
    await releaseGonePathsMount(root, components);
    // The connection that will serve this mount: the open one, else the next to open.
    const servedBy = this.connection() + (this.requestsOpen() ? 0 : 1);
    let mounted: FuseMount;
    try {
      const maxFileBytes = this.options.maxMessageBytes === undefined ? undefined : pathsMaxFileBytes(this.options.maxMessageBytes, members.id);
      const handlers = wholeFileHandlers(this.options.asks, members.id, members.readonly, { maxFileBytes, requestsOpen: this.options.requestsOpen });
      mounted = await mountFuse({ root, path: components, kind: members.kind, handlers, maxFileBytes });
    } catch (problem) {
      if (problem instanceof MountError) return refuse(problem.message);
      throw problem;
    }
    if (this.closed) return void (await mounted.close());
    // The mount lives until the proxy ends, whatever becomes of this socket.
    // One left over whose place was cleared meanwhile (a dead connection, ENOTCONN) is let go.
    void this.mounts.get(key)?.mount.close();
    this.mounts.set(key, { mount: mounted, servedBy });
    this.options.log(`mounted ${members.kind} /${components.join("/")} for /fuse/mount id ${members.id}${members.readonly ? " (read-only)" : ""}`);
    socket.send(encodeFuseAck({ ack: "Ok" }));
    socket.close();
  }
}
