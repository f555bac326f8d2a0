// filesystem::tree and /filesystem/tree: a Snapshot of the tree under the root, then one delta per
// change (complete values; a rename is Removed then Inserted), a fresh Snapshot after lost events.
//
// Watching is plain inotify, one watch per directory (`fs.watch`, not recursive), armed on a
// directory just before it is listed (fs-fuse.md §5.2: armed before the walk, so a change during the
// walk arrives as a delta after the Snapshot). A plain watch delivers within a millisecond; it holds
// no tree of its own (the native recursive watcher this replaced kept ~22 MB for 100,000 files and
// added a 50 ms debounce). A directory that cannot be watched (the user's inotify watches used up,
// ENOSPC) is sent with `changes: false`, as is everything under it (§5.2 step 5). inotify's queue
// overflow is not reported by Node's watch; the recursive watcher dropped it too.
//
// The Snapshot is never held as objects: the walk writes each entry's postcard into the message as
// it goes (the codec's head writers put a directory's fields and count before its entries), and the
// watch remembers the tree as a compact shadow (`shadow.ts`). So what the proxy holds for a Snapshot
// is the message (and its one copy into a frame), the shadow, one directory's listing at a time and
// a watch per directory; beyond what any Node walk of the tree costs, that is 0–2.4× the message for
// files in large directories, and ~1.7 KB a directory for many small ones (bench case 5).
//
// The walk never names a path: it holds each directory by descriptor (O_PATH) from the root down,
// lists it through that descriptor, stats each entry as the held directory's name with lstat and
// enters a subdirectory only by opening it O_NOFOLLOW from its parent's descriptor, so a directory
// swapped for a link mid-walk is listed as the link (or not at all), never followed out of the root.
// Watches are armed through the held descriptor too (`/proc/self/fd/<fd>`), never by name. Stats run
// a bounded number at a time (STAT_CONCURRENCY) and subdirectories one at a time. A FUSE mount this
// process serves is never entered nor stat'ed (a dead provider's mount would hang the walk): it is
// left out, as the provider's ignore list should have it. The root's identity (birth time, device,
// inode) is checked on every batch and every ROOT_CHECK_MS: a root removed or replaced ends the tree
// with `watch`.
import { constants } from "node:fs";
import * as fs from "node:fs";
import { lstat, readdir, readlink, stat } from "node:fs/promises";
import { dirname, basename, isAbsolute, join, relative, sep } from "node:path";
import { promisify } from "node:util";
import {
  decodeFiletreeFrame,
  encodeFiletreeFrame,
  readFiletreeNode,
  writeFiletreeFrameSnapshotHead,
  writeFiletreeNode,
  writeFiletreeNodeDirectoryHead,
  type FiletreeFrame,
  type FiletreeNode,
} from "@diverge/codec";
import { PostcardReader, PostcardWriter } from "@diverge/codec/runtime";
import { Beneath, BeneathError, O_PATH, fdPath } from "@diverge/multiplexer/beneath";
import { servedMountPoints } from "../fuse/served.js";
import { FsError, isName, osText } from "./path-checks.js";
import { DirShadow, dirSig, fileSig, identityOf, linkSig, type ShadowEntry } from "./shadow.js";

const openFd = promisify(fs.open) as (path: string, flags: number) => Promise<number>;
const closeFd = promisify(fs.close);
const fstat = promisify(fs.fstat) as (fd: number) => Promise<fs.Stats>;

/** Entries stat'ed at once during a walk. */
export const STAT_CONCURRENCY = 32;
/** Changes seen by the inotify watches, and watches open now, every tree together (for the tests). */
export const watchStats = { events: 0, open: 0 };
/** How often the root's identity is checked when no event comes. */
const ROOT_CHECK_MS = 1000;
export const ROOT_REPLACED = "the root was removed or replaced";
/** Past the message limit a Snapshot's bytes are only counted (to say its size), in steps of this many. */
const COUNT_STEP = 1 << 20;
const FRAME_ID = "filetree/frame";

/** The container's own filesystems, always left out (fs-fuse.md §5.1). */
export const ALWAYS_LEFT_OUT: readonly (readonly string[])[] = [["proc"], ["sys"], ["dev"]];

export interface TreeOptions {
  /** Paths (component arrays from the root) left out of every snapshot and never watched. Invalid entries are dropped. */
  readonly ignore?: unknown;
  /** Stops the watch; the iteration then ends without error. */
  readonly signal?: AbortSignal;
  /** Frames held for a slow reader before they are dropped for one fresh Snapshot. */
  readonly maxQueued?: number;
  /** Directories watched at most; past it a directory is sent with `changes: false`, and everything under it. Default: no cap but the kernel's. */
  readonly maxWatches?: number;
}

