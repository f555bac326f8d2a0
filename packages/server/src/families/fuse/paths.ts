// /fuse/mount and `/requests` kinds 12–18 (paths.md §8 as corrected by fs-fuse.md §10): the provider
// opens /fuse/mount with `{"path", "id", "readonly"?, "kind"}`; the proxy mounts real kernel FUSE
// inside its root and asks every operation there on /requests, whole files each way. The kernel's
// operations are offset-based, so a whole-file adapter sits between: each open file has a proxy
// copy, read once at its first open and written back whole on flush/fsync/release (`Copy`).
import { logEvent, type Say } from "@diverge/multiplexer/log";
import * as fs from "node:fs";
import type { IncomingMessage } from "node:http";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { RawData, WebSocket } from "ws";
import { FuseMountPathsRequestError, decodeFuseMountPathsRequest, encodeFuseAck } from "@diverge/codec";
import type { FuseAckResult, FuseHandlers, FuseReadResult, FuseStat, FuseTime } from "@diverge/multiplexer/fuse";
import { checkPath, realRoot } from "../filesystem/path-checks.js";
import { NOT_A_MOUNT_PATH } from "./place.js";
import type { FuseMount } from "./index.js";
import { errnoOfMessage, type FileSessions } from "./common.js";
import type { UpgradeDecision, UpgradeRoute } from "../../listener.js";
import type { AskOutcome } from "../../exchanges/engine.js";
import type { ProxyAsks } from "../../gen/exchanges.js";

