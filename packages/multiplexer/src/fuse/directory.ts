// A real backend for FUSE handlers: a directory on this machine serves every ask, optionally
// read-only. Used by tests here and meant as the provider's default (`--mount path=dir[:ro]`).
//
// Confinement: the program on the other side of the mount controls every name under `dir`, and
// may make any of them a symbolic link, or swap a directory for one while an ask is served. So no
// ask ever follows a link: every path is resolved beneath `dir` one component at a time by
// descriptor (`../beneath.ts`), a link met on the way fails the ask (the FUSE family has no link
// ask to serve it otherwise), and a link in the last component is served as a link: it stats as a
// file whose content is its target (what `readlink` gives), reads as that text, and is renamed or
// removed itself; a write, truncate or chmod of it is refused. Nothing outside `dir` is ever opened,
// stat'ed or changed.
import { spawn } from "node:child_process";
import { constants } from "node:fs";
import * as fs from "node:fs";
import { promisify } from "node:util";
import { atOnce, Beneath, fdPath, isName, openAt, placeOf, readdirAt, withObject, type Place } from "../beneath.js";
import type { FuseAckResult, FuseHandlers, FuseTime } from "./handlers.js";

export interface DirectoryHandlersOptions {
  /** Every mutation answered ReadOnly (the program sees EROFS). */
  readonly readonly?: boolean;
}

// Metadata calls (an lstat, an open, a close, a mkdir, an unlink, a rename, …) are made
// synchronously and handed back as promises: a few µs each on the directory served, where a round
// trip through the thread pool costs a hand-off to a pool thread and back to the loop per call
// (issue 36; the path walk in ../beneath.ts does the same). Small reads and writes too (below).
const lstat = (path: string, options: { bigint: true }): Promise<fs.BigIntStats> => {
  try {
    // No entry is common (every lookup of a name about to be made): told without an exception built.
    const stat = fs.lstatSync(path, { ...options, throwIfNoEntry: false });
    return stat ? Promise.resolve(stat) : Promise.reject(NO_ENTRY);
  } catch (error) {
    return Promise.reject(error);
  }
};
/** One error for every missing entry (read only by its code): no stack is captured per lookup. */
const NO_ENTRY: Error = Object.freeze(Object.assign(new Error("ENOENT: no such file or directory"), { code: "ENOENT" }));
const closeFd = atOnce((fd: number) => fs.closeSync(fd));
const mkdir = atOnce((path: string) => fs.mkdirSync(path));
const rmdir = atOnce((path: string) => fs.rmdirSync(path));
const unlink = atOnce((path: string) => fs.unlinkSync(path));
const rename = atOnce((from: string, to: string) => fs.renameSync(from, to));
const readlink = atOnce((path: string) => fs.readlinkSync(path));
const lchown = atOnce((path: string, uid: number, gid: number) => fs.lchownSync(path, uid, gid));
const lutimes = atOnce((path: string, atime: number, mtime: number) => fs.lutimesSync(path, atime, mtime));
const chmodFd = atOnce((fd: number, mode: number) => fs.chmodSync(fdPath(fd), mode));
const ftruncate = atOnce((fd: number, size: number) => fs.ftruncateSync(fd, size));
/**
 * Reads and writes up to this size are made at once on the loop too: from and to the page cache
 * they take a few µs. Larger ones, which may wait on the disk for longer, stay on the thread pool.
 * The descriptors are O_NONBLOCK, so a FIFO answers EAGAIN rather than holding the loop.
 */
const AT_ONCE_BYTES = 64 * 1024;
const readPooled = promisify(fs.read);
const writePooled = promisify(fs.write);
const readFd = (fd: number, buffer: Buffer, offset: number, length: number, position: number): Promise<{ bytesRead: number }> =>
  length <= AT_ONCE_BYTES ? atOnce(() => ({ bytesRead: fs.readSync(fd, buffer, offset, length, position) }))() : readPooled(fd, buffer, offset, length, position);
const writeFd = (fd: number, buffer: Uint8Array, offset: number, length: number, position: number): Promise<{ bytesWritten: number }> =>
  length <= AT_ONCE_BYTES ? atOnce(() => ({ bytesWritten: fs.writeSync(fd, buffer, offset, length, position) }))() : writePooled(fd, buffer, offset, length, position);