/** Options of a watch whose Snapshots come as the transport's messages. */
export interface EncodedTreeOptions extends TreeOptions {
  /** The bytes a transport's message puts before a frame (`messageHead`); a Snapshot's message starts with them. */
  readonly head: Uint8Array;
  /** The largest message (head and frame) the transport sends: a larger Snapshot or delta ends the tree (`tooLarge`). */
  readonly maxBytes: number;
}

/**
 * A Snapshot as the transport's whole message: `head`, then the postcard FiletreeFrame, in the
 * pieces it was written in (never copied into one buffer: a sender sends them as one message).
 */
export interface EncodedSnapshot {
  readonly variant: "EncodedSnapshot";
  readonly parts: readonly Uint8Array[];
  /** The message's length: the parts' together. */
  readonly length: number;
}

/** An encoded Snapshot's message in one buffer (for a reader of values, not a transport). */
export function joined(snapshot: EncodedSnapshot): Uint8Array {
  const out = new Uint8Array(snapshot.length);
  let at = 0;
  for (const part of snapshot.parts) {
    out.set(part, at);
    at += part.length;
  }
  return out;
}
export type TreeDelta = Exclude<FiletreeFrame, { variant: "Snapshot" }>;
export type TreeOutput = TreeDelta | EncodedSnapshot;

/**
 * The bytes that `encodeMessage` (a transport's generated encoder of a message carrying one
 * FiletreeFrame) writes before the frame's own postcard, found from the encoders themselves.
 */
export function messageHead(encodeMessage: (frame: FiletreeFrame) => Uint8Array): Uint8Array {
  const empty: FiletreeFrame = { variant: "Snapshot", children: [] };
  const whole = encodeMessage(empty);
  const frame = encodeFiletreeFrame(empty);
  const head = whole.slice(0, whole.length - frame.length);
  if (!Buffer.from(whole.subarray(head.length)).equals(frame)) throw new Error("the message does not end with its frame");
  return head;
}

/**
 * The error that ends a tree whose next frame is larger than the provider's message limit:
 * fs-fuse.md has no way to split a frame, so the tree ends (`walk` for a Snapshot, `map` for a
 * delta), and the provider may ask again with more of the tree in its ignore list.
 */
export function tooLarge(variant: FiletreeFrame["variant"], bytes: number, limit: number): FsError {
  const what = variant === "Snapshot" ? "snapshot" : `${variant} frame`;
  return new FsError(variant === "Snapshot" ? "walk" : "map", `the ${what} is ${bytes} bytes, more than the message limit of ${limit} bytes; leave part of the tree out (ignore)`);
}

/** The left-out paths as `a/b` keys of components (the same list as `leftOut`, relative). */
function leftOutKeys(ignore: unknown): string[] {
  const out = ALWAYS_LEFT_OUT.map((c) => c.join("/"));
  if (Array.isArray(ignore)) {
    for (const entry of ignore) if (Array.isArray(entry) && entry.length > 0 && entry.every(isName)) out.push((entry as string[]).join("/"));
  }
  return out;
}

/**
 * A directory's identity (birth time, device, inode; a number, so that 100,000 directories hold no
 * strings for it): ext4 gives a directory made again the inode just freed, so `dev:ino` alone cannot
 * tell the two apart; the birth time, to the sub-millisecond, does.
 */
const identity = (s: fs.Stats) => identityOf(s.birthtimeMs, s.dev, s.ino);
const isDir = (entry: ShadowEntry | undefined): entry is DirShadow => entry instanceof DirShadow;
/** Whether two shadow entries say the same node (a directory's own fields, not its entries'). */
const sameNode = (a: ShadowEntry, b: ShadowEntry): boolean => (isDir(a) ? isDir(b) && a.sig === b.sig : !isDir(b) && a === b);

/** Runs `run(i)` for i in [0, count), at most `limit` at once. */
async function forEachLimit(count: number, limit: number, run: (i: number) => Promise<void>): Promise<void> {
  let next = 0;
  const worker = async () => {
    while (next < count) await run(next++);
  };
  await Promise.all(Array.from({ length: Math.min(limit, count) }, worker));
}

/** Equal second counts and sizes share one bigint (a checkout's files share a few dozen times). */
const interned = new Map<number, bigint>();
function big(value: number): bigint {
  let out = interned.get(value);
  if (out === undefined) {
    if (interned.size >= 4096) interned.clear();
    interned.set(value, (out = BigInt(value)));
  }
  return out;
}

