// A real kernel FUSE filesystem at a path whose every operation is one typed ask (handlers.ts).
// Binding: @diverge/fuse-native (packages/fuse-native: fuse-native 2.2.6 with this repository's
// fixes, prebuilt linux-x64 binaries in the package; libfuse 3's (libfuse3.so.3, Debian's
// `libfuse3-3`) where it loads, else libfuse 2.9's (libfuse.so.2, `libfuse2`)). Errno mapping as fs-fuse.md
// §4.1: a failed or unserved ask → EIO; ReadOnly → EROFS; Missing → ENOENT; an error answer → EIO,
// unless its message begins with an errno's name (`ENOTEMPTY: …`, common.ts), then that errno. The
// proxy refuses itself what it can check: a name over 255 bytes (ENAMETOOLONG), an rmdir or a rename
// over a directory with entries (ENOTEMPTY). Caching: the `--fuse-cache` level (common.ts); the
// kernel's largest transfers (1 MiB with libfuse 3, 128 KiB with 2.9); libfuse's multi-threaded loop
// (fuse-native runs `fuse_loop_mt`), so the kernel's parallel requests are asked at once and
// answered as they come.
//
// What @diverge/fuse-native changes from fuse-native 2.2.6, which this file relies on: it sets libfuse's
// `flag_utime_omit_ok`, so a change of one time alone (`touch -m`, `touch -a`, `tar x`) reaches
// utimens with the other time UTIME_OMIT (libfuse 2.9's high-level API otherwise calls utimens only
// when both change, and answers "done" itself); it hands utimens both times (2.2.6 passed the access
// time twice) as `{ sec, nsec }`, to the nanosecond (2.2.6 truncated to milliseconds); and it takes
// stat times to the nanosecond (`atimeNs`, `mtimeNs`, `ctimeNs`). Its index.js refuses to load a
// binary not built from that source (the unpatched prebuilt one), so a mount is then refused with
// the reason, never served with times lost.
//
// Where FUSE_PACKAGE names the published fuse-native 2.2.6 instead (natives.ts), mounts work as
// before these fixes: times to the millisecond, a change of one time alone not asked, and the
// modification time read from the binding's per-thread record (`withTrueMtime`).
import type { Say } from "@diverge/multiplexer/log";
import { execFile, execFileSync, spawn, type ChildProcess } from "node:child_process";
import * as fs from "node:fs";
import { constants as fsConstants, existsSync } from "node:fs";
import { readFile } from "node:fs/promises";
import { createRequire } from "node:module";
import { dirname, resolve } from "node:path";
import { promisify } from "node:util";
import { Beneath, BeneathError, O_PATH, fdPath, type Place } from "@diverge/multiplexer/beneath";
import { noteServedMount } from "./served.js";
import { defaultFuseCache, errnoOfMessage, type FileSessions, type FuseCacheLevel } from "./common.js";
export { errnoOfMessage, setDefaultFuseCache, FUSE_CACHE_LEVELS, type FileSessions, type FuseCacheLevel } from "./common.js";
import { FUSE_PACKAGE, requireNative, resolveNative } from "../../natives.js";
import { embeddedFuse } from "../../embedded-fuse.js";
import { FUSE_CHUNK_SIZE, type FuseAckResult, type FuseAttrs, type FuseHandlers, type FuseStat, type FuseStatResult, type FuseTime } from "@diverge/multiplexer/fuse";

// The binding is found from the file the proxy runs from (natives.ts: beside the bundle or the
// single executable, in the installed package's node_modules otherwise), never the working directory.
const require = Object.assign((id: string) => requireNative(id), { resolve: (id: string) => resolveNative(id) });

// errno values as fuse-native wants them (negative).
const EIO = -5;
const ENOENT = -2;
const EROFS = -30;
const ENOSYS = -38;
const EINVAL = -22;
const EFBIG = -27;
const EPERM = -1;
const ENOTEMPTY = -39;
const ENAMETOOLONG = -36;

/** A name the kernel passes that no Linux filesystem takes (NAME_MAX, 255 bytes). */
const tooLong = (p: string) => p.split("/").some((c) => Buffer.byteLength(c) > 255);

/**
 * The kernel's largest FUSE read and write: without FUSE_MAX_PAGES (libfuse 2.9 does not negotiate
 * it) 32 pages; libfuse 3 negotiates up to 256 pages (1 MiB), so a program's 1 MiB read or write is
 * one ask, and the read-ahead is as large.
 */
const MAX_TRANSFER: Record<2 | 3, number> = { 2: 128 * 1024, 3: 1024 * 1024 };
/** How many requests the kernel keeps in flight in the background (read-ahead, write-back) at once; libfuse's default is 12. */
const MAX_BACKGROUND = 64;
/** How long the attributes of an entry just made stand for the getattr that follows it: the kernel's own attribute time at the default level. */
const FRESH_MS = 1000;
/** Stats read ahead for a scan: asked at once, held at most, the listings kept, and the largest listing read ahead. */
const STAT_AHEAD_WINDOW = 16;
const STAT_AHEAD_MAX = 16384;
const SCANS_MAX = 1024;
const SCAN_ENTRIES_MAX = 4096;
export function mountOptionsFor(level: FuseCacheLevel, revalidate: "byStat" | "always", libfuse: 2 | 3 = 2, writeback = false): string[] {
  const max = MAX_TRANSFER[libfuse];
  // `nonempty`: libfuse 2.9 alone refuses a mount point that holds anything (a directory with
  // entries, a file with content: "fuse: mountpoint is not empty", the mount failing as "fuse
  // failed"); mount(2), libfuse 3 and the reference proxy mount over it, what was there hidden
  // until the mount goes. A program writing as the last mount at a path went leaves such a file.
  // libfuse 3 knows neither `nonempty` nor `big_writes` (it always mounts so, and writes large).
  const large =
    libfuse === 2
      ? ["nonempty", "big_writes", `max_write=${max}`, `max_read=${max}`, `max_readahead=${max}`]
      : // No max_read: libfuse 3 wants init to name the same one again; the kernel's own bound (its pages per request) holds.
        [`max_write=${max}`, `max_readahead=${max}`, `max_background=${MAX_BACKGROUND}`];
  if (level === "none") return ["noatime", "direct_io", "attr_timeout=0", "entry_timeout=0", "negative_timeout=0", ...large];
  // The kernel's writeback cache (libfuse 3): writes gathered in the page cache and sent in large
  // pieces, a write's failure seen at fsync/close. Only at `full`: the kernel then trusts its own
  // size and modification time of a file over the provider's, which `full` already assumes (the
  // directory changes only through this mount), close-to-open does not.
  if (level === "full") return ["noatime", "kernel_cache", "attr_timeout=60", "entry_timeout=60", "negative_timeout=0", ...large, ...(libfuse === 3 && writeback ? ["writeback_cache"] : [])];
  // A transport whose times are the proxy's own (paths) drops a file's pages at every open instead
  // (no auto_cache: libfuse then never keeps them), names and attributes cached as on multiplexed.
  if (revalidate === "always") return ["noatime", "attr_timeout=1", "entry_timeout=1", "negative_timeout=0", ...large];
  return ["noatime", "auto_cache", "attr_timeout=1", "entry_timeout=1", "negative_timeout=0", ...large];
}

type Cb = (code: number, ...rest: unknown[]) => void;
type FuseCtor = new (mnt: string, ops: Record<string, unknown>, opts: Record<string, unknown>) => FuseInstance;
interface FuseInstance {
  mount(cb: (error: Error | null) => void): void;
  unmount(cb: (error: Error | null) => void): void;
  _open(cb: (error: Error | null) => void): void;
}