const message = (error: unknown) => (error as NodeJS.ErrnoException).code ?? (error as Error).message;
const missing = (error: unknown) => ["ENOENT", "ENOTDIR"].includes((error as NodeJS.ErrnoException).code ?? "");
const time = (ns: bigint): FuseTime => ({ secs: ns / 1_000_000_000n, nanos: Number(ns % 1_000_000_000n) });
const seconds = (t: FuseTime) => Number(t.secs) + t.nanos / 1e9;
const nsOf = (t: FuseTime) => t.secs * 1_000_000_000n + BigInt(t.nanos);

/**
 * Sets the times given at `place` (the link itself, never its target) exactly to the nanosecond:
 * Node's utimes takes seconds as a double (exact to ~240 ns today), so a time it cannot set
 * exactly is set again by coreutils' `touch -h -d @S.N` (which calls utimensat with the timespec),
 * the held directory handed to it as its descriptor 3.
 */
async function setTimes(place: Place, atime: FuseTime | undefined, mtime: FuseTime | undefined): Promise<void> {
  const now = await lstat(place.path, { bigint: true });
  await lutimes(place.path, atime ? seconds(atime) : Number(now.atimeNs) / 1e9, mtime ? seconds(mtime) : Number(now.mtimeNs) / 1e9);
  const after = await lstat(place.path, { bigint: true });
  const wanted: Array<[string, bigint, bigint]> = [
    ["-a", atime ? nsOf(atime) : now.atimeNs, after.atimeNs],
    ["-m", mtime ? nsOf(mtime) : now.mtimeNs, after.mtimeNs],
  ];
  for (const [flag, want, got] of wanted) {
    if (want === got) continue;
    const stamp = `@${want / 1_000_000_000n}.${String(want % 1_000_000_000n).padStart(9, "0")}`;
    await new Promise<void>((resolve, reject) => {
      const failed = () => reject(Object.assign(new Error("the times could not be set"), { code: "EIO" }));
      const child = spawn("touch", ["-h", "-c", flag, "-d", stamp, `/proc/self/fd/3/${place.name}`], { stdio: ["ignore", "ignore", "ignore", place.dir] });
      child.once("error", failed);
      child.once("exit", (status) => (status === 0 ? resolve() : failed()));
    });
  }
}
const linkThere = () => Object.assign(new Error("a symbolic link is there"), { code: "ELOOP" });

/** `dir` opened, held while the name `dir` still leads to it, with the asks using it now. */
interface HeldRoot {
  readonly beneath: Beneath;
  readonly dev: bigint;
  readonly ino: bigint;
  users: number;
  /** Replaced (`dir` leads elsewhere now): closed once its last user is done. */
  retired: boolean;
}

/**
 * Handlers serving `dir`: each ask's path (relative, `/`-separated) is a path under it. A path
 * with an empty, `.` or `..` component is refused (the proxy never sends one). `dir` itself is
 * looked up again for every ask (links in `dir` are the provider's own choice and followed): one
 * stat, and the directory held open is used while the name still leads to it, else `dir` is
 * opened afresh (a realpath, an open and a close per ask cost more than the ask's own lstat).
 */