/** The paths to leave out, as real absolute paths under `root`: the listed ones that are valid, and /proc, /sys, /dev. */
export function leftOut(root: string, ignore: unknown): string[] {
  const out = ALWAYS_LEFT_OUT.map((c) => join(root, ...c));
  if (Array.isArray(ignore)) {
    for (const entry of ignore) {
      // An empty entry is dropped (never the root); an entry with a component that is not a name is dropped too.
      if (Array.isArray(entry) && entry.length > 0 && entry.every(isName)) out.push(join(root, ...(entry as string[])));
    }
  }
  return out;
}

/**
 * Watches the tree under `root` (a real path), its Snapshots as transport messages (`options.head`
 * then the frame). The first output is a Snapshot; the iteration ends when stopped (signal or
 * `return()`), or throws FsError `watch` / `walk` / `map` when the watch cannot exist, the walk of the
 * root dies or a frame is over `maxBytes`.
 */
export function watchTreeEncoded(root: string, options: EncodedTreeOptions): AsyncIterableIterator<TreeOutput> {
  return new TreeWatch(root, options, options.head, options.maxBytes);
}

/** Watches the tree under `root` (a real path), every frame as a value (Snapshots decoded: for tests and tools, not transports). */
export function watchTree(root: string, options: TreeOptions = {}): AsyncIterableIterator<FiletreeFrame> {
  const watch = new TreeWatch(root, options, new Uint8Array(0), Infinity);
  const value = (output: TreeOutput): FiletreeFrame => (output.variant === "EncodedSnapshot" ? decodeFiletreeFrame(joined(output)) : output);
  return {
    [Symbol.asyncIterator]() {
      return this;
    },
    next: async () => {
      const result = await watch.next();
      return result.done ? result : { value: value(result.value), done: false };
    },
    return: async () => {
      await watch.return();
      return { value: undefined, done: true };
    },
  };
}

/** One Snapshot of the tree under `root` (a real path), walked as a watch's is, with no watch. */
export async function snapshotOf(root: string, options: Pick<TreeOptions, "ignore"> = {}): Promise<{ kind: "Snapshot"; children: FiletreeNode[] }> {
  const frame = decodeFiletreeFrame(await new TreeWatch(root, options, new Uint8Array(0), Infinity).once());
  return { kind: "Snapshot", children: frame.variant === "Snapshot" ? frame.children : [] };
}

/** Where a walk writes its postcard: counted past the limit instead of kept. */
class Sink {
  w = new PostcardWriter(FRAME_ID);
  private counted = 0;
  constructor(
    private readonly head: Uint8Array,
    private readonly limit: number,
  ) {}
  /** The message's bytes so far: head and postcard. */
  get bytes(): number {
    return this.head.length + this.counted + this.w.byteLength;
  }
  get over(): boolean {
    return this.bytes > this.limit;
  }
  /** Once over the limit, what is written is only counted (the tree ends saying its size), never held. */
  settle(): void {
    if (this.over && this.w.byteLength >= COUNT_STEP) {
      this.counted += this.w.byteLength;
      this.w = new PostcardWriter(FRAME_ID);
    }
  }
  /** The message as the pieces written: the head, then the postcard (no copy). */
  snapshot(): EncodedSnapshot {
    return { variant: "EncodedSnapshot", parts: this.head.length > 0 ? [this.head, ...this.w.parts()] : this.w.parts(), length: this.bytes };
  }
}

/** A walk was stopped (the watch ended, or a delta passed the limit): nothing it wrote is used. */
class WalkStopped extends Error {}

/** An entry of a listed directory, by index. */
const FILE = 1;
const DIRECTORY = 2;
const LINK = 3;
interface Listing {
  readonly names: string[];
  /** 0 (left out, or gone before its stat), FILE, DIRECTORY or LINK. */
  readonly kinds: Uint8Array;
  readonly sizes: Float64Array;
  readonly births: Float64Array;
  readonly mtimes: Float64Array;
  readonly targets: Map<number, string[]>;
  count: number;
}

/** A directory's inotify watch, kept on the watcher itself (one shared listener, no closure per directory). */
interface HeldWatch {
  readonly tree: TreeWatch;
  readonly path: string;
  readonly id: number;
  readonly watcher: fs.FSWatcher;
  /** The walk that last saw this directory (stale ones are closed after a walk of what held them). */
  walk: number;
}
const HELD = Symbol("diverge.treeWatch");
type Watcher = fs.FSWatcher & { [HELD]?: HeldWatch };
function onWatchEvent(this: Watcher, _type: string, name: string | Buffer | null): void {
  const held = this[HELD];
  held?.tree.changed(held.path, name);
}
function onWatchError(this: Watcher): void {
  const held = this[HELD];
  held?.tree.watchFailed(held);
}