/** Why FUSE cannot be used on this machine, or undefined when it can. */
export function fuseUnavailable(): string | undefined {
  if (!existsSync("/dev/fuse")) return "this machine has no /dev/fuse";
  try {
    loadFuse();
  } catch (error) {
    return `the FUSE binding does not load: ${(error as Error).message}`;
  }
  return undefined;
}

interface FuseBinding {
  fuse_native_mount: (...args: unknown[]) => void;
  utime_omit_ok?: number;
  libfuse_major?: number;
}

/**
 * fuse-native and its binding: the package beside the proxy's file (node_modules/, natives.ts) when
 * there is one, else the one a bundle carries inside itself (embedded-fuse.ts), else the reason.
 */
function fusePackage(): { Fuse: FuseCtor; binding: FuseBinding } {
  try {
    const Fuse = require(FUSE_PACKAGE) as FuseCtor;
    // The binding itself, as fuse-native loads it (same file, so the same module instance).
    const fuseRequire = createRequire(require.resolve(FUSE_PACKAGE));
    // The binding index.js chose (libfuse 3's when asked for and loadable); an older index.js names none.
    const chosen = (Fuse as unknown as { binding?: FuseBinding }).binding;
    return { Fuse, binding: chosen ?? (fuseRequire("node-gyp-build")(dirname(require.resolve(FUSE_PACKAGE))) as FuseBinding) };
  } catch (error) {
    if (embeddedFuse === undefined || (error as NodeJS.ErrnoException).code !== "MODULE_NOT_FOUND") throw error;
    const carried = embeddedFuse();
    return { Fuse: carried.Fuse as FuseCtor, binding: carried.binding as FuseBinding };
  }
}

let fuseClass: FuseCtor | undefined;
/** Whether the binding loaded is @diverge/fuse-native's build (a change of one time alone, nanoseconds). */
let patchedBinding = false;
/** The libfuse the loaded binding drives (its mount options differ). */
let libfuseMajor: 2 | 3 = 2;
/** Which libfuse the mounts use (2 or 3), or undefined when the binding does not load. */
export function fuseLibraryVersion(): 2 | 3 | undefined {
  try {
    loadFuse();
  } catch {
    return undefined;
  }
  return libfuseMajor;
}
function loadFuse(): FuseCtor {
  if (fuseClass) return fuseClass;
  const { Fuse, binding } = fusePackage();
  libfuseMajor = binding.libfuse_major === 3 ? 3 : 2;
  patchedBinding = binding.utime_omit_ok === 1;
  /**
   * fuse-native refuses any mount point but a directory; a FUSE filesystem whose root is a file may
   * be mounted on a file (the kernel takes the root's type from the mount point). The same open as
   * fuse-native 2.2.6's `_open`, without that check and without its mkdir/force steps.
   */
  class AnyMountPoint extends (Fuse as unknown as new (...args: unknown[]) => Record<string, any>) {
    _open(cb: (error: Error | null) => void): void {
      if (!patchedBinding) {
        const op = (binding as unknown as { op_utimens: number }).op_utimens;
        this._handlers[op] = withTrueMtime(this._handlers[op]);
      }
      this._thread = Buffer.alloc((binding as unknown as { sizeof_fuse_thread_t: number }).sizeof_fuse_thread_t);
      this._openCallback = cb;
      try {
        binding.fuse_native_mount(this.mnt, this._fuseOptions(), this._thread, this, this._malloc, this._handlers, this._getImplementedArray());
      } catch (error) {
        cb(error as Error);
      }
    }

    /** Lets go of the binding's hold on the event loop once the mount is gone (its own close unmounts by name). */
    _releaseThread(): void {
      if (this._thread) (binding as unknown as { fuse_native_unmount(mnt: string, thread: Buffer): void }).fuse_native_unmount(this.mnt, this._thread);
    }
  }
  fuseClass = AnyMountPoint as unknown as FuseCtor;
  return fuseClass;
}

/**
 * The byte offsets of `atime` and `mtime` (both `size_t`, milliseconds) in fuse-native 2.2.6's
 * `fuse_thread_locals_t` on a 64-bit Linux: self 0, op 8, op_fn 16, path 24, dest 32, linkname 40,
 * info 48, buf 56, offset 64, len 72, mode 80, dev 88, uid 96, gid 100, atime 104, mtime 112.
 */
const LOCALS_ATIME = 104;
const LOCALS_MTIME = 112;

/**
 * fuse-native 2.2.6's utimens handler as the binding calls it — `(locals, op, path, atimeLow,
 * atimeHigh, mtimeLow, mtimeHigh)` where the "mtime" halves are the access time again — given the
 * true modification time. `locals` is the Buffer holding the calling FUSE thread's record, which the
 * binding filled from the kernel's two timespecs before calling; the access time found there is
 * checked against the one passed, so a binding whose record is laid out otherwise is left as it is.
 */
export function withTrueMtime(handler: (...args: any[]) => unknown): (...args: any[]) => unknown {
  return (locals: unknown, op: unknown, path: unknown, atimeLow: number, atimeHigh: number, mtimeLow: number, mtimeHigh: number, ...rest: unknown[]) => {
    if (Buffer.isBuffer(locals) && locals.length >= LOCALS_MTIME + 8 && process.arch !== "ia32" && process.arch !== "arm") {
      const atime = BigInt(atimeHigh >>> 0) * 0x1_0000_0000n + BigInt(atimeLow >>> 0);
      if (locals.readBigUInt64LE(LOCALS_ATIME) === atime) {
        const mtime = locals.readBigUInt64LE(LOCALS_MTIME);
        mtimeLow = Number(mtime & 0xffff_ffffn);
        mtimeHigh = Number(mtime >> 32n);
      }
    }
    return handler(locals, op, path, atimeLow, atimeHigh, mtimeLow, mtimeHigh, ...rest);
  };
}

export interface MountOptions {
  /**
   * Where: with `root`, a path relative to it (`/`-separated or as components), resolved beneath it
   * by descriptor (links followed only as far as they stay beneath it); else an absolute path on
   * this machine (then beneath `/`). Missing parents are made, beneath the root as well.
   */
  readonly path: string | readonly string[];
  /** The directory the mount must stay beneath (the proxy's `--root`). */
  readonly root?: string;
  /** One regular file, or a directory tree. */
  readonly kind: "file" | "directory";
  readonly handlers: FuseHandlers;
  /**
   * The largest file a write or truncate may make; past it the operation fails at once with EFBIG
   * and nothing is asked (the paths transport carries whole files in one message).
   */
  readonly maxFileBytes?: number;
  /** How much the kernel caches (default: the proxy's `--fuse-cache`, else close-to-open). */
  readonly cache?: FuseCacheLevel;
  /**
   * How an open revalidates the file's cached pages at the close-to-open level: `byStat` (dropped
   * when its size or modification time changed), `always` (dropped at every open: the paths
   * transport, whose times are the proxy's own). Default byStat.
   */
  readonly revalidate?: "byStat" | "always";
  /** Called at open, flush and release (the paths transport's proxy copies). */
  readonly sessions?: FileSessions;
  /** The proxy's log, for refusals a program cannot be told the reason of (EFBIG at open). */
  readonly log?: Say;
}

export interface FuseMount {
  readonly path: string;
  /** Answers every operation still waiting with EIO, unmounts, and resolves when the mount is gone. */
  close(): Promise<void>;
}

/** The error a mount fails with; `message` is the reason the proxy sends (`mount: …`). */
export class MountError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "MountError";
  }
}