export interface FuseMountPathsOptions {
  readonly root: string;
  readonly asks: Pick<ProxyAsks, "fuseRead" | "fuseWrite" | "fuseList" | "fuseRemove" | "fuseRename" | "fuseMkdir" | "fuseStat">;
  readonly log: Say;
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
 * Every FUSE ask waits for no later `/requests` connection: one made while the provider's connection
 * is closing (it sent its Close, its TCP not ended yet: `present()` still sees it) is lost at once
 * (EIO), never queued for a provider that may never come back while the program waits in the kernel.
 */
const LIVE = { whileConnected: true } as const;

/** Past this many bytes, a proxy copy of an open file lives in a temporary file, not in memory. */
export const PATHS_COPY_MEMORY_BYTES = 4 * 1024 * 1024;

/**
 * From this size on, a copy holds the answer's own bytes instead of copying them. Below it the
 * answer may be a view into a larger read of the socket, which holding would keep alive.
 */
const ADOPT_BYTES = 64 * 1024;

/**
 * The proxy's copy of one file while it is open (the paths transport's whole-file model): read from
 * the provider once at the first open, served to every read and write, sent back whole on flush,
 * fsync and the last release when it changed. In memory up to PATHS_COPY_MEMORY_BYTES, past it in
 * an unlinked temporary file (never held whole in memory but to send it).
 */
class Copy {
  opens = 1;
  /** The path it is sent to (moved by a rename). */
  path: string;
  dirty = false;
  removed = false;
  /** A write or truncate past what one message carries was refused: the copy is never sent (no cut file). */
  refused = false;
  /** The write-back in flight (settles, never rejects), while one is. */
  sending: Promise<void> | undefined;
  private mem: Buffer;
  private file: fs.promises.FileHandle | undefined;
  constructor(path: string, public size: number, bytes?: Uint8Array) {
    this.path = path;
    if (bytes && bytes.length >= ADOPT_BYTES) {
      // The answer's bytes are the copy's own (nothing else keeps the message): held as they are,
      // not copied again, so a large file is in memory once, not twice, while it is open.
      this.mem = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
    } else {
      this.mem = Buffer.alloc(Math.max(size, 4096));
      if (bytes) this.mem.set(bytes);
    }
  }
  private async spill(): Promise<fs.promises.FileHandle> {
    if (this.file) return this.file;
    const dir = await fs.promises.mkdtemp(join(tmpdir(), "diverge-fuse-copy-"));
    const path = join(dir, "copy");
    const file = await fs.promises.open(path, "w+", 0o600);
    await fs.promises.rm(dir, { recursive: true, force: true });
    await file.write(this.mem, 0, this.size, 0);
    this.file = file;
    this.mem = Buffer.alloc(0);
    return file;
  }
  async read(offset: number, length: number): Promise<Uint8Array> {
    const end = Math.min(this.size, offset + length);
    if (offset >= end) return new Uint8Array(0);
    if (!this.file) return this.mem.subarray(offset, end);
    // Every byte is read over before it is used (a short read is cut off below).
    const out = Buffer.allocUnsafe(end - offset);
    let got = 0;
    while (got < out.length) {
      const { bytesRead } = await this.file.read(out, got, out.length - got, offset + got);
      if (bytesRead === 0) break;
      got += bytesRead;
    }
    return out.subarray(0, got);
  }
  async write(offset: number, bytes: Uint8Array): Promise<void> {
    const end = offset + bytes.length;
    if (!this.file && end > PATHS_COPY_MEMORY_BYTES) await this.spill();
    if (this.file) {
      await this.file.write(bytes, 0, bytes.length, offset);
    } else {
      if (end > this.mem.length) {
        const grown = Buffer.alloc(Math.min(Math.max(end, this.mem.length * 2), Math.max(end, PATHS_COPY_MEMORY_BYTES)));
        grown.set(this.mem.subarray(0, this.size));
        this.mem = grown;
      }
      if (offset > this.size) this.mem.fill(0, this.size, offset);
      this.mem.set(bytes, offset);
    }
    this.size = Math.max(this.size, end);
    this.dirty = true;
  }
  async truncate(size: number): Promise<void> {
    if (!this.file && size > PATHS_COPY_MEMORY_BYTES) await this.spill();
    if (this.file) await this.file.truncate(size);
    else if (size > this.size) await this.write(this.size, new Uint8Array(size - this.size));
    this.size = size;
    this.dirty = true;
  }
  /** The whole file, to send. */
  async all(): Promise<Uint8Array> {
    return this.read(0, this.size);
  }
  async drop(): Promise<void> {
    await this.file?.close().catch(() => undefined);
    this.file = undefined;
  }
}

const PATHS_EIO = -5;
const PATHS_ENOENT = -2;
const PATHS_EFBIG = -27;
const PATHS_EROFS = -30;

/**
 * Offset-based FUSE handlers over the whole-file asks of kinds 12–18 for the mount `id`, with the
 * sessions that hold a proxy copy of each open file (`Copy`): a file is read once per open (its
 * first), and written back once on flush, fsync or release. A copy a write or truncate past what one
 * message carries was refused in is never sent and no later open joins it (that open reads the file
 * afresh), so a refusal ends with the descriptors open then. A file past `maxFileBytes` fails at open
 * with EFBIG (and a log line), never mid-write. A read-only mount refuses every change here (EROFS)
 * and never asks one. Setattr has no ask on this transport: modes are the proxy's (0644 / 0755);
 * times are the proxy's record (a write-back sets the modification time to now, a program's
 * `utimes` sets it), the mount time when none.
 */
export function wholeFileHandlers(
  asks: FuseMountPathsOptions["asks"],
  id: string,
  readonly: boolean,
  limits: { readonly maxFileBytes?: number; readonly requestsOpen?: () => boolean; readonly log?: Say } = {},
): FuseHandlers & { readonly sessions: FileSessions } {
  const { maxFileBytes = Number.MAX_SAFE_INTEGER, requestsOpen = () => true, log = () => {} } = limits;
  /** The provider must be there to ask: with no `/requests` connection the ask is not queued (the operation fails with EIO at once). */
  const present = () => {
    if (!requestsOpen()) throw new Error("no /requests connection: the provider is gone");
  };
  const tooLarge = (size: number): FuseAckResult => ({ kind: "error", message: `EFBIG: a file of ${size} bytes does not fit in one message` });
  const mountedAt: FuseTime = now();
  const uid = process.getuid?.() ?? 0;
  const gid = process.getgid?.() ?? 0;
  /** The copy a new open of each path joins (the one its last open got). */
  const copies = new Map<string, Copy>();
  /** The copy each open descriptor got: a later open of its path may hold another. */
  const opened = new Map<number, Copy>();
  const loading = new Map<string, Promise<number | Copy>>();
  /** The copy of `path` an operation without a descriptor acts on: none when it was refused (never sent). */
  const current = (path: string) => {
    const copy = copies.get(path);
    return copy && !copy.refused ? copy : undefined;
  };
  /** The times the proxy keeps per path (the paths stat carries none). */
  const times = new Map<string, { atime: FuseTime; mtime: FuseTime; ctime: FuseTime }>();
  const touched = (path: string) => {
    const t = now();
    times.set(path, { atime: times.get(path)?.atime ?? t, mtime: t, ctime: t });
  };
  const ack = (a: { variant: "Ok" } | { variant: "Refused"; message: string } | { variant: "ReadOnly" }): FuseAckResult =>
    a.variant === "Ok" ? { kind: "ok" } : a.variant === "ReadOnly" ? READ_ONLY : { kind: "error", message: a.message };
  /** The whole file: its bytes, empty when nothing is held yet; undefined with the error's message. */
  const whole = async (path: string): Promise<{ bytes: Uint8Array } | { message: string }> => {
    present();
    const a = answered(await asks.fuseRead({ id, path }, LIVE));
    if (a.variant === "Data") return { bytes: a.data };
    if (a.variant === "Missing") return { bytes: new Uint8Array(0) };
    return { message: a.message };
  };
  const store = async (path: string, data: Uint8Array) => (present(), ack(answered(await asks.fuseWrite({ id, path, data }, LIVE))));
  const codeOf = (a: FuseAckResult) => (a.kind === "ok" ? 0 : a.kind === "readOnly" ? PATHS_EROFS : errnoOfMessage(a.message));
  const refuseLarge = (path: string, size: number | bigint) => {
    log(...logEvent(`/fuse/mount ${id}: {path} (${size} bytes) is larger than one message carries (${maxFileBytes} bytes): open refused (EFBIG)`, { path: `/${path}` }));
    return PATHS_EFBIG;
  };
  /**
   * Sends the copy back when it changed; 0 or a negative errno. One send at a time per copy: a flush
   * or release meeting one in flight (another descriptor's close, the kernel's release after a
   * flush) waits for it and then sends again if the copy is still not stored, so it never reports
   * success for bytes whose send is failing meanwhile.
   */
  const writeBack = async (path: string, copy: Copy): Promise<number> => {
    while (copy.sending) await copy.sending;
    if (copy.refused) return PATHS_EFBIG;
    if (!copy.dirty || copy.removed) return 0;
    if (readonly) return PATHS_EROFS;
    if (copy.size > maxFileBytes) return refuseLarge(path, copy.size);
    const run = send(path, copy);
    copy.sending = run.then(
      () => undefined,
      () => undefined,
    );
    try {
      return await run;
    } finally {
      copy.sending = undefined;
    }
  };
  const send = async (path: string, copy: Copy): Promise<number> => {
    copy.dirty = false;
    const sent = await store(path, await copy.all()).catch((error) => {
      copy.dirty = true;
      throw error;
    });
    if (sent.kind !== "ok") {
      copy.dirty = true;
      return codeOf(sent);
    }
    touched(path);
    return 0;
  };
  const load = async (path: string, created: boolean): Promise<number | Copy> => {
    if (created) {
      const copy = new Copy(path, 0);
      copies.set(path, copy);
      touched(path);
      return copy;
    }
    present();
    const s = answered(await asks.fuseStat({ id, path }, LIVE));
    if (s.variant === "Failed") return errnoOfMessage(s.message);
    if (s.variant === "Stat" && s.size > BigInt(maxFileBytes)) return refuseLarge(path, s.size);
    if (s.variant === "Missing" && path !== "") return PATHS_ENOENT;
    const file = s.variant === "Missing" ? { bytes: new Uint8Array(0) } : await whole(path);
    if ("message" in file) return errnoOfMessage(file.message);
    const copy = new Copy(path, file.bytes.length, file.bytes);
    copies.set(path, copy);
    return copy;
  };
  const sessions: FileSessions = {
    async open(path, created, fh) {
      for (;;) {
        const pending = loading.get(path);
        if (!pending) break;
        await pending.catch(() => undefined);
      }
      // A copy removed, or refused (its descriptors' closes report it), is not joined: this open
      // reads the file afresh, whether or not the kernel's release of the earlier opens came yet.
      const held = copies.get(path);
      if (held && !held.removed && !held.refused) {
        held.opens++;
        opened.set(fh, held);
        return 0;
      }
      const run = load(path, created);
      loading.set(path, run);
      try {
        const got = await run;
        if (typeof got === "number") return got;
        opened.set(fh, got);
        return 0;
      } finally {
        loading.delete(path);
      }
    },
    async flush(path, fh) {
      const copy = opened.get(fh) ?? copies.get(path);
      return copy ? writeBack(copy.path, copy) : 0;
    },
    async release(_path, fh) {
      const copy = opened.get(fh);
      if (!copy) return 0;
      opened.delete(fh);
      copy.opens--;
      let code = PATHS_EIO;
      try {
        code = await writeBack(copy.path, copy);
      } finally {
        if (copy.opens <= 0) {
          if (copies.get(copy.path) === copy) copies.delete(copy.path);
          await copy.drop();
        }
      }
      return code;
    },
    read: (path, fh, offset, length) => readFrom(opened.get(fh) ?? current(path), path, offset, length),
    write: (path, fh, offset, bytes) => writeTo(opened.get(fh) ?? current(path), path, offset, bytes),
    truncate: (path, fh, size) => truncateTo(opened.get(fh) ?? current(path), path, size),
    sizeOf: (path) => {
      const copy = copies.get(path);
      return copy && !copy.removed ? BigInt(copy.size) : undefined;
    },
  };
  async function readFrom(copy: Copy | undefined, path: string, offset: bigint, length: number): Promise<FuseReadResult> {
    if (copy) return { kind: "data", bytes: await copy.read(Number(offset), length) };
    const file = await whole(path);
    if ("message" in file) return { kind: "error", message: file.message };
    const start = Number(offset);
    return { kind: "data", bytes: file.bytes.subarray(Math.min(start, file.bytes.length), Math.min(start + length, file.bytes.length)) };
  }
  async function writeTo(copy: Copy | undefined, path: string, offset: bigint, bytes: Uint8Array): Promise<FuseAckResult> {
    if (readonly) return READ_ONLY;
    const start = Number(offset);
    if (start + bytes.length > maxFileBytes) {
      if (copy) copy.refused = true;
      return tooLarge(start + bytes.length);
    }
    if (copy) {
      await copy.write(start, bytes);
      return { kind: "ok" };
    }
    const file = await whole(path);
    if ("message" in file) return { kind: "error", message: file.message };
    const out = new Uint8Array(Math.max(file.bytes.length, start + bytes.length));
    out.set(file.bytes);
    out.set(bytes, start);
    const sent = await store(path, out);
    if (sent.kind === "ok") touched(path);
    return sent;
  }
  async function truncateTo(copy: Copy | undefined, path: string, size: bigint): Promise<FuseAckResult> {
    if (readonly) return READ_ONLY;
    if (size > BigInt(maxFileBytes)) {
      if (copy) copy.refused = true;
      return tooLarge(Number(size));
    }
    if (copy) {
      await copy.truncate(Number(size));
      return { kind: "ok" };
    }
    const file = await whole(path);
    if ("message" in file) return { kind: "error", message: file.message };
    const out = new Uint8Array(Number(size));
    out.set(file.bytes.subarray(0, out.length));
    const sent = await store(path, out);
    if (sent.kind === "ok") touched(path);
    return sent;
  }
  return {
    sessions,
    read: (path, offset, length) => readFrom(current(path), path, offset, length),
    write: (path, offset, bytes) => writeTo(current(path), path, offset, bytes),
    truncate: (path, size) => truncateTo(current(path), path, size),
    async setattr(path, attrs) {
      if (readonly) return READ_ONLY;
      if (attrs.atime || attrs.mtime) {
        // What was written before goes first: its write-back must not move the time set after it.
        const copy = copies.get(path);
        if (copy?.dirty) {
          const code = await writeBack(path, copy);
          if (code !== 0) return { kind: "error", message: "EIO: the open file could not be sent before its times were set" };
        }
        const t = times.get(path) ?? { atime: mountedAt, mtime: mountedAt, ctime: mountedAt };
        times.set(path, { atime: attrs.atime ?? t.atime, mtime: attrs.mtime ?? t.mtime, ctime: now() });
      }
      return { kind: "ok" };
    },
    async list(path) {
      present();
      const a = answered(await asks.fuseList({ id, path }, LIVE));
      if (a.variant === "Entries") return { kind: "entries", entries: a.entries.map((e) => ({ name: e.name, kind: e.kind === 1 ? "directory" : "file" })) };
      return a.variant === "Missing" ? { kind: "missing" } : { kind: "error", message: a.message };
    },
    async remove(path) {
      if (readonly) return READ_ONLY;
      present();
      const done = ack(answered(await asks.fuseRemove({ id, path }, LIVE)));
      if (done.kind === "ok") {
        times.delete(path);
        const copy = copies.get(path);
        if (copy) copy.removed = true;
      }
      return done;
    },
    async rename(from, to) {
      if (readonly) return READ_ONLY;
      // What is open at `from` is sent first, so the provider moves the file as the program wrote it.
      const open = copies.get(from);
      if (open) {
        const code = await writeBack(from, open);
        if (code !== 0) return { kind: "error", message: "EIO: the open file could not be sent before its rename" };
      }
      present();
      const done = ack(answered(await asks.fuseRename({ id, from, to }, LIVE)));
      if (done.kind === "ok") {
        const prefix = from + "/";
        for (const [key, value] of [...times]) {
          if (key === from || key.startsWith(prefix)) {
            times.delete(key);
            times.set(to + key.slice(from.length), value);
          }
        }
        const replaced = copies.get(to);
        if (replaced) replaced.removed = true;
        for (const [key, value] of [...copies]) {
          if (key === from || key.startsWith(prefix)) {
            copies.delete(key);
            value.path = to + key.slice(from.length);
            copies.set(value.path, value);
          }
        }
      }
      return done;
    },
    mkdir: async (path) => {
      if (readonly) return READ_ONLY;
      present();
      const done = ack(answered(await asks.fuseMkdir({ id, path }, LIVE)));
      if (done.kind === "ok") touched(path);
      return done;
    },
    async stat(path) {
      present();
      const a = answered(await asks.fuseStat({ id, path }, LIVE));
      if (a.variant === "Failed") return { kind: "error", message: a.message };
      // On a file mount, nothing held yet is an empty file.
      if (a.variant === "Missing") return path === "" ? { kind: "stat", stat: stat(path, "file", 0n) } : { kind: "missing" };
      return { kind: "stat", stat: stat(path, a.file_kind === 1 ? "directory" : "file", a.size) };
    },
  };
  function stat(path: string, kind: "file" | "directory", size: bigint): FuseStat {
    const t = times.get(path) ?? { atime: mountedAt, mtime: mountedAt, ctime: mountedAt };
    return { kind, size, mode: kind === "directory" ? 0o755 : readonly ? 0o444 : 0o644, uid, gid, ...t };
  }
}

/** Now, to the nanosecond as far as the clock goes. */
function now(): FuseTime {
  const ns = BigInt(Date.now()) * 1_000_000n + (process.hrtime.bigint() % 1_000_000n);
  return { secs: ns / 1_000_000_000n, nanos: Number(ns % 1_000_000_000n) };
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
    this.options.log(...logEvent("fuse: replacing the mount at {key}, whose /fuse/mount provider is gone", { key }));
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
        this.options.log(...logEvent("/fuse/mount failed: {error}", { error: problem instanceof Error ? problem.message : String(problem) }));
        socket.close();
      });
    });
  }

  private async mount(socket: WebSocket, request: Record<string, unknown>): Promise<void> {
    const members = pathsMountMembers(request);
    // Not readable: a clean close with no message.
    if (!members) return socket.close();
    const refuse = (reason: string) => {
      this.options.log(...logEvent("/fuse/mount refused: {reason}", { reason }));
      socket.send(encodeFuseAck({ variant: "Refused", message: reason }));
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
      const handlers = wholeFileHandlers(this.options.asks, members.id, members.readonly, { maxFileBytes, requestsOpen: this.options.requestsOpen, log: this.options.log });
      mounted = await mountFuse({ root, path: components, kind: members.kind, handlers, maxFileBytes, sessions: handlers.sessions, log: this.options.log, revalidate: "always" });
    } catch (problem) {
      if (problem instanceof MountError) return refuse(problem.message);
      throw problem;
    }
    if (this.closed) return void (await mounted.close());
    // The mount lives until the proxy ends, whatever becomes of this socket.
    // One left over whose place was cleared meanwhile (a dead connection, ENOTCONN) is let go.
    void this.mounts.get(key)?.mount.close();
    this.mounts.set(key, { mount: mounted, servedBy });
    this.options.log(...logEvent(`mounted ${members.kind} {path} for /fuse/mount id ${members.id}${members.readonly ? " (read-only)" : ""}`, { path: `/${components.join("/")}` }));
    socket.send(encodeFuseAck({ variant: "Ok" }));
    socket.close();
  }
}