class TreeWatch implements AsyncIterableIterator<TreeOutput> {
  private readonly left: string[];
  private readonly leftKeys: string[];
  private readonly maxQueued: number;
  private readonly queue: TreeOutput[] = [];
  private waiting: { resolve: (r: IteratorResult<TreeOutput>) => void; reject: (e: unknown) => void } | undefined;
  private failure: unknown;
  private ended = false;
  private started = false;
  private shadow = DirShadow.of([]);
  /** Events are handled here one batch at a time, in order. */
  private work: Promise<void> = Promise.resolve();
  private resyncPending = false;
  private readonly onAbort = () => void this.return();
  /** The root, held by descriptor for this watch; `rootId` its identity when opened. */
  private beneath: Beneath | undefined;
  private rootId = NaN;
  private rootTimer: NodeJS.Timeout | undefined;
  /** Served FUSE mount points as the identity of their parent directory → names in it (refreshed per walk). */
  private mounts = new Map<number, Set<string>>();
  /** The inotify watches, by the directory's host path. */
  private readonly watches = new Map<string, HeldWatch>();
  /** Whether walks arm watches (not for `once`). */
  private arming = true;
  private walks = 0;
  /** Paths the watches reported and not yet handled: one batch per turn of the work, however many come meanwhile. */
  private readonly pending = new Set<string>();
  private scheduled = false;
  private readonly signal: AbortSignal | undefined;
  private readonly maxWatches: number;

  constructor(
    private readonly root: string,
    options: TreeOptions,
    private readonly head: Uint8Array,
    private readonly maxBytes: number,
  ) {
    this.left = leftOut(root, options.ignore);
    this.leftKeys = leftOutKeys(options.ignore);
    this.maxQueued = options.maxQueued ?? 10_000;
    this.maxWatches = options.maxWatches ?? Infinity;
    if (options.signal?.aborted) this.ended = true;
    options.signal?.addEventListener("abort", this.onAbort, { once: true });
    this.signal = options.signal;
  }

  [Symbol.asyncIterator](): AsyncIterableIterator<TreeOutput> {
    return this;
  }

  next(): Promise<IteratorResult<TreeOutput>> {
    if (!this.started && !this.ended) {
      this.started = true;
      this.work = this.start();
    }
    const output = this.queue.shift();
    if (output) return Promise.resolve({ value: output, done: false });
    if (this.failure !== undefined) {
      const failure = this.failure;
      this.failure = undefined;
      this.ended = true;
      return Promise.reject(failure);
    }
    if (this.ended) return Promise.resolve({ value: undefined, done: true });
    return new Promise((resolve, reject) => (this.waiting = { resolve, reject }));
  }

  async return(): Promise<IteratorResult<TreeOutput>> {
    if (!this.ended) {
      this.ended = true;
      this.queue.length = 0;
      this.signal?.removeEventListener("abort", this.onAbort);
      const waiting = this.waiting;
      this.waiting = undefined;
      waiting?.resolve({ value: undefined, done: true });
      this.release();
    }
    return { value: undefined, done: true };
  }

  /** Drops the watches, the shadow, the timer and the root's descriptor. */
  private release(): void {
    this.unwatch(undefined);
    this.shadow = DirShadow.of([]);
    clearInterval(this.rootTimer);
    this.rootTimer = undefined;
    // Closed once the work in flight (a walk using it) is over.
    const beneath = this.beneath;
    this.beneath = undefined;
    if (beneath) void this.work.finally(() => beneath.close().catch(() => undefined));
  }

  private emit(output: TreeOutput): void {
    if (this.ended) return;
    if (this.waiting) {
      const waiting = this.waiting;
      this.waiting = undefined;
      waiting.resolve({ value: output, done: false });
      return;
    }
    this.queue.push(output);
    if (this.queue.length > this.maxQueued && !this.resyncPending) {
      // The reader is too slow: what is queued is lost, and one fresh snapshot replaces it.
      this.queue.length = 0;
      this.lost();
    }
  }

  /** Events were lost (a slow reader, a watch's error): the next thing sent is a fresh Snapshot. */
  private lost(): void {
    if (this.resyncPending || this.ended) return;
    this.resyncPending = true;
    this.work = this.work.then(async () => {
      if (await this.rootHolds()) await this.resync();
    });
  }

  /** Ends the watch with an error: frames already queued are still read first, then the error. */
  private fail(error: FsError): void {
    if (this.ended) return;
    this.ended = true;
    this.signal?.removeEventListener("abort", this.onAbort);
    this.release();
    const waiting = this.waiting;
    this.waiting = undefined;
    if (waiting) waiting.reject(error);
    else this.failure = error;
  }