const toDate = (t: FuseTime) => new Date(Number(t.secs) * 1000 + Math.floor(t.nanos / 1e6));
const toTime = (ms: number): FuseTime => {
  const secs = Math.floor(ms / 1000);
  return { secs: BigInt(secs < 0 ? 0 : secs), nanos: Math.round((ms - secs * 1000) * 1e6) };
};
/** A time as nanoseconds since the epoch, as the patched binding takes stat times exactly. */
const toNs = (t: FuseTime) => t.secs * 1_000_000_000n + BigInt(t.nanos);

/** The markers of the patched binding's utimens (Linux's own values, as the kernel gives them). */
const UTIME_NOW = (1 << 30) - 1;
const UTIME_OMIT = (1 << 30) - 2;
/** One time of a utimens as the patched binding hands it. */
interface Timespec {
  readonly sec: bigint;
  readonly nsec: number;
}
/**
 * One time of a utimens as a setattr's: undefined when left as it is (UTIME_OMIT, the bit clear),
 * the proxy's current time for UTIME_NOW; null when the spec cannot carry it (before the epoch:
 * its seconds are a u64), which fails with EINVAL and asks nothing.
 */
function setTime(t: Timespec): FuseTime | undefined | null {
  if (t.nsec === UTIME_OMIT) return undefined;
  if (t.nsec === UTIME_NOW) {
    const now = process.hrtime.bigint() - hrtimeAtStart + wallAtStart;
    return { secs: now / 1_000_000_000n, nanos: Number(now % 1_000_000_000n) };
  }
  if (t.sec < 0n || !Number.isInteger(t.nsec) || t.nsec < 0 || t.nsec > 999_999_999) return null;
  return { secs: t.sec, nanos: t.nsec };
}
/** The wall clock in nanoseconds: read once, then advanced by the monotonic clock (Date has milliseconds only). */
const wallAtStart = BigInt(Date.now()) * 1_000_000n;
const hrtimeAtStart = process.hrtime.bigint();

/** One entry of a listing as readdir gives it. */
interface ListedEntry {
  readonly name: string;
  readonly kind: "file" | "directory";
}
const DIR_TYPE = { mode: 0o040000 };
const FILE_TYPE = { mode: 0o100000 };