export function directoryHandlers(dir: string, options: DirectoryHandlersOptions = {}): FuseHandlers {
  const parts = (path: string) => (path === "" ? [] : path.split("/"));
  // The held directory lives in a box that every handler reaches through `at`, so that once no
  // handler can be called any more (the mount they served is gone, and any copy of them with it)
  // its descriptor is closed too (`releaseHeld`, keyed on `at`, not on the object returned, which a
  // caller may spread into another and drop).
  const box: { held?: HeldRoot } = {};
  const leave = (root: HeldRoot) => {
    if (--root.users === 0 && root.retired) void root.beneath.close().catch(() => undefined);
  };
  /** The held root for one ask (the caller `leave`s it), opened again when `dir` now names another directory. */
  const enter = async (): Promise<HeldRoot> => {
    const named = fs.statSync(dir, { bigint: true, throwIfNoEntry: false });
    const held = box.held;
    if (held && named && named.dev === held.dev && named.ino === held.ino) {
      held.users++;
      return held;
    }
    const beneath = await Beneath.open(dir);
    // What was opened, not what the stat saw: the next ask's stat is compared with it.
    const opened = fs.fstatSync(beneath.fd, { bigint: true });
    const fresh: HeldRoot = { beneath, dev: opened.dev, ino: opened.ino, users: 1, retired: false };
    // The one held before now (another ask may have replaced it meanwhile) is let go.
    const before = box.held;
    if (before) {
      before.retired = true;
      if (before.users === 0) void before.beneath.close().catch(() => undefined);
    }
    box.held = fresh;
    return fresh;
  };
  /** Runs `use` on the place `path` names: its directory held, its last component unresolved. */
  const at = async <T>(path: string, use: (place: Place) => Promise<T>): Promise<T> => {
    if (path === "") {
      // The mount itself: `dir` (a directory, or the file of a file mount).
      const top = await placeOf(dir);
      try {
        return await use(top);
      } finally {
        await top.release();
      }
    }
    const root = await enter();
    try {
      const names = parts(path);
      // A name in `dir` itself is used by its path under `dir`: the part before it is the
      // provider's own (looked up again per ask, as above), and what follows the name is never
      // followed, so nothing the program controls is resolved on the way. That spares a duplicate
      // of the held directory, its close and a lookup through /proc/self/fd (~35 µs an ask here).
      if (names.length === 1 && isName(names[0]!)) return await use(inDir(root.beneath.fd, names[0]!));
      return await root.beneath.at(names, use, { last: "keep" });
    } finally {
      leave(root);
    }
  };
  /** The place of `name` in `dir`: the held directory (for what needs a descriptor) and the name's path under `dir`. */
  const inDir = (held: number, name: string): Place => ({ dir: held, name, path: `${dir}/${name}`, release: () => Promise.resolve() });
  const mutate = async (run: () => Promise<unknown>): Promise<FuseAckResult> => {
    if (options.readonly) return { kind: "readOnly" };
    try {
      await run();
      return { kind: "ok" };
    } catch (error) {
      return { kind: "error", message: message(error) };
    }
  };
  /** Runs `use` on a descriptor of the file at `place`, opened with `flags` (a link there fails). */
  const withFile = async <T>(place: Place, flags: number, use: (fd: number) => Promise<T>): Promise<T> => {
    const fd = await openAt(place, flags, 0o644).catch((error: NodeJS.ErrnoException) => {
      throw error.code === "ELOOP" ? linkThere() : error;
    });
    try {
      return await use(fd);
    } finally {
      await closeFd(fd);
    }
  };
  const served: FuseHandlers = {
    read: (path, offset, length) =>
      at(path, async (place) => {
        const stat = await lstat(place.path, { bigint: true });
        if (stat.isSymbolicLink()) {
          const target = Buffer.from(await readlink(place.path));
          return { kind: "data" as const, bytes: new Uint8Array(target.subarray(Math.min(Number(offset), target.length), Math.min(Number(offset) + length, target.length))) };
        }
        return withFile(place, constants.O_RDONLY | constants.O_NONBLOCK, async (fd) => {
          // Room for what the file holds past `offset` (by the size just seen), not for all that was
          // asked: a whole-file read asks 2 MiB of a 1 KiB file. Grown should the file be longer by
          // now, so the read still ends only at the end of the file or at `length`.
          const held = stat.size > offset ? stat.size - offset : 0n;
          let bytes = Buffer.allocUnsafe(Math.max(1, Number(held < BigInt(length) ? held : BigInt(length))));
          let filled = 0;
          while (filled < length) {
            if (filled === bytes.length) {
              // Full at the size seen: whether the file goes on is read into a small buffer first, so
              // a file that did not grow (the usual case) is not copied into a larger one.
              const more = Buffer.allocUnsafe(Math.min(length - filled, 64 * 1024));
              const { bytesRead: read } = await readFd(fd, more, 0, more.length, Number(offset) + filled);
              if (read === 0) break;
              const grown = Buffer.allocUnsafe(Math.min(length, Math.max(bytes.length * 2, filled + read)));
              bytes.copy(grown, 0, 0, filled);
              more.copy(grown, filled, 0, read);
              bytes = grown;
              filled += read;
              continue;
            }
            const { bytesRead: read } = await readFd(fd, bytes, filled, bytes.length - filled, Number(offset) + filled);
            if (read === 0) break;
            filled += read;
          }
          // Only the bytes read are handed on (the buffer is not zeroed).
          return { kind: "data" as const, bytes: bytes.subarray(0, filled) };
        });
      }).catch((error) => (missing(error) ? { kind: "missing" as const } : { kind: "error" as const, message: message(error) })),
    write: (path, offset, bytes) =>
      mutate(() =>
        at(path, (place) =>
          withFile(place, constants.O_WRONLY | constants.O_CREAT, async (fd) => {
            let written = 0;
            while (written < bytes.length) written += (await writeFd(fd, bytes, written, bytes.length - written, Number(offset) + written)).bytesWritten;
          }),
        ),
      ),
    list: (path) =>
      at(path, async (place) => {
        const entries = await readdirAt(place);
        return { kind: "entries" as const, entries: entries.map((e) => ({ name: e.name, kind: e.isDirectory() ? ("directory" as const) : ("file" as const) })) };
      }).catch((error) => (missing(error) || (error as NodeJS.ErrnoException).code === "ELOOP" ? { kind: "missing" as const } : { kind: "error" as const, message: message(error) })),
    remove: (path) =>
      mutate(() =>
        at(path, async (place) => {
          if ((await lstat(place.path, { bigint: true })).isDirectory()) await rmdir(place.path);
          else await unlink(place.path);
        }),
      ),
    rename: (from, to) =>
      mutate(() =>
        at(from, (source) =>
          at(to, async (target) => {
            const there = await lstat(target.path, { bigint: true }).catch(() => undefined);
            if (there?.isDirectory() && !(await lstat(source.path, { bigint: true })).isDirectory()) throw Object.assign(new Error("a directory is there"), { code: "EISDIR" });
            await rename(source.path, target.path);
          }),
        ),
      ),
    mkdir: (path) => mutate(() => at(path, (place) => mkdir(place.path))),
    stat: (path) =>
      at(path, async (place) => {
        const s = await lstat(place.path, { bigint: true });
        const directory = s.isDirectory();
        const size = directory ? 0n : s.isSymbolicLink() ? BigInt(Buffer.byteLength(await readlink(place.path))) : s.size;
        return {
          kind: "stat" as const,
          stat: {
            kind: directory ? ("directory" as const) : ("file" as const),
            size,
            mode: Number(s.mode & 0o7777n),
            uid: Number(s.uid),
            gid: Number(s.gid),
            atime: time(s.atimeNs),
            mtime: time(s.mtimeNs),
            ctime: time(s.ctimeNs),
          },
        };
      }).catch((error) => (missing(error) ? { kind: "missing" as const } : { kind: "error" as const, message: message(error) })),
    truncate: (path, size) => mutate(() => at(path, (place) => withFile(place, constants.O_WRONLY | constants.O_CREAT, (fd) => ftruncate(fd, Number(size))))),
    setattr: (path, attrs) =>
      mutate(() =>
        at(path, async (place) => {
          if (attrs.mode !== undefined) await withObject(place, (fd) => chmodFd(fd, attrs.mode!)).catch((error: NodeJS.ErrnoException) => {
            throw error.code === "ELOOP" ? linkThere() : error;
          });
          // lchown and lutimes act on a link itself, never on its target.
          if (attrs.uid !== undefined || attrs.gid !== undefined) await lchown(place.path, attrs.uid ?? -1, attrs.gid ?? -1);
          if (attrs.atime || attrs.mtime) await setTimes(place, attrs.atime, attrs.mtime);
        }),
      ),
  };
  releaseHeld.register(at, box);
  return served;
}

/** Closes the directory a collected set of handlers held (no ask can use it any more). */
const releaseHeld = new FinalizationRegistry<{ held?: HeldRoot }>((box) => {
  if (box.held) void box.held.beneath.close().catch(() => undefined);
});