  /** Whether the root path still names the directory this watch holds; fails the watch when not. */
  private async rootHolds(): Promise<boolean> {
    if (this.ended) return false;
    const now = await stat(this.root).then(identity, () => NaN);
    if (now === this.rootId) return true;
    this.fail(new FsError("watch", ROOT_REPLACED));
    return false;
  }

  private async start(): Promise<void> {
    try {
      this.beneath = await Beneath.open(this.root);
      this.rootId = identity(await fstat(this.beneath.fd));
    } catch (error) {
      return this.fail(new FsError("watch", `the root cannot be opened: ${osText(error)}`));
    }
    if (this.ended) return this.release();
    this.rootTimer = setInterval(() => {
      this.work = this.work.then(async () => void (await this.rootHolds()));
    }, ROOT_CHECK_MS);
    this.rootTimer.unref();
    this.resyncPending = true;
    await this.resync();
  }

  /**
   * Arms the inotify watch of the directory held by `fd` (host path `path`, identity `id`), through
   * the descriptor; true when it is watched. A watch of another directory at the same path (one
   * removed and made again) is replaced.
   */
  private arm(path: string, fd: number, id: number): boolean {
    if (!this.arming) return true;
    if (this.ended) return false;
    const before = this.watches.get(path);
    if (before?.id === id) {
      before.walk = this.walks;
      return true;
    }
    if (before) this.closeWatch(path);
    if (this.watches.size >= this.maxWatches) return false;
    let watcher: Watcher;
    try {
      watcher = fs.watch(fdPath(fd), { persistent: false }, onWatchEvent);
    } catch {
      return false; // Out of inotify watches (ENOSPC), or gone: not watched, `changes: false`.
    }
    watcher.on("error", onWatchError);
    const held: HeldWatch = { tree: this, path, id, watcher, walk: this.walks };
    watcher[HELD] = held;
    this.watches.set(path, held);
    watchStats.open++;
    return true;
  }

  private closeWatch(path: string): void {
    const held = this.watches.get(path);
    if (!held) return;
    delete (held.watcher as Watcher)[HELD];
    held.watcher.close();
    this.watches.delete(path);
    watchStats.open--;
  }

  /** A watch failed: it is closed, and what it would have told is lost (a fresh Snapshot follows). */
  watchFailed(held: HeldWatch): void {
    if (this.watches.get(held.path) === held) this.closeWatch(held.path);
    this.lost();
  }

  /** A watch's event: `name` in the directory at `dir` changed (or the directory itself). */
  changed(dir: string, name: string | Buffer | null): void {
    if (this.ended) return;
    watchStats.events++;
    // Past this many waiting, the rest is lost: a fresh Snapshot covers it.
    if (this.pending.size >= 65_536) return this.lost();
    this.pending.add(name ? join(dir, name.toString()) : dir);
    if (this.scheduled) return;
    this.scheduled = true;
    this.work = this.work.then(() => {
      this.scheduled = false;
      const paths = [...this.pending];
      this.pending.clear();
      return this.apply(paths);
    });
  }

  /** Closes the watches of `under` and below it (every one when undefined); with `walk`, only those that walk did not see. */
  private unwatch(under: string | undefined, walk?: number): void {
    for (const [dir, held] of this.watches) {
      if (under !== undefined && dir !== under && !dir.startsWith(under === sep ? sep : under + sep)) continue;
      if (walk !== undefined && held.walk >= walk) continue;
      this.closeWatch(dir);
    }
  }

  /** The served FUSE mount points as parent identity → names, so that the walk never stats one. */
  private async refreshMounts(): Promise<void> {
    const mounts = new Map<number, Set<string>>();
    for (const point of servedMountPoints()) {
      // The parent lies outside the mount: stat'ing it asks nothing of the mount's provider.
      const parent = await lstat(dirname(point)).then(identity, () => undefined);
      if (parent === undefined) continue;
      let names = mounts.get(parent);
      if (!names) mounts.set(parent, (names = new Set()));
      names.add(basename(point));
    }
    this.mounts = mounts;
  }

  /** Walks the whole tree afresh and sends it as a Snapshot; watches of directories gone are closed. */
  private async resync(): Promise<void> {
    if (this.ended || !this.beneath) return;
    this.resyncPending = false;
    // Events up to here are in the walk.
    this.pending.clear();
    await this.refreshMounts();
    const walk = ++this.walks;
    const sink = new Sink(this.head, this.maxBytes);
    let shadow: DirShadow;
    try {
      shadow = await this.walkRoot(sink, this.beneath.fd);
    } catch (error) {
      if (error instanceof WalkStopped) return;
      if (error instanceof FsError) return this.fail(error);
      return this.fail(new FsError("walk", osText(error)));
    }
    if (this.ended) return;
    if (sink.over) return this.fail(tooLarge("Snapshot", sink.bytes, this.maxBytes));
    this.unwatch(this.root, walk);
    this.shadow = shadow;
    this.queue.length = 0;
    this.emit(sink.snapshot());
  }