/** Mounts FUSE at `options.path` (fs-fuse.md §3.2 steps 2–3) and serves it with the handlers. */
export async function mountFuse(options: MountOptions): Promise<FuseMount> {
  const unavailable = fuseUnavailable();
  if (unavailable) throw new MountError(`mount: ${unavailable}`);
  const Fuse = loadFuse();
  const { handlers, kind } = options;
  const maxFileBytes = options.maxFileBytes ?? Number.MAX_SAFE_INTEGER;
  const rootPath = options.root ?? "/";
  const components = typeof options.path === "string" ? options.path.split("/").filter((c) => c !== "") : [...options.path];
  if (typeof options.path === "string" && options.root === undefined && !options.path.startsWith("/")) throw new MountError("mount: the path is not absolute");
  // What the messages name: the path as the caller sees it (under the root), never the host's.
  const shown = "/" + components.join("/");
  if (process.getuid?.() !== 0) throw new MountError("mount: the proxy mounts FUSE only when it runs as root");
  const placed = await placeMountPoint(rootPath, components, kind, shown);
  const path = placed.real;
  const pending = new Set<Cb>();
  let closed = false;
  const mountedAt = toTime(Date.now());
  const uid = process.getuid?.() ?? 0;
  const gid = process.getgid?.() ?? 0;

  /** Runs one ask; answers the kernel once, with EIO if the handler fails or the mount closes first. */
  const ask = <T>(cb: Cb, run: () => Promise<T>, answer: (value: T) => void) => {
    if (closed) return cb(EIO);
    let done = false;
    const once: Cb = (code, ...rest) => {
      if (done) return;
      done = true;
      pending.delete(once);
      cb(code, ...rest);
    };
    pending.add(once);
    run().then(
      (value) => {
        if (done) return;
        try {
          answer(value);
        } catch {
          once(EIO);
        }
        // answer() calls cb directly; make sure it counts as done.
        done = true;
        pending.delete(once);
      },
      () => once(EIO),
    );
  };
  const ackCode = (ack: FuseAckResult) => (ack.kind === "ok" ? 0 : ack.kind === "readOnly" ? EROFS : errnoOfMessage(ack.message));
  const sessions = options.sessions;
  /** Per directory path, how many directories its last listing held (its link count is 2 more); unknown is 1. */
  const subdirs = new Map<string, number>();
  const parentOf = (p: string) => p.slice(0, Math.max(1, p.lastIndexOf("/")));
  const forgetDirs = (...paths: string[]) => {
    for (const p of paths) {
      subdirs.delete(p);
      subdirs.delete(parentOf(p));
    }
  };
  const noteListing = (p: string, entries: readonly { kind: string }[]) => subdirs.set(p, entries.filter((e) => e.kind === "directory").length);
  /** A fuse path (`/a/b`) as an ask path (`a/b`); a file mount always asks the empty path. */
  const rel = (p: string) => (kind === "file" ? "" : p.replace(/^\/+/, ""));
  // st_blocks from the size, in 4 KiB allocations as a local filesystem has them (so `du` agrees);
  // a directory 4 KiB; its link count 2 + its subdirectories when listed, else 1 (unknown, as `find` reads it).
  const statOf = (s: FuseStat, p: string) => {
    const size = s.kind === "directory" ? 4096 : Number(sessions?.sizeOf(rel(p)) ?? s.size);
    const known = subdirs.get(p);
    return {
    mode: (s.kind === "directory" ? 0o040000 : 0o100000) | (s.mode & 0o7777),
    uid: s.uid,
    gid: s.gid,
    size,
    blksize: 4096,
    blocks: Math.ceil(size / 4096) * 8,
    nlink: s.kind === "directory" ? (known === undefined ? 1 : 2 + known) : 1,
    atime: toDate(s.atime),
    mtime: toDate(s.mtime),
    ctime: toDate(s.ctime),
    // What the patched binding uses: the times exact to the nanosecond.
    atimeNs: toNs(s.atime),
    mtimeNs: toNs(s.mtime),
    ctimeNs: toNs(s.ctime),
  };
  };
  const rootDir = () => ({ mode: 0o040755, uid, gid, size: 4096, blksize: 4096, blocks: 8, nlink: subdirs.has("/") ? 2 + subdirs.get("/")! : 1, atime: toDate(mountedAt), mtime: toDate(mountedAt), ctime: toDate(mountedAt), atimeNs: toNs(mountedAt), mtimeNs: toNs(mountedAt), ctimeNs: toNs(mountedAt) });
  let fds = 0;
  /**
   * The callback of an operation answering a descriptor (open, opendir, create): fuse-native reads
   * the descriptor even beside an error and, finding none, throws in its signal and never answers
   * the kernel (the program waits for good); an error goes with descriptor 0.
   */
  const withFd = (cb: Cb): Cb => (code, ...rest) => cb(code, rest[0] ?? 0, ...rest.slice(1));
  /** Per directory path, the listings asked at opendir and not yet read (one per open). */
  const listed = new Map<string, ListedEntry[][]>();
  /**
   * A listing as readdir answers it: the names after `.` and `..`, and (libfuse 3 only) beside each
   * its type (the entry's d_type, so `find` need not stat it).
   */
  const direntries = (entries: readonly ListedEntry[]): [string[], { mode: number }[]] => [
    [".", "..", ...entries.map((e) => e.name)],
    libfuseMajor === 3 ? [DIR_TYPE, DIR_TYPE, ...entries.map((e) => (e.kind === "directory" ? DIR_TYPE : FILE_TYPE))] : [],
  ];
  /** Per directory path, how many opens of it are not yet released. */
  const openDirs = new Map<string, number>();
  /**
   * The path each open descriptor (file or directory) was opened at. An operation on an open one
   * whose path is gone comes without it: libfuse 3 hands null, libfuse 2.9 "-" (the release, fsync
   * or read of a directory removed while open, or of a file whose directory was removed); its
   * descriptor still says which open it was. An operation naming no path and no descriptor is
   * ENOENT, as the path is gone.
   */
  const openedAt = new Map<number, string>();
  const named = (p: unknown): p is string => typeof p === "string" && p.startsWith("/");
  const pathOf = (p: unknown, fd: number): string | undefined => (named(p) ? p : openedAt.get(fd));

  // The level this mount gets (the proxy's --fuse-cache when the mount names none), fixed at its start.
  const cacheLevel = options.cache ?? defaultFuseCache();
  /** How long attributes known ahead of a getattr stand for it: the kernel's own attribute time, never at `none`. */
  const madeAttrsFor = cacheLevel === "none" ? 0 : FRESH_MS;
  /**
   * Makes the program's mode hold on an entry just made (the umask already applied by the
   * kernel), asking a setattr only when the provider made it otherwise, so that `open(O_CREAT)`
   * is a write and a stat in the common case. Best effort: a provider refusing the setattr
   * still has the entry. Its attributes are kept for the getattr that follows.
   */
  const settleMode = async (p: string, mode: number): Promise<void> => {
    const wanted = mode & 0o7777;
    const there = await handlers.stat(rel(p)).catch(() => undefined);
    if (there?.kind !== "stat") {
      await handlers.setattr(rel(p), { mode: wanted }).catch(() => undefined);
      return;
    }
    let stat = there.stat;
    if (stat.mode !== wanted) {
      const set = await handlers.setattr(rel(p), { mode: wanted }).catch(() => undefined);
      if (set?.kind === "ok") stat = { ...stat, mode: wanted };
    }
    if (madeAttrsFor > 0) statAhead.set(p, { answer: Promise.resolve({ kind: "stat", stat }), at: performance.now() });
  };

  /**
   * Attributes known ahead of the getattr that takes them, instead of a round trip of its own:
   * - the stat a create or mkdir asked (settleMode), for the getattr libfuse asks right after it;
   * - stats read ahead for a scan of a directory (tar, rm -r, ls -l, git add): once a second entry of
   *   a directory listed in the last FRESH_MS is stat'ed and not known, the stats of the listing's
   *   other entries are asked at once, STAT_AHEAD_WINDOW at a time, each taken in flight or arrived.
   * An answer stands as the kernel's attributes do: taken once, at most FRESH_MS old, dropped when a
   * change of its path (or of a directory above it) begins; none is read ahead for a path being
   * changed (a write-back at flush or release included), or while a rename or rmdir is under way.
   * A name found missing is asked again, never answered from it. Never at the cache level `none`.
   */
  const statAhead = new Map<string, { answer: Promise<FuseStatResult | undefined>; at: number }>();
  /** Per directory, its last listing's names, when it came, and how many of its entries were stat'ed without an answer ahead. */
  const scans = new Map<string, { names: readonly string[]; at: number; misses: number; pending?: Set<string> }>();
  /** Per path, the changes of it under way; and how many renames or rmdirs are. */
  const changingPaths = new Map<string, number>();
  let reshaping = 0;
  const under = (key: string, p: string) => key === p || key.startsWith(`${p}/`);
  const dropAhead = (paths: readonly string[], below: boolean) => {
    for (const p of paths) statAhead.delete(p);
    if (below) for (const key of statAhead.keys()) if (paths.some((p) => under(key, p))) statAhead.delete(key);
  };
  /**
   * `ask` for an operation that changes `paths`: what was known ahead of them goes, and none is
   * read ahead while it runs (so nothing older than the change can come after it). `structural`: it
   * may move or remove a directory (rename, rmdir), so what was known below them goes too, and no
   * read-ahead is asked until it is done.
   */
  const askChange = <T>(paths: readonly string[], cb: Cb, run: () => Promise<T>, answer: (value: T) => void, structural = false) => {
    if (closed) return cb(EIO);
    for (const p of paths) changingPaths.set(p, (changingPaths.get(p) ?? 0) + 1);
    if (structural) {
      reshaping++;
      for (const dir of scans.keys()) if (paths.some((p) => under(dir, p))) scans.delete(dir);
    }
    dropAhead(paths, structural);
    const over = () => {
      for (const p of paths) {
        const left = (changingPaths.get(p) ?? 1) - 1;
        if (left > 0) changingPaths.set(p, left);
        else changingPaths.delete(p);
      }
      if (structural) reshaping--;
    };
    ask(cb, () => {
      let running: Promise<T>;
      try {
        running = run();
      } catch (error) {
        over();
        throw error;
      }
      return running.finally(over);
    }, answer);
  };
  const noteScan = (p: string, entries: readonly { name: string }[]) => {
    if (madeAttrsFor === 0 || kind !== "directory") return;
    if (scans.size >= SCANS_MAX) for (const [key, scan] of scans) if (performance.now() - scan.at >= madeAttrsFor) scans.delete(key);
    if (scans.size < SCANS_MAX && entries.length > 1 && entries.length <= SCAN_ENTRIES_MAX) scans.set(p, { names: entries.map((e) => e.name), at: performance.now(), misses: 0 });
  };
  /**
   * A getattr of `p` that found nothing ahead (it is asked itself, so the read-ahead leaves it
   * out): the second such in a directory just listed starts its read-ahead.
   */
  const missed = (p: string) => {
    const dir = parentOf(p);
    const scan = scans.get(dir);
    if (!scan || performance.now() - scan.at >= madeAttrsFor) return;
    if (scan.pending) return void scan.pending.delete(p);
    if (++scan.misses < 2) return;
    const prefix = dir === "/" ? "/" : `${dir}/`;
    const queue = new Set(scan.names.map((name) => prefix + name));
    queue.delete(p);
    scan.pending = queue;
    const next = (): void => {
      for (const q of queue) {
        queue.delete(q);
        if (closed || reshaping > 0) return;
        if (changingPaths.has(q) || statAhead.has(q) || tooLong(q)) continue;
        if (statAhead.size >= STAT_AHEAD_MAX) for (const [key, early] of statAhead) if (performance.now() - early.at >= madeAttrsFor) statAhead.delete(key);
        if (statAhead.size >= STAT_AHEAD_MAX) return;
        const answer = handlers.stat(rel(q)).catch(() => undefined);
        statAhead.set(q, { answer, at: performance.now() });
        void answer.then(next);
        return;
      }
    };
    for (let i = 0; i < STAT_AHEAD_WINDOW; i++) next();
  };

  const answerStat = (p: string, a: FuseStatResult, cb: Cb) => {
    if (a.kind === "stat") {
      if (kind === "file" && a.stat.kind === "directory") return cb(EIO); // The provider's mistake.
      return cb(0, statOf(a.stat, p));
    }
    // A file mount holding nothing yet reads as an empty file; the first write creates it.
    if (a.kind === "missing") return kind === "file" ? cb(0, { ...rootDir(), mode: 0o100600, nlink: 1, size: 0, blocks: 0 }) : cb(ENOENT);
    return cb(errnoOfMessage(a.message));
  };

  const ops = {
    init: (cb: Cb) => cb(0),
    getattr: (p: string | null, cb: Cb) => {
      if (!named(p)) return cb(ENOENT);
      if (kind === "directory" && p === "/") return cb(0, rootDir());
      if (tooLong(p)) return cb(ENAMETOOLONG);
      const early = statAhead.get(p);
      if (early) statAhead.delete(p);
      if (early && performance.now() - early.at < madeAttrsFor) {
        // Only attributes are taken: a name found missing is asked again (there is no negative cache).
        return ask(cb, async () => {
          const a = await early.answer;
          return a?.kind === "stat" ? a : handlers.stat(rel(p));
        }, (a) => answerStat(p, a, cb));
      }
      missed(p);
      ask(cb, () => handlers.stat(rel(p)), (a) => answerStat(p, a, cb));
    },
    fgetattr: (p: string | null, fd: number, cb: Cb) => ops.getattr(pathOf(p, fd) ?? null, cb),
    access: (_p: string, _mode: number, cb: Cb) => cb(0),
    statfs: (_p: string, cb: Cb) => cb(0, { bsize: 4096, frsize: 4096, blocks: 1 << 20, bfree: 1 << 19, bavail: 1 << 19, files: 1 << 20, ffree: 1 << 19, favail: 1 << 19, fsid: 0, flag: 0, namemax: 255 }),
    // The list is asked when the directory is opened: an answer "no directory there" must fail the
    // open with ENOENT (glibc's readdir reads an ENOENT from getdents as the end of the directory,
    // so failing the read would show an empty directory). The read then gives what was listed,
    // after `.` and `..`.
    readdir: (p: string | null, cb: Cb) => {
      if (!named(p)) return cb(ENOENT);
      const listedThere = listed.get(p);
      if (listedThere && listedThere.length > 0) return cb(0, ...direntries(listedThere.shift()!));
      ask(cb, () => handlers.list(rel(p)), (a) => {
        if (a.kind === "entries") {
          noteListing(p, a.entries);
          noteScan(p, a.entries);
          return cb(0, ...direntries(a.entries));
        }
        return cb(a.kind === "missing" ? ENOENT : errnoOfMessage(a.message));
      });
    },
    opendir: (p: string | null, _flags: number, fdCb: Cb, cb = withFd(fdCb)) =>
      !named(p) ? cb(ENOENT) : ask(cb, () => handlers.list(rel(p)), (a) => {
        if (a.kind !== "entries") return cb(a.kind === "missing" ? ENOENT : errnoOfMessage(a.message));
        noteListing(p, a.entries);
        noteScan(p, a.entries);
        const queue = listed.get(p) ?? [];
        queue.push(a.entries.map((e) => ({ name: e.name, kind: e.kind })));
        listed.set(p, queue);
        openDirs.set(p, (openDirs.get(p) ?? 0) + 1);
        const fd = ++fds;
        openedAt.set(fd, p);
        cb(0, fd);
      }),
    // A directory opened and never read (`open(O_DIRECTORY)` for fchdir, as `tar -C` does) leaves
    // its listing unread: once no open of that directory is left, whatever is unread goes.
    releasedir: (given: string | null, fd: number, cb: Cb) => {
      const p = pathOf(given, fd);
      openedAt.delete(fd);
      if (p === undefined) return cb(0);
      const left = (openDirs.get(p) ?? 1) - 1;
      if (left > 0) openDirs.set(p, left);
      else {
        openDirs.delete(p);
        listed.delete(p);
      }
      cb(0);
    },
    open: (p: string | null, _flags: number, fdCb: Cb, cb = withFd(fdCb)) => {
      if (!named(p)) return cb(ENOENT);
      const fd = ++fds;
      if (!sessions) {
        openedAt.set(fd, p);
        return cb(0, fd);
      }
      ask(cb, () => sessions.open(rel(p), false, fd), (code) => (code === 0 ? (openedAt.set(fd, p), cb(0, fd)) : cb(code)));
    },
    release: (given: string | null, fd: number, cb: Cb) => {
      const p = pathOf(given, fd);
      openedAt.delete(fd);
      if (!sessions) return cb(0);
      if (p === undefined) return cb(ENOENT);
      askChange([p], cb, () => sessions.release(rel(p), fd), (code) => cb(code));
    },
    flush: (given: string | null, fd: number, cb: Cb) => {
      const p = pathOf(given, fd);
      if (!sessions) return cb(0);
      if (p === undefined) return cb(ENOENT);
      askChange([p], cb, () => sessions.flush(rel(p), fd), (code) => cb(code));
    },
    fsync: (given: string | null, _datasync: boolean, fd: number, cb: Cb) => {
      const p = pathOf(given, fd);
      if (!sessions) return cb(0);
      if (p === undefined) return cb(ENOENT);
      askChange([p], cb, () => sessions.flush(rel(p), fd), (code) => cb(code));
    },
    read: (given: string | null, fd: number, buf: Buffer, len: number, pos: number, cb: Cb) => {
      const p = pathOf(given, fd);
      if (p === undefined) return cb(ENOENT);
      ask(cb, () => (sessions ? sessions.read(rel(p), fd, BigInt(pos), Math.min(len, FUSE_CHUNK_SIZE)) : handlers.read(rel(p), BigInt(pos), Math.min(len, FUSE_CHUNK_SIZE))), (a) => {
        if (a.kind === "data") {
          const n = Math.min(a.bytes.length, len);
          buf.set(a.bytes.subarray(0, n));
          return cb(n);
        }
        if (a.kind === "missing") return kind === "file" ? cb(0) : cb(ENOENT);
        return cb(errnoOfMessage(a.message));
      });
    },
    write: (given: string | null, fd: number, buf: Buffer, len: number, pos: number, cb: Cb) => {
      const p = pathOf(given, fd);
      if (p === undefined) return cb(ENOENT);
      // Nothing asked: it could never be carried (a transport with sessions marks its copy refused itself).
      if (!sessions && pos + len > maxFileBytes) return cb(EFBIG);
      // The kernel's buffer is reused once answered: the ask takes a copy.
      const bytes = Uint8Array.prototype.slice.call(buf, 0, len);
      askChange([p], cb, () => (sessions ? sessions.write(rel(p), fd, BigInt(pos), bytes) : handlers.write(rel(p), BigInt(pos), bytes)), (a) => cb(a.kind === "ok" ? len : ackCode(a)));
    },
    // A create is a write of zero bytes at 0 (fs-fuse.md §4.3), then the program's mode made to
    // hold (settleMode), so `cp`, `tar -x` and friends keep modes.
    create: (p: string | null, mode: number, fdCb: Cb, cb = withFd(fdCb)) => {
      if (!named(p)) return cb(ENOENT);
      if (tooLong(p)) return cb(ENAMETOOLONG);
      const fd = ++fds;
      askChange([p], cb, async () => {
        const made = await handlers.write(rel(p), 0n, new Uint8Array(0));
        if (made.kind !== "ok") return ackCode(made);
        await settleMode(p, mode);
        return sessions ? sessions.open(rel(p), true, fd) : 0;
      }, (code) => (code === 0 ? (openedAt.set(fd, p), cb(0, fd)) : (dropAhead([p], false), cb(code))));
    },
    unlink: (p: string | null, cb: Cb) => (!named(p) ? cb(ENOENT) : askChange([p], cb, () => handlers.remove(rel(p)), (a) => cb(ackCode(a)))),
    // A directory with entries is refused here (the remove ask would remove it, or fail with a
    // reason the program cannot read): ENOTEMPTY, as the program expects.
    rmdir: (p: string | null, cb: Cb) =>
      !named(p) ? cb(ENOENT) : askChange([p], cb, async (): Promise<number> => {
        const l = await handlers.list(rel(p));
        if (l.kind === "missing") return ENOENT;
        if (l.kind === "entries" && l.entries.length > 0) return ENOTEMPTY;
        return ackCode(await handlers.remove(rel(p)));
      }, (code) => {
        forgetDirs(p);
        cb(code);
      }, true),
    // The same for a rename over a directory: refused when that directory has entries.
    rename: (from: string | null, to: string | null, cb: Cb) => {
      if (!named(from) || !named(to)) return cb(ENOENT);
      if (tooLong(to)) return cb(ENAMETOOLONG);
      askChange([from, to], cb, async (): Promise<number> => {
        const there = await handlers.stat(rel(to));
        if (there.kind === "stat" && there.stat.kind === "directory") {
          const l = await handlers.list(rel(to));
          if (l.kind === "entries" && l.entries.length > 0) return ENOTEMPTY;
        }
        return ackCode(await handlers.rename(rel(from), rel(to)));
      }, (code) => {
        forgetDirs(from, to);
        cb(code);
      }, true);
    },
    // The same for a directory's mode.
    mkdir: (p: string | null, mode: number, cb: Cb) => {
      if (!named(p)) return cb(ENOENT);
      if (tooLong(p)) return cb(ENAMETOOLONG);
      askChange([p], cb, async () => {
        const made = await handlers.mkdir(rel(p));
        if (made.kind === "ok") await settleMode(p, mode);
        return made;
      }, (a) => {
        forgetDirs(p);
        cb(ackCode(a));
      });
    },
    truncate: (p: string | null, size: number, cb: Cb) => (!named(p) ? cb(ENOENT) : !sessions && size > maxFileBytes ? cb(EFBIG) : askChange([p], cb, () => handlers.truncate(rel(p), BigInt(size)), (a) => cb(ackCode(a)))),
    ftruncate: (given: string | null, fd: number, size: number, cb: Cb) => {
      const p = pathOf(given, fd);
      if (p === undefined) return cb(ENOENT);
      if (!sessions) return ops.truncate(p, size, cb);
      askChange([p], cb, () => sessions.truncate(rel(p), fd, BigInt(size)), (a) => cb(ackCode(a)));
    },
    chmod: (p: string | null, mode: number, cb: Cb) => setattr(p, { mode: mode & 0o7777 }, cb),
    chown: (p: string | null, u: number, g: number, cb: Cb) => {
      const attrs: { uid?: number; gid?: number } = {};
      if (u !== 0xffffffff && u !== -1) attrs.uid = u;
      if (g !== 0xffffffff && g !== -1) attrs.gid = g;
      setattr(p, attrs, cb);
    },
    // The times the program set, to the nanosecond: a setattr with the bit of each time it changes
    // only (fs-fuse.md §4.3), so `touch -m`/`touch -a` and `tar x` (atime UTIME_OMIT) are asked as
    // one time alone; UTIME_NOW is the proxy's current time. Nothing to change asks nothing.
    utimens: (p: string | null, atime: Timespec | number, mtime: Timespec | number, cb: Cb) => {
      // The unpatched binding: both times, in milliseconds.
      if (typeof atime === "number" || typeof mtime === "number") return setattr(p, { atime: toTime(Number(atime)), mtime: toTime(Number(mtime)) }, cb);
      const a = setTime(atime);
      const m = setTime(mtime);
      if (a === null || m === null) return cb(EINVAL);
      if (a === undefined && m === undefined) return cb(0);
      setattr(p, { ...(a ? { atime: a } : {}), ...(m ? { mtime: m } : {}) }, cb);
    },
    // The spec's FUSE family has no ask for links, FIFOs or devices: symbolic links and FIFOs are
    // "not implemented" (ENOSYS), a hard link "not permitted" (EPERM, as filesystems without them say).
    readlink: (_p: string, cb: Cb) => cb(ENOSYS),
    symlink: (_a: string, _b: string, cb: Cb) => cb(ENOSYS),
    link: (_a: string, _b: string, cb: Cb) => cb(EPERM),
    mknod: (_p: string, _mode: number, _dev: number, cb: Cb) => cb(ENOSYS),
  };
  function setattr(p: string | null, attrs: FuseAttrs, cb: Cb) {
    if (!named(p)) return cb(ENOENT);
    askChange([p], cb, () => handlers.setattr(rel(p), attrs), (a) => cb(ackCode(a)));
  }

  // The mount point by its held descriptor: the kernel resolves `/proc/self/fd/N` to the very
  // directory (or file) placed above, whatever its name leads to now, and records its real path.
  // libfuse 2.9 then mounts with mount(2) from this process (root; no `auto_unmount`, which would
  // hand the path to fusermount as a name); the watcher below does what auto_unmount did.
  const mountPoint = fdPath(placed.target);
  const fuse = new Fuse(mountPoint, ops, {
    timeout: false, // No timeouts: the kernel's own are the only clock (fs-fuse.md §2).
    fsname: "diverge-fuse",
    defaultPermissions: true,
    allowOther: uid === 0,
  });
  // The cache level's options and the transfer sizes, which fuse-native knows no flag for.
  const withOptions = fuse as unknown as { _fuseOptions(): string };
  const base = withOptions._fuseOptions.bind(fuse);
  withOptions._fuseOptions = () => {
    const opts = base();
    // The writeback cache only where a write may fail late (no whole-file limit, no proxy copies).
    const extra = mountOptionsFor(cacheLevel, options.revalidate ?? "byStat", libfuseMajor, !sessions && options.maxFileBytes === undefined);
    return opts ? `${opts},${extra.join(",")}` : `-o${extra.join(",")}`;
  };
  // The watcher starts before the mount is made, so there is no moment when the mount exists and
  // nothing would clear it: a proxy killed between mount(2) and the watcher's start left it behind.
  await fusectlReady();
  const watcher = startWatcher(placed.parent.dir, placed.parent.name, mountinfoEscape(placed.real), placed.made);
  let mountRoot: number;
  try {
    await new Promise<void>((resolvePromise, reject) =>
      fuse.mount((error) => (error ? reject(new MountError(`mount: ${error.message}`)) : resolvePromise())),
    );
    // The mount's own root, through the held parent (a mount point cannot be renamed meanwhile):
    // every later unmount acts on it by descriptor, never by name.
    mountRoot = await openFd(placed.parent.path, O_PATH | O_NOFOLLOW);
    if (mountIdOf(mountRoot) === mountIdOf(placed.parent.dir)) {
      await closeFd(mountRoot);
      throw new MountError(`mount: ${shown} was not mounted`);
    }
    // From now on the watcher knows the mount by its id (a rename above the mount point changes its path).
    watcher.mounted(mountIdOf(mountRoot));
  } catch (error) {
    await watcher.stop();
    // Not mounted: what was made for it goes (the target first; the held descriptor let go before).
    await closeFd(placed.target).catch(() => undefined);
    placed.target = -1;
    removeMade(placed.made);
    throw error;
  } finally {
    if (placed.target >= 0) await closeFd(placed.target).catch(() => undefined);
    await placed.parent.release();
  }
  // Known to the filesystem tree, which never enters a mount this process serves.
  const forgetServed = noteServedMount(path);
  if (libfuseMajor === 3) await widenReadahead(mountRoot);

  // A process that exits without closing: unmount at once, not when the watcher gets to it.
  const onExit = () => {
    try {
      execFileSync("umount", ["-l", "-c", "/proc/self/fd/3"], { stdio: ["ignore", "ignore", "ignore", mountRoot] });
      removeMade(placed.made);
    } catch {
      // the watcher still does it
    }
  };
  process.once("exit", onExit);

  let closing: Promise<void> | undefined;
  return {
    path,
    close() {
      closing ??= (async () => {
        process.removeListener("exit", onExit);
        forgetServed();
        closed = true;
        for (const cb of [...pending]) cb(EIO);
        await detachMount(mountRoot).catch(() => undefined);
        await watcher.stop();
        await closeFd(mountRoot).catch(() => undefined);
        // The mount point and the parents made for it, when still what was made and empty.
        removeMade(placed.made);
        // fuse-native's own close would unmount by name; only its thread's hold on the loop is let go here.
        (fuse as unknown as { _releaseThread(): void })._releaseThread();
      })();
      return closing;
    },
  };
}

const openFd = promisify(fs.open) as (path: string, flags: number, mode?: number) => Promise<number>;
const closeFd = promisify(fs.close);
const fstatFd = promisify(fs.fstat) as (fd: number) => Promise<fs.Stats>;
const mkdirAt = promisify(fs.mkdir) as (path: string, mode: number) => Promise<void>;
const errno = (error: unknown) => (error as NodeJS.ErrnoException).code ?? "EIO";
const { O_NOFOLLOW } = fsConstants;

/**
 * The kernel's read-ahead of the mount as large as one request (1 MiB with libfuse 3): the kernel
 * starts a FUSE mount's at its default (128 KiB) and an init cannot raise it, the mount's backing
 * device's `read_ahead_kb` can. A sequential read is then one ask per MiB. Best effort.
 */
async function widenReadahead(rootFd: number): Promise<void> {
  // The device from /proc/self/mountinfo, not an fstat: that would ask the root's attributes and
  // cache them (a dead server's mount would then look alive for the attributes' second).
  const mntId = String(mountIdOf(rootFd));
  const info = await readFile("/proc/self/mountinfo", "utf8").catch(() => "");
  const device = info.split("\n").find((l) => l.split(" ")[0] === mntId)?.split(" ")[2];
  if (!device || !/^\d+:\d+$/.test(device)) return;
  await fs.promises.writeFile(`/sys/class/bdi/${device}/read_ahead_kb`, String(MAX_TRANSFER[3] / 1024)).catch(() => undefined);
}