  /** One walk with no watch: the Snapshot's postcard. */
  async once(): Promise<Uint8Array> {
    this.arming = false;
    this.beneath = await Beneath.open(this.root).catch((error: unknown) => {
      throw new FsError("walk", `the root cannot be opened: ${osText(error)}`);
    });
    try {
      this.rootId = identity(await fstat(this.beneath.fd));
      await this.refreshMounts();
      const sink = new Sink(new Uint8Array(0), Infinity);
      await this.walkRoot(sink, this.beneath.fd).catch((error: unknown) => {
        throw error instanceof FsError ? error : new FsError("walk", osText(error));
      });
      return sink.w.finish();
    } finally {
      await this.beneath.close().catch(() => undefined);
      this.beneath = undefined;
    }
  }

  private isLeftOut(absolute: string): boolean {
    return this.left.some((l) => absolute === l || absolute.startsWith(l + sep));
  }

  /** Whether `name` in the directory at `prefix` (components joined by "/", "" for the root) is left out. */
  private isLeftOutName(prefix: string, name: string): boolean {
    const key = prefix === "" ? name : `${prefix}/${name}`;
    return this.leftKeys.some((l) => key === l || key.startsWith(l + "/"));
  }

  /** The root's entries as a Snapshot frame, written into `sink`; the root's own failure to be watched or read is thrown. */
  private async walkRoot(sink: Sink, fd: number): Promise<DirShadow> {
    if (!this.arm(this.root, fd, this.rootId)) throw new FsError("watch", "the root cannot be watched");
    const listing = await this.list(fd, this.rootId, []);
    writeFiletreeFrameSnapshotHead(sink.w, {}, listing.count);
    const shadow = await this.writeEntries(sink, fd, listing, [], this.root, true);
    shadow.identity = this.rootId;
    return shadow;
  }

  /** Lists the directory held by `dir` (identity `id`) and stats its entries, STAT_CONCURRENCY at a time; throws when it cannot be listed. */
  private async list(dir: number, id: number, components: readonly string[]): Promise<Listing> {
    const names = await readdir(fdPath(dir));
    const n = names.length;
    const listing: Listing = {
      names,
      kinds: new Uint8Array(n),
      sizes: new Float64Array(n),
      births: new Float64Array(n),
      mtimes: new Float64Array(n),
      targets: new Map(),
      count: 0,
    };
    const mounted = this.mounts.get(id);
    const prefix = components.join("/");
    await forEachLimit(n, STAT_CONCURRENCY, async (i) => {
      const name = names[i]!;
      if (this.ended || mounted?.has(name) || this.isLeftOutName(prefix, name)) return;
      let stats: fs.Stats;
      try {
        stats = await lstat(fdPath(dir, name));
      } catch {
        return; // Gone since the listing: absent, and the watch reports it.
      }
      if (stats.isSymbolicLink()) {
        try {
          listing.targets.set(i, lexical(components, await readlink(fdPath(dir, name))));
        } catch {
          return; // A link whose target cannot be read is left out.
        }
        listing.kinds[i] = LINK;
      } else {
        listing.kinds[i] = stats.isDirectory() ? DIRECTORY : FILE;
        listing.sizes[i] = stats.size;
      }
      listing.births[i] = stats.birthtimeMs;
      listing.mtimes[i] = stats.mtimeMs;
      listing.count++;
    });
    if (this.ended) throw new WalkStopped();
    return listing;
  }

  /** The listed entries written in directory order (subdirectories walked, one at a time), and their shadow. */
  private async writeEntries(sink: Sink, dir: number, listing: Listing, components: readonly string[], hostDir: string, watched: boolean): Promise<DirShadow> {
    // Signatures go where the sizes were (each size is read before its entry is written).
    const sigs = listing.sizes;
    let dirs: Map<string, DirShadow> | undefined;
    for (let i = 0; i < listing.names.length; i++) {
      const kind = listing.kinds[i];
      if (!kind) continue;
      const name = listing.names[i]!;
      const entry = await this.writeEntry(sink, dir, name, components, hostDir, watched, kind, listing.sizes[i]!, listing.births[i]!, listing.mtimes[i]!, listing.targets.get(i));
      if (typeof entry === "number") sigs[i] = entry;
      else (dirs ??= new Map()).set(name, entry);
      if (this.ended) throw new WalkStopped();
    }
    return DirShadow.ofListing(listing.names, listing.kinds, sigs, dirs);
  }