/** The mount a descriptor's object lies on (`mnt_id` in /proc/self/fdinfo). */
function mountIdOf(fd: number): number {
  const info = fs.readFileSync(`/proc/self/fdinfo/${fd}`, "utf8");
  return Number(/^mnt_id:\s*(\d+)/m.exec(info)?.[1] ?? -1);
}

/** Lazily unmounts the mount whose root descriptor `fd` holds (`umount -l` of the descriptor's path, not canonicalised). */
function detachMount(fd: number): Promise<void> {
  return new Promise((resolvePromise, reject) => {
    const child = spawn("umount", ["-l", "-c", "/proc/self/fd/3"], { stdio: ["ignore", "ignore", "ignore", fd] });
    const guard = setTimeout(() => child.kill("SIGKILL"), 30_000);
    child.once("error", (error) => {
      clearTimeout(guard);
      reject(error);
    });
    child.once("exit", (status) => {
      clearTimeout(guard);
      status === 0 ? resolvePromise() : reject(new Error("umount failed"));
    });
  });
}

const FUSECTL = "/sys/fs/fuse/connections";
let fusectl: Promise<boolean> | undefined;
/** Whether the FUSE control filesystem is there to abort a connection with (mounted once when it is not). */
function fusectlReady(): Promise<boolean> {
  return (fusectl ??= (async () => {
    if (!existsSync(FUSECTL)) return false;
    const info = await readFile("/proc/self/mountinfo", "utf8").catch(() => "");
    if (info.split("\n").some((line) => line.split(" ")[4] === FUSECTL)) return true;
    return new Promise<boolean>((r) => execFile("mount", ["-t", "fusectl", "fusectl", FUSECTL], { timeout: 10_000 }, (error) => r(!error)));
  })());
}