  /** One entry of the held directory `dir` written as a node (a directory entered and walked); its shadow entry. */
  private async writeEntry(
    sink: Sink,
    dir: number,
    name: string,
    components: readonly string[],
    hostDir: string,
    watched: boolean,
    kind: number,
    size: number,
    birth: number,
    mtime: number,
    target: string[] | undefined,
  ): Promise<ShadowEntry> {
    const created_at = seconds(birth);
    const modified_at = seconds(mtime);
    let entry: ShadowEntry;
    if (kind === FILE) {
      const bytes = big(size);
      writeFiletreeNode(sink.w, { variant: "File", name, size: bytes, created_at, modified_at });
      entry = fileSig(bytes, created_at, modified_at);
    } else if (kind === LINK) {
      writeFiletreeNode(sink.w, { variant: "Symlink", name, path: target!, created_at, modified_at });
      entry = linkSig(target!, created_at, modified_at);
    } else {
      // The parent's path shared, not copied (100,000 directories hold 100,000 paths).
      entry = await this.writeDirectory(sink, dir, name, [...components, name], hostDir === sep ? sep + name : hostDir + sep + name, watched, created_at, modified_at);
    }
    sink.settle();
    return entry;
  }

  /**
   * The directory `name` of the held directory `parent`, opened O_NOFOLLOW, watched (when its
   * parent is) and listed, written as a Directory node with its subtree. One swapped for something
   * else or removed since its parent's listing is written as it was stat'ed, empty and unwatched (as
   * an unreadable one is): the parent's watch reports what is there now.
   */
  private async writeDirectory(sink: Sink, parent: number, name: string, components: string[], path: string, parentWatched: boolean, created: bigint | null, modified: bigint | null): Promise<DirShadow> {
    const empty = (id: number) => {
      writeFiletreeNodeDirectoryHead(sink.w, { name, created_at: created, modified_at: modified, changes: false }, 0);
      const shadow = DirShadow.of([]);
      shadow.watched = false;
      shadow.identity = id;
      shadow.sig = dirSig(false, created, modified, id);
      return shadow;
    };
    let fd: number;
    try {
      fd = await openFd(fdPath(parent, name), O_PATH | constants.O_DIRECTORY | constants.O_NOFOLLOW);
    } catch {
      return empty(NaN);
    }
    try {
      let stats: fs.Stats;
      try {
        stats = await fstat(fd);
      } catch {
        return empty(NaN);
      }
      created = seconds(stats.birthtimeMs);
      modified = seconds(stats.mtimeMs);
      const id = identity(stats);
      const watched = parentWatched && this.arm(path, fd, id);
      let listing: Listing;
      try {
        listing = await this.list(fd, id, components);
      } catch (error) {
        if (error instanceof WalkStopped) throw error;
        // An unreadable directory is an empty list, and cannot be watched either.
        this.closeWatch(path);
        return empty(id);
      }
      writeFiletreeNodeDirectoryHead(sink.w, { name, created_at: created, modified_at: modified, changes: watched }, listing.count);
      const shadow = await this.writeEntries(sink, fd, listing, components, path, watched);
      shadow.watched = watched;
      shadow.identity = id;
      shadow.sig = dirSig(watched, created, modified, id);
      return shadow;
    } finally {
      await closeFd(fd).catch(() => undefined);
    }
  }

  /**
   * The node at `components` (from the root) now, resolved by descriptor with no link followed,
   * and its shadow entry; undefined when absent. Throws FsError `map` when it is over the limit.
   */
  private async nodeAt(components: readonly string[], watched: boolean, variant: TreeDelta["variant"]): Promise<{ node: FiletreeNode; entry: ShadowEntry } | undefined> {
    if (!this.beneath) return undefined;
    let dir: number;
    try {
      dir = await this.beneath.directory(components.slice(0, -1));
    } catch (error) {
      if (error instanceof BeneathError) return undefined; // No directory there any more (or a link now).
      throw error;
    }
    try {
      const id = identity(await fstat(dir));
      const name = components[components.length - 1]!;
      if (this.mounts.get(id)?.has(name)) return undefined;
      let stats: fs.Stats;
      let target: string[] | undefined;
      try {
        stats = await lstat(fdPath(dir, name));
        if (stats.isSymbolicLink()) target = lexical(components.slice(0, -1), await readlink(fdPath(dir, name)));
      } catch {
        return undefined;
      }
      const kind = stats.isSymbolicLink() ? LINK : stats.isDirectory() ? DIRECTORY : FILE;
      const sink = new Sink(new Uint8Array(0), this.maxBytes);
      const entry = await this.writeEntry(sink, dir, name, components.slice(0, -1), components.length > 1 ? join(this.root, ...components.slice(0, -1)) : this.root, watched, kind, stats.size, stats.birthtimeMs, stats.mtimeMs, target);
      if (sink.over) throw tooLarge(variant, sink.bytes, this.maxBytes);
      const bytes = sink.w.finish();
      return { node: readFiletreeNode(new PostcardReader(bytes, 0, bytes.length)), entry };
    } catch (error) {
      if (error instanceof FsError || error instanceof WalkStopped) throw error;
      return undefined;
    } finally {
      await closeFd(dir).catch(() => undefined);
    }
  }