/** The FUSE connection (its device minor, the name under /sys/fs/fuse/connections) of the mount `mntId`, when it can be aborted. */
async function fuseConnectionOf(mntId: number): Promise<number | undefined> {
  if (!(await fusectlReady())) return undefined;
  const info = await readFile("/proc/self/mountinfo", "utf8").catch(() => "");
  const line = info.split("\n").find((l) => l.split(" ")[0] === String(mntId));
  const minor = Number(line?.split(" ")[2]?.split(":")[1]);
  return Number.isInteger(minor) && existsSync(`${FUSECTL}/${minor}/abort`) ? minor : undefined;
}

/** A path as /proc/self/mountinfo writes it: space, tab, newline and backslash in octal. */
function mountinfoEscape(path: string): string {
  return path.replace(/[ \t\n\\]/g, (c) => `\\${c.charCodeAt(0).toString(8).padStart(3, "0")}`);
}

/**
 * The watcher: a process of its own group, started before the mount is made, holding the mount
 * point's directory (descriptor 3) and told the mount's id once it is made. When its stdin ends
 * without the word that the mount was closed here, that is when this process ends however it ends
 * (SIGKILL included, where no exit handler runs, even in the middle of mounting), it finds the mount
 * in /proc/self/mountinfo (by its id, or before the id was told by its place: a `diverge-fuse` FUSE
 * mount at the mount point's path on the directory's mount), aborts its FUSE connection and lazily
 * unmounts it by the held directory and the name. The abort matters: every process started after
 * the mount inherits libfuse's /dev/fuse descriptor (libfuse 2.9 opens it without O_CLOEXEC), and
 * one of them waiting on the mount would otherwise hold the connection, and itself, forever. What
 * the program still asks then fails with ENOTCONN/ECONNABORTED.
 */
function startWatcher(parent: number, name: string, escapedPath: string, made: readonly Made[]): { mounted(id: number): void; stop(): Promise<void> } {
  // The directories made for the mount, deepest first, each by its held parent (descriptors 4…):
  // rmdir removes one only while empty. (A file made for a file mount is left: the watcher cannot
  // tell it is still the one made.)
  const dirs = made.map((m, i) => (m.kind === "directory" ? `rmdir /proc/self/fd/${4 + i}/${shellQuote(m.name)} 2>/dev/null; ` : "")).join("");
  // Lines: `mounted <id>` once the mount is made; `closed` once it was closed here (every waiting
  // operation answered, the mount detached). The end of stdin without `closed`: this process is gone.
  const script = [
    'id=""; while read -r word value; do [ "$word" = closed ] && exit 0; [ "$word" = mounted ] && id=$value; done',
    'on=""; while read -r key value; do [ "$key" = mnt_id: ] && on=$value; done < /proc/self/fdinfo/3',
    'found=""; dev=""',
    "while read -r mid pid mdev mroot point rest; do",
    '  if [ -n "$id" ]; then [ "$mid" = "$id" ] && { found=$mid; dev=$mdev; }',
    '  elif [ "$pid" = "$on" ] && [ "$point" = "$2" ]; then case "$rest" in *" - fuse diverge-fuse "*) found=$mid; dev=$mdev;; esac; fi',
    "done < /proc/self/mountinfo",
    'if [ -n "$found" ]; then',
    `  [ -e ${FUSECTL}/\${dev#*:}/abort ] && echo 1 > ${FUSECTL}/\${dev#*:}/abort 2>/dev/null`,
    '  umount -l -c "/proc/self/fd/3/$1" 2>/dev/null',
    "fi",
    `${dirs}exit 0`,
  ].join("\n");
  let child: ChildProcess;
  try {
    child = spawn("sh", ["-c", script, "diverge-fuse-watcher", name, escapedPath], { stdio: ["pipe", "ignore", "ignore", parent, ...made.map((m) => m.parent)], detached: true });
  } catch {
    return { mounted: () => {}, stop: async () => {} };
  }
  child.on("error", () => {});
  child.stdin?.on("error", () => {});
  const exited = new Promise<void>((r) => (child.exitCode !== null ? r() : child.once("exit", () => r())));
  child.unref();
  (child.stdin as unknown as { unref?: () => void } | null)?.unref?.();
  return {
    mounted(id: number) {
      child.stdin?.write(`mounted ${id}\n`);
    },
    async stop() {
      child.stdin?.end("closed\n");
      const guard = setTimeout(() => child.kill("SIGKILL"), 10_000);
      await exited;
      clearTimeout(guard);
    },
  };
}

interface PlacedMountPoint {
  /** The held directory the mount point is in. */
  readonly parent: Place;
  /** A descriptor (O_PATH) of the mount point itself: a directory or regular file, not a link (-1 once closed). */
  target: number;
  /** Its real path on this machine when placed (for the log and the filesystem tree). */
  readonly real: string;
  /** What the proxy made for this mount (the mount point, missing parents), deepest first. */
  readonly made: Made[];
}

/**
 * One directory or file the proxy made for a mount, named in its parent directory held by its own
 * descriptor (O_PATH) for the mount's life, with the identity it was made with.
 */
interface Made {
  readonly parent: number;
  readonly name: string;
  readonly kind: "file" | "directory";
  readonly dev: number;
  readonly ino: number;
}

/** Notes what was just made at `at` (still held), first in `made` (deepest first). */
async function noteMade(made: Made[], at: Place, kind: "file" | "directory"): Promise<void> {
  const stat = await fs.promises.lstat(at.path).catch(() => undefined);
  if (!stat || (kind === "file" ? !stat.isFile() : !stat.isDirectory())) return;
  const parent = await openFd(fdPath(at.dir), O_PATH | fsConstants.O_DIRECTORY);
  made.unshift({ parent, name: at.name, kind, dev: stat.dev, ino: stat.ino });
}

/**
 * Removes what the proxy made for a mount, deepest first, once the mount is gone (or was never
 * made): each only while it is still the very object made (same device and inode) and empty (a
 * directory without entries, a file of no bytes); what a program put there, or anything the proxy
 * did not make, stays. Synchronous: it also runs in the exit handler. Lets go of the descriptors.
 */
function removeMade(made: Made[]): void {
  for (const m of made.splice(0)) {
    const at = fdPath(m.parent, m.name);
    try {
      const stat = fs.lstatSync(at);
      if (stat.dev === m.dev && stat.ino === m.ino) {
        if (m.kind === "directory" && stat.isDirectory()) fs.rmdirSync(at);
        else if (m.kind === "file" && stat.isFile() && stat.size === 0) fs.unlinkSync(at);
      }
    } catch {
      // Not empty, busy (mounted again), or gone already: left as it is.
    }
    try {
      fs.closeSync(m.parent);
    } catch {
      // already closed
    }
  }
}

const shellQuote = (s: string) => `'${s.replace(/'/g, `'\\''`)}'`;

/**
 * Places the mount point beneath `rootPath` by descriptor (fs-fuse.md §3.2 step 2): missing parents
 * made one by one from held directories, the file or directory made by its held parent, then held
 * itself. A dead mount left there (its connection aborted, ENOTCONN) is cleared; a live one refuses.
 */
async function placeMountPoint(rootPath: string, components: readonly string[], kind: "file" | "directory", shown: string): Promise<PlacedMountPoint> {
  if (components.length === 0) throw new MountError("mount: the path names the root");
  const fail = (error: unknown): never => {
    if (error instanceof MountError) throw error;
    const code = error instanceof BeneathError ? error.code : errno(error);
    if (code === "EOUTSIDE") throw new MountError("mount: the path leads outside the root");
    throw new MountError(`mount: cannot place ${shown}: ${code}`);
  };
  let root: Beneath;
  try {
    root = await Beneath.open(rootPath);
  } catch (error) {
    return fail(error);
  }
  const made: Made[] = [];
  try {
    for (let i = 1; i < components.length; i++) {
      const at = await root.resolve(components.slice(0, i), { follow: true });
      try {
        const madeHere = await mkdirAt(at.path, 0o755).then(
          () => true,
          (error) => {
            if (errno(error) !== "EEXIST") throw error;
            return false;
          },
        );
        if (madeHere) await noteMade(made, at, "directory");
      } finally {
        await at.release();
      }
    }
    for (let attempt = 0; ; attempt++) {
      const parent = await root.resolve(components, { follow: true });
      try {
        let target: number;
        try {
          target = await openFd(parent.path, O_PATH | O_NOFOLLOW);
        } catch (error) {
          if (errno(error) !== "ENOENT" || attempt > 3) throw error;
          const madeHere =
            kind === "file"
              ? await openFd(parent.path, fsConstants.O_CREAT | fsConstants.O_EXCL | fsConstants.O_WRONLY | O_NOFOLLOW, 0o600).then(closeFd).then(() => true, notExists)
              : await mkdirAt(parent.path, 0o700).then(() => true, notExists);
          if (madeHere) await noteMade(made, parent, kind);
          await parent.release();
          continue;
        }
        const mounted = mountIdOf(target) !== mountIdOf(parent.dir);
        const stat = await fstatFd(target).catch((error) => {
          if (errno(error) === "ENOTCONN") return undefined;
          throw error;
        });
        if (!stat || mounted) {
          if (stat || !mounted || attempt > 3) {
            await closeFd(target);
            throw new MountError(`${shown} is already a mount`);
          }
          // A dead FUSE mount (its server gone): its connection aborted (whatever still waits on it
          // is answered), the mount cleared, then the place made again.
          const connection = await fuseConnectionOf(mountIdOf(target));
          if (connection !== undefined) await fs.promises.writeFile(`${FUSECTL}/${connection}/abort`, "1").catch(() => undefined);
          await detachMount(target).catch(() => undefined);
          await closeFd(target);
          await parent.release();
          continue;
        }
        if (kind === "file" ? !stat.isFile() : !stat.isDirectory()) {
          await closeFd(target);
          throw new MountError(`mount: ${shown} is not a ${kind === "file" ? "regular file" : "directory"}`);
        }
        const real = await fs.promises.readlink(fdPath(target));
        return { parent, target, real, made };
      } catch (error) {
        await parent.release();
        throw error;
      }
    }
  } catch (error) {
    // Refused: nothing made for it is left.
    removeMade(made);
    return fail(error);
  } finally {
    await root.close();
  }
}

/** false when the error is EEXIST (someone else made it meanwhile), else the error again. */
function notExists(error: unknown): false {
  if (errno(error) !== "EEXIST") throw error;
  return false;
}

/** Whether something is mounted exactly at `path` (from /proc/self/mountinfo). */
export async function isMountPoint(path: string): Promise<boolean> {
  const info = await readFile("/proc/self/mountinfo", "utf8").catch(() => "");
  const target = resolve(path);
  return info.split("\n").some((line) => unescapeMount(line.split(" ")[4] ?? "") === target);
}

function unescapeMount(field: string): string {
  return field.replace(/\\([0-7]{3})/g, (_, o: string) => String.fromCharCode(parseInt(o, 8)));
}