  /** The identity of the directory at `components` now, resolved beneath the root; undefined when none is there. */
  private async identityAt(components: readonly string[]): Promise<number | undefined> {
    if (!this.beneath) return undefined;
    let dir: number;
    try {
      dir = await this.beneath.directory(components);
    } catch {
      return undefined;
    }
    try {
      return identity(await fstat(dir));
    } catch {
      return undefined;
    } finally {
      await closeFd(dir).catch(() => undefined);
    }
  }

  private lookup(components: readonly string[]): ShadowEntry | undefined {
    let at: ShadowEntry | undefined = this.shadow;
    for (const c of components) at = isDir(at) ? at.get(c) : undefined;
    return at;
  }

  /** One batch of changed paths, as deltas in order. */
  private async apply(paths: readonly string[]): Promise<void> {
    if (!(await this.rootHolds())) return;
    await this.refreshMounts();
    for (const path of paths) {
      if (this.ended || this.resyncPending) return;
      const rel = relative(this.root, path);
      if (rel === "" || rel.startsWith("..") || isAbsolute(rel) || this.isLeftOut(path)) continue;
      try {
        await this.change(rel.split(sep));
      } catch (error) {
        if (error instanceof WalkStopped) return;
        return this.fail(error instanceof FsError ? error : new FsError("map", osText(error)));
      }
    }
  }

  private async change(components: readonly string[]): Promise<void> {
    // The highest ancestor not yet known is what changed: it is sent whole.
    let depth = 0;
    while (depth < components.length - 1 && isDir(this.lookup(components.slice(0, depth + 1)))) depth++;
    const top = components.slice(0, depth + 1);
    if (!top.every(isName)) return;
    // A change inside a directory that was removed and made again (another directory at that name,
    // its events coalesced away): the directory is sent whole, with what was made in it before any
    // watch of it existed, instead of this one change inside it.
    if (top.length > 1) {
      const held = this.lookup(top.slice(0, -1));
      const now = await this.identityAt(top.slice(0, -1));
      if (isDir(held) && now !== undefined && held.identity !== now) return this.change(top.slice(0, -1));
    }
    const parent = this.lookup(top.slice(0, -1));
    if (!isDir(parent)) return;
    const name = top[top.length - 1]!;
    const before = parent.get(name);
    const path = join(this.root, ...top);
    const walk = ++this.walks;
    // A directory is walked whole, its watches armed before each listing (a file made in a new
    // directory before its watch existed is in the walk; one made after is told by the watch).
    const found = await this.nodeAt(top, this.watchedUnder(top), before === undefined ? "Inserted" : "Modified");
    if (this.ended) return;
    // Watches under this path the walk did not see are of directories gone (only a directory, before
    // or now, has any: a file's change costs no look through the watches).
    if (isDir(before) || (found && isDir(found.entry))) this.unwatch(path, found && isDir(found.entry) ? walk : undefined);
    if (!found) {
      if (before !== undefined) {
        parent.delete(name);
        this.emit({ variant: "Removed", path: [...top] });
      }
      return;
    }
    if (before !== undefined && sameNode(before, found.entry)) return; // Nothing new (a replayed event, or one already sent inside its directory).
    parent.set(name, found.entry);
    this.emit(before !== undefined ? { variant: "Modified", path: [...top], node: found.node } : { variant: "Inserted", path: [...top], node: found.node });
  }

  /** Whether the directory holding `components` is watched (no unwatched directory above it). */
  private watchedUnder(components: readonly string[]): boolean {
    let at: ShadowEntry | undefined = this.shadow;
    for (const c of components.slice(0, -1)) {
      at = isDir(at) ? at.get(c) : undefined;
      if (!isDir(at) || !at.watched) return false;
    }
    return true;
  }
}

function seconds(ms: number): bigint | null {
  return Number.isFinite(ms) && ms > 0 ? big(Math.floor(ms / 1000)) : null;
}

/** A link target as components from the root, resolved lexically against the link's directory (never above the root). */
export function lexical(parent: readonly string[], target: string): string[] {
  const out = target.startsWith("/") ? [] : [...parent];
  for (const part of target.split("/")) {
    if (part === "" || part === ".") continue;
    if (part === "..") out.pop();
    else out.push(part);
  }
  return out;
}
