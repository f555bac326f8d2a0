// filesystem::tree and /filesystem/tree: a Snapshot of the tree under the root, then one delta per
// change (complete values; a rename is Removed then Inserted), a fresh Snapshot after lost events.
//
// The watcher is @parcel/watcher (inotify on Linux, native, prebuilt in the npm registry). Measured
// on Node 20.20.2 / Linux before choosing (see the package README): it saw a file written 0.8 ms
// after the write and all of a 5,000-file burst within 2 s; Node 20's own `fs.watch(…, {recursive:
// true})`, a JavaScript walk over per-directory watches on Linux, had not delivered the same burst
// after 60 s. A watcher that misses a file created inside a directory created the same instant
// costs nothing here: a new directory is sent as one Inserted node with its whole subtree.
//
// The walk never names a path: it holds each directory by descriptor (O_PATH) from the root down,
// lists it through that descriptor, stats each entry as the held directory's name with lstat and
// enters a subdirectory only by opening it O_NOFOLLOW from its parent's descriptor, so a directory
// swapped for a link mid-walk is listed as the link (or not at all), never followed out of the root.
// Stats run a bounded number at a time (STAT_CONCURRENCY) and subdirectories one at a time, so a
// walk of 100,000 entries holds a few dozen requests, not 100,000. A FUSE mount this process serves
// is never entered nor stat'ed (a dead provider's mount would hang the walk): it is left out, as the
// provider's ignore list should have it. The root's identity (birth time, device, inode) is checked on every
// batch and every ROOT_CHECK_MS: a root removed or replaced ends the tree with `watch`.
import { constants } from "node:fs";
import * as fs from "node:fs";
import { lstat, readdir, readlink, stat } from "node:fs/promises";
import { dirname, basename, isAbsolute, join, relative, sep } from "node:path";
import { promisify } from "node:util";
import type { FiletreeFrame, FiletreeNode } from "@diverge/codec";
import { Beneath, BeneathError, O_PATH, fdPath } from "@diverge/multiplexer/beneath";
import { servedMountPoints } from "../fuse/served.js";
import { requireNative, WATCHER_PACKAGE } from "../../natives.js";
import { containerText, FsError, isName, osText } from "./path-checks.js";

const openFd = promisify(fs.open) as (path: string, flags: number) => Promise<number>;
const closeFd = promisify(fs.close);
const fstat = promisify(fs.fstat) as (fd: number) => Promise<fs.Stats>;

/** Entries stat'ed at once during a walk. */
export const STAT_CONCURRENCY = 32;
/**
 * Directories watched besides @parcel/watcher by a plain inotify watch each (`fs.watch`, one
 * directory, not recursive): @parcel/watcher delivers its events after a compiled-in 50 ms debounce
 * (its Debounce.hh, MIN_WAIT_TIME), which was the whole of the tree delta's 51 ms p50; a plain inotify
 * watch delivers within a millisecond. Each such event is handled at once as the watcher's would be;
 * the watcher's own event for the same change comes later and finds nothing new (the signature
 * check in `change`), and it still covers everything past this many directories, events a plain
 * watch misses and lost events. Shallow directories first.
 */
export const FAST_WATCH_DIRS = 512;
/** Changes first seen by a plain inotify watch, every tree together (for the tests). */
export const fastWatchStats = { events: 0, watched: 0 };
/** How often the root's identity is checked when no event comes. */
const ROOT_CHECK_MS = 1000;
export const ROOT_REPLACED = "the root was removed or replaced";

/** The container's own filesystems, always left out (fs-fuse.md §5.1). */
export const ALWAYS_LEFT_OUT: readonly (readonly string[])[] = [["proc"], ["sys"], ["dev"]];

export interface TreeOptions {
  /** Paths (component arrays from the root) left out of every snapshot and never watched. Invalid entries are dropped. */
  readonly ignore?: unknown;
  /** Stops the watch; the iteration then ends without error. */
  readonly signal?: AbortSignal;
  /** Frames held for a slow reader before they are dropped for one fresh Snapshot. */
  readonly maxQueued?: number;
}

/**
 * The error that ends a tree whose next frame is larger than the provider's message limit:
 * fs-fuse.md has no way to split a frame, so the tree ends (`walk` for a Snapshot, `map` for a
 * delta), and the provider may ask again with more of the tree in its ignore list.
 */
export function tooLarge(frame: FiletreeFrame, bytes: number, limit: number): FsError {
  const what = frame.variant === "Snapshot" ? "snapshot" : `${frame.variant} frame`;
  return new FsError(frame.variant === "Snapshot" ? "walk" : "map", `the ${what} is ${bytes} bytes, more than the message limit of ${limit} bytes; leave part of the tree out (ignore)`);
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
 * A directory's identity, `birth:dev:ino`: ext4 gives a directory made again the inode just freed,
 * so `dev:ino` alone cannot tell the two apart; the birth time, to the sub-millisecond, does.
 */
const identity = (s: fs.Stats) => `${s.birthtimeMs}:${s.dev}:${s.ino}`;

/** Runs at most `limit` of the calls at once, in order of `items`; results in that order. */
async function mapLimit<T, R>(items: readonly T[], limit: number, run: (item: T) => Promise<R>): Promise<R[]> {
  const out = new Array<R>(items.length);
  let next = 0;
  const worker = async () => {
    while (next < items.length) {
      const i = next++;
      out[i] = await run(items[i]!);
    }
  };
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, worker));
  return out;
}

/** What a watch remembers of a directory. A file or link is remembered as its node itself (no copy). */
interface Shadow {
  sig: string;
  children: Map<string, Entry>;
}
type Entry = Shadow | Exclude<FiletreeNode, { variant: "Directory" }>;
const isDir = (entry: Entry | undefined): entry is Shadow => entry !== undefined && "sig" in entry;
/** The identity a walked directory's sig ends with (its last three fields). */
const dirIdentity = (shadow: Shadow): string => shadow.sig.split(":").slice(-3).join(":");
/** What tells an entry's change: kind, size or target, times. */
const sigOf = (entry: Entry): string =>
  isDir(entry) ? entry.sig : entry.variant === "File" ? `f:${entry.size}:${entry.created_at}:${entry.modified_at}` : `l:${entry.path.join("/")}:${entry.created_at}:${entry.modified_at}`;

/** Equal second counts and sizes share one bigint (a checkout's files share a few dozen times), so 100,000 nodes hold far fewer. */
const interned = new Map<number, bigint>();
function big(value: number): bigint {
  let out = interned.get(value);
  if (out === undefined) {
    if (interned.size >= 4096) interned.clear();
    interned.set(value, (out = BigInt(value)));
  }
  return out;
}

type Watcher = typeof import("@parcel/watcher");
type WatchEvent = { readonly type: "create" | "update" | "delete"; readonly path: string };

let watcherModule: Promise<Watcher> | undefined;
// Loaded by `require` from the file the proxy runs from (natives.ts): a dynamic import() would fail
// in the single executable, and would look beside nothing in the bundle.
const loadWatcher = () => (watcherModule ??= Promise.resolve().then(() => requireNative<Watcher>(WATCHER_PACKAGE)));

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
 * Watches the tree under `root` (a real path). The first frame is a Snapshot; the iteration ends
 * when stopped (signal or `return()`), or throws FsError `watch` / `walk` when the watch cannot
 * exist or the walk of the root dies.
 */
export function watchTree(root: string, options: TreeOptions = {}): AsyncIterableIterator<FiletreeFrame> {
  return new TreeWatch(root, options);
}

/** One Snapshot of the tree under `root` (a real path), walked as a watch's is, with no watch. */
export async function snapshotOf(root: string, options: Pick<TreeOptions, "ignore"> = {}): Promise<{ kind: "Snapshot"; children: FiletreeNode[] }> {
  return { kind: "Snapshot", children: await new TreeWatch(root, options).once() };
}

class TreeWatch implements AsyncIterableIterator<FiletreeFrame> {
  private readonly left: string[];
  private readonly leftKeys: string[];
  private readonly maxQueued: number;
  private readonly queue: FiletreeFrame[] = [];
  private waiting: { resolve: (r: IteratorResult<FiletreeFrame>) => void; reject: (e: unknown) => void } | undefined;
  private failure: unknown;
  private ended = false;
  private started = false;
  private subscription: { unsubscribe(): Promise<void> } | undefined;
  private shadow: Shadow = { sig: "root", children: new Map() };
  /** Events arrive here and are handled one batch at a time, in order. */
  private work: Promise<void> = Promise.resolve();
  private resyncPending = false;
  private readonly onAbort = () => void this.return();
  /** The root, held by descriptor for this watch; `rootId` its identity when opened. */
  private beneath: Beneath | undefined;
  private rootId = "";
  private rootTimer: NodeJS.Timeout | undefined;
  /** Served FUSE mount points as the identity of their parent directory → names in it (refreshed per walk). */
  private mounts = new Map<string, Set<string>>();
  /** The plain inotify watches (FAST_WATCH_DIRS), by the directory's host path. */
  private readonly fast = new Map<string, fs.FSWatcher>();
  /** Paths the plain watches reported and not yet handled: one batch per turn of the work, however many come meanwhile. */
  private readonly fastPending = new Set<string>();
  private fastScheduled = false;

  constructor(
    private readonly root: string,
    options: TreeOptions,
  ) {
    this.left = leftOut(root, options.ignore);
    this.leftKeys = leftOutKeys(options.ignore);
    this.maxQueued = options.maxQueued ?? 10_000;
    if (options.signal?.aborted) this.ended = true;
    options.signal?.addEventListener("abort", this.onAbort, { once: true });
    this.signal = options.signal;
  }
  private readonly signal: AbortSignal | undefined;

  [Symbol.asyncIterator](): AsyncIterableIterator<FiletreeFrame> {
    return this;
  }

  next(): Promise<IteratorResult<FiletreeFrame>> {
    if (!this.started && !this.ended) {
      this.started = true;
      this.work = this.start();
    }
    const frame = this.queue.shift();
    if (frame) return Promise.resolve({ value: frame, done: false });
    if (this.failure !== undefined) {
      const failure = this.failure;
      this.failure = undefined;
      this.ended = true;
      return Promise.reject(failure);
    }
    if (this.ended) return Promise.resolve({ value: undefined, done: true });
    return new Promise((resolve, reject) => (this.waiting = { resolve, reject }));
  }

  async return(): Promise<IteratorResult<FiletreeFrame>> {
    if (!this.ended) {
      this.ended = true;
      this.queue.length = 0;
      this.signal?.removeEventListener("abort", this.onAbort);
      const waiting = this.waiting;
      this.waiting = undefined;
      waiting?.resolve({ value: undefined, done: true });
      await this.release();
    }
    return { value: undefined, done: true };
  }

  /** Drops the watch, the timer and the root's descriptor. */
  private async release(): Promise<void> {
    this.unwatchFast(undefined);
    clearInterval(this.rootTimer);
    this.rootTimer = undefined;
    const subscription = this.subscription;
    this.subscription = undefined;
    await subscription?.unsubscribe().catch(() => undefined);
    // Closed once the work in flight (a walk using it) is over.
    const beneath = this.beneath;
    this.beneath = undefined;
    if (beneath) void this.work.finally(() => beneath.close().catch(() => undefined));
  }

  private emit(frame: FiletreeFrame): void {
    if (this.ended) return;
    if (this.waiting) {
      const waiting = this.waiting;
      this.waiting = undefined;
      waiting.resolve({ value: frame, done: false });
      return;
    }
    this.queue.push(frame);
    if (this.queue.length > this.maxQueued && !this.resyncPending) {
      // The reader is too slow: what is queued is lost, and one fresh snapshot replaces it.
      this.queue.length = 0;
      this.resyncPending = true;
      this.work = this.work.then(() => this.resync());
    }
  }

  /** Ends the watch with an error: frames already queued are still read first, then the error. */
  private fail(error: FsError): void {
    if (this.ended) return;
    this.ended = true;
    this.signal?.removeEventListener("abort", this.onAbort);
    void this.release();
    const waiting = this.waiting;
    this.waiting = undefined;
    if (waiting) waiting.reject(error);
    else this.failure = error;
  }

  /** An error of the watcher (not ours): its text with the root's host path named as the container's. */
  private watchError(error: unknown): FsError {
    return new FsError("watch", containerText(this.root, error instanceof Error ? error.message : String(error)));
  }

  /** Whether the root path still names the directory this watch holds; fails the watch when not. */
  private async rootHolds(): Promise<boolean> {
    if (this.ended) return false;
    const now = await stat(this.root).then(identity, () => "");
    if (now === this.rootId) return true;
    this.fail(new FsError("watch", ROOT_REPLACED));
    return false;
  }

  private async start(): Promise<void> {
    let watcher: Watcher;
    try {
      watcher = await loadWatcher();
    } catch (error) {
      return this.fail(this.watchError(error));
    }
    try {
      this.beneath = await Beneath.open(this.root);
      this.rootId = identity(await fstat(this.beneath.fd));
    } catch (error) {
      return this.fail(new FsError("watch", `the root cannot be opened: ${osText(error)}`));
    }
    if (this.ended) return void (await this.release());
    const pending: WatchEvent[][] = [];
    let live = false;
    // Served FUSE mounts under the root are never watched either (the watcher would walk into them).
    const served = () => [...servedMountPoints()].filter((m) => m.startsWith(this.root === sep ? sep : this.root + sep));
    const subscribe = (ignore: string[]) =>
      watcher.subscribe(
        this.root,
        (error, events) => {
          if (this.ended) return;
          if (error) {
            // Lost events: the next thing sent is a fresh snapshot (if the root still holds).
            this.work = this.work.then(async () => {
              if (await this.rootHolds()) await this.resync();
            });
            return;
          }
          if (!live) pending.push(events);
          else this.work = this.work.then(() => this.apply(events));
        },
        { ignore },
      );
    let subscription: { unsubscribe(): Promise<void> };
    // Armed before the walk, so that changes during the walk arrive as deltas after the snapshot.
    try {
      subscription = await subscribe([...this.left, ...served()]);
    } catch (first) {
      // The watcher gives up on a whole tree when one directory in it cannot be read. Such a
      // directory cannot be watched: it is left out of the watch (not the tree, where it is an
      // empty directory with `changes: false`) and the watch is armed again.
      const unreadable = (await this.unreadable(this.root).catch(() => [])).filter((d) => d !== this.root);
      if (unreadable.length === 0) return this.fail(this.watchError(first));
      try {
        subscription = await subscribe([...this.left, ...served(), ...unreadable]);
      } catch (error) {
        return this.fail(this.watchError(error));
      }
    }
    if (this.ended) {
      await subscription.unsubscribe().catch(() => undefined);
      return;
    }
    this.subscription = subscription;
    this.rootTimer = setInterval(() => {
      this.work = this.work.then(async () => void (await this.rootHolds()));
    }, ROOT_CHECK_MS);
    this.rootTimer.unref();
    await this.resync();
    live = true;
    for (const events of pending) await this.apply(events);
  }

  /** Arms the plain inotify watches on the known directories, shallow ones first, up to FAST_WATCH_DIRS. */
  private watchKnown(): void {
    this.unwatchFast(undefined);
    this.watchSubtree(this.root, this.shadow);
  }

  private watchFast(dir: string): void {
    if (this.ended || this.fast.size >= FAST_WATCH_DIRS || this.fast.has(dir) || (dir !== this.root && this.isLeftOut(dir))) return;
    let watcher: fs.FSWatcher;
    try {
      watcher = fs.watch(dir, { persistent: false }, (_type, name) => {
        if (this.ended) return;
        fastWatchStats.events++;
        // Past this many waiting the rest is the watcher's (a storm of changes is its to batch).
        if (this.fastPending.size < 4096) this.fastPending.add(name ? join(dir, name.toString()) : dir);
        if (this.fastScheduled) return;
        this.fastScheduled = true;
        this.work = this.work.then(() => {
          this.fastScheduled = false;
          const paths = [...this.fastPending];
          this.fastPending.clear();
          return this.apply(paths.map((path) => ({ type: "update" as const, path })));
        });
      });
    } catch {
      return; // Gone, unreadable or out of watches: the watcher's events still come.
    }
    watcher.on("error", () => {
      watcher.close();
      if (this.fast.get(dir) === watcher) this.fast.delete(dir);
    });
    this.fast.set(dir, watcher);
    fastWatchStats.watched++;
  }

  /** Closes the plain watches on `under` and below it (every one when undefined). */
  private unwatchFast(under: string | undefined): void {
    for (const [dir, watcher] of this.fast) {
      if (under !== undefined && dir !== under && !dir.startsWith(under + sep)) continue;
      watcher.close();
      this.fast.delete(dir);
    }
  }

  /** The served FUSE mount points as parent identity → names, so that the walk never stats one. */
  private async refreshMounts(): Promise<void> {
    const mounts = new Map<string, Set<string>>();
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

  private async resync(): Promise<void> {
    if (this.ended || !this.beneath) return;
    this.resyncPending = false;
    let children: FiletreeNode[];
    const shadow: Shadow = { sig: "root", children: new Map() };
    await this.refreshMounts();
    try {
      children = await this.walkDir(this.beneath.fd, this.rootId, [], shadow, false, true);
    } catch (error) {
      return this.fail(new FsError("walk", error instanceof FsError ? error.error : osText(error)));
    }
    if (this.ended) return;
    this.shadow = shadow;
    this.queue.length = 0;
    this.emit({ variant: "Snapshot", children });
    this.watchKnown();
  }

  /** One walk with no watch: the Snapshot's children. */
  async once(): Promise<FiletreeNode[]> {
    const beneath = await Beneath.open(this.root).catch((error: unknown) => {
      throw new FsError("walk", `the root cannot be opened: ${osText(error)}`);
    });
    try {
      await this.refreshMounts();
      return await this.walkDir(beneath.fd, identity(await fstat(beneath.fd)), [], { sig: "root", children: new Map() }, false, true).catch((error: unknown) => {
        throw new FsError("walk", osText(error));
      });
    } finally {
      await beneath.close().catch(() => undefined);
    }
  }

  /** Every directory under `dir` (not left out, links not followed) that cannot be listed (for the watcher's ignore list only). */
  private async unreadable(dir: string): Promise<string[]> {
    let entries;
    try {
      entries = await readdir(dir, { withFileTypes: true });
    } catch {
      return [dir];
    }
    const out: string[] = [];
    for (const e of entries) {
      const absolute = join(dir, e.name);
      if (!e.isDirectory() || this.isLeftOut(absolute) || servedMountPoints().has(absolute)) continue;
      out.push(...(await this.unreadable(absolute)));
    }
    return out;
  }

  private isLeftOut(absolute: string): boolean {
    return this.left.some((l) => absolute === l || absolute.startsWith(l + sep));
  }

  private isLeftOutPath(components: readonly string[]): boolean {
    const key = components.join("/");
    return this.leftKeys.some((l) => key === l || key.startsWith(l + "/"));
  }

  /**
   * The entries of the directory held by `dir` (identity `id`) as nodes, recording them in
   * `shadow`: entries stat'ed STAT_CONCURRENCY at a time, subdirectories walked one at a time.
   * The root's own failure to read is thrown.
   */
  private async walkDir(dir: number, id: string, components: readonly string[], shadow: Shadow, unwatched: boolean, isRoot = false): Promise<FiletreeNode[]> {
    let names: string[];
    try {
      names = await readdir(fdPath(dir));
    } catch (error) {
      if (isRoot) throw error;
      // An unreadable directory is an empty list, and cannot be watched either.
      shadow.sig = "d:unreadable";
      return [];
    }
    const mounted = this.mounts.get(id);
    const nodes = await mapLimit(names, STAT_CONCURRENCY, async (name) => {
      if (this.ended || mounted?.has(name)) return undefined;
      const path = [...components, name];
      if (this.isLeftOutPath(path)) return undefined;
      return this.entry(dir, path, shadow, unwatched, false);
    });
    // Directories, one at a time: each holds a descriptor while its subtree is walked.
    for (let i = 0; i < nodes.length; i++) {
      const node = nodes[i];
      if (node?.variant !== "Directory") continue;
      nodes[i] = await this.entry(dir, [...components, node.name], shadow, unwatched, true);
    }
    return nodes.filter((n): n is FiletreeNode => n !== undefined);
  }

  /**
   * One entry of the held directory `dir` as a node, recorded under `parent`; undefined when it
   * cannot be stat'ed (or, entered, is no longer a directory). A directory is returned as a
   * placeholder (no subtree) unless `enter`, which opens it O_NOFOLLOW from `dir` and walks it.
   */
  private async entry(dir: number, components: readonly string[], parent: Shadow, unwatched: boolean, enter: boolean): Promise<FiletreeNode | undefined> {
    const name = components[components.length - 1]!;
    const where = fdPath(dir, name);
    if (enter) {
      let fd: number;
      try {
        fd = await openFd(where, O_PATH | constants.O_DIRECTORY | constants.O_NOFOLLOW);
      } catch {
        return undefined; // Swapped for something else since: the watcher reports it.
      }
      try {
        const stats = await fstat(fd);
        const created_at = seconds(stats.birthtimeMs);
        const modified_at = seconds(stats.mtimeMs);
        const shadow: Shadow = { sig: "", children: new Map() };
        const id = identity(stats);
        const children = await this.walkDir(fd, id, components, shadow, unwatched);
        const changes = !unwatched && shadow.sig !== "d:unreadable";
        // The directory's identity is part of it: one removed and made again within the same second
        // (times in whole seconds) is another directory, sent whole, with what was made in it meanwhile.
        shadow.sig = `d:${changes}:${created_at}:${modified_at}:${id}`;
        parent.children.set(name, shadow);
        return { variant: "Directory", name, created_at, modified_at, changes, children };
      } catch {
        return undefined;
      } finally {
        await closeFd(fd).catch(() => undefined);
      }
    }
    let stats;
    try {
      stats = await lstat(where);
    } catch {
      return undefined;
    }
    const created_at = seconds(stats.birthtimeMs);
    const modified_at = seconds(stats.mtimeMs);
    if (stats.isDirectory()) return { variant: "Directory", name, created_at, modified_at, changes: false, children: [] };
    if (stats.isSymbolicLink()) {
      let target: string;
      try {
        target = await readlink(where);
      } catch {
        return undefined; // A link whose target cannot be read is left out.
      }
      const path = lexical(components.slice(0, -1), target);
      const node = { variant: "Symlink" as const, name, path, created_at, modified_at };
      parent.children.set(name, node);
      return node;
    }
    const node = { variant: "File" as const, name, size: big(stats.size), created_at, modified_at };
    parent.children.set(name, node);
    return node;
  }

  /** One node at `components` (from the root), resolved by descriptor with no link followed; undefined when absent. */
  private async node(components: readonly string[], parent: Shadow, unwatched: boolean): Promise<FiletreeNode | undefined> {
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
      if (this.mounts.get(id)?.has(components[components.length - 1]!)) return undefined;
      const first = await this.entry(dir, components, parent, unwatched, false);
      return first?.variant === "Directory" ? await this.entry(dir, components, parent, unwatched, true) : first;
    } catch {
      return undefined;
    } finally {
      await closeFd(dir).catch(() => undefined);
    }
  }

  /** The identity of the directory at `components` now, resolved beneath the root; undefined when none is there. */
  private async identityAt(components: readonly string[]): Promise<string | undefined> {
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

  private lookup(components: readonly string[]): Entry | undefined {
    let at: Entry | undefined = this.shadow;
    for (const c of components) at = isDir(at) ? at.children.get(c) : undefined;
    return at;
  }

  /** One batch of watcher events, as deltas in order. */
  private async apply(events: readonly WatchEvent[]): Promise<void> {
    if (!(await this.rootHolds())) return;
    await this.refreshMounts();
    const seen = new Set<string>();
    for (const event of events) {
      if (this.ended || this.resyncPending) return;
      if (seen.has(event.path)) continue;
      seen.add(event.path);
      const rel = relative(this.root, event.path);
      if (rel === "" || rel.startsWith("..") || isAbsolute(rel) || this.isLeftOut(event.path)) continue;
      await this.change(rel.split(sep));
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
      if (isDir(held) && now !== undefined && dirIdentity(held) !== now) return this.change(top.slice(0, -1));
    }
    const parent = this.lookup(top.slice(0, -1));
    if (!isDir(parent)) return;
    const name = top[top.length - 1]!;
    const before = parent.children.get(name);
    const scratch: Shadow = { sig: "", children: new Map() };
    const node = await this.node(top, scratch, !this.watchedUnder(top));
    if (this.ended) return;
    if (!node) {
      if (before) {
        parent.children.delete(name);
        if (isDir(before)) this.unwatchFast(join(this.root, ...top));
        this.emit({ variant: "Removed", path: [...top] });
      }
      return;
    }
    let after = scratch.children.get(name)!;
    let sent = node;
    if (isDir(after) && (!isDir(before) || dirIdentity(before) !== dirIdentity(after))) {
      // A directory new here, or another one at the same name (its identity, the sig's end, differs):
      // its plain watches (the old one's died with it) are armed afresh, before a second walk, so
      // that a file made in it between the first walk and the arming is in the second walk, and one
      // made after is told by the new watch.
      const path = join(this.root, ...top);
      if (isDir(before)) this.unwatchFast(path);
      this.watchSubtree(path, after);
      const again: Shadow = { sig: "", children: new Map() };
      const second = await this.node(top, again, !this.watchedUnder(top));
      if (this.ended) return;
      if (second) {
        after = again.children.get(name)!;
        sent = second;
      }
    }
    if (before && sigOf(before) === sigOf(after)) return; // Nothing new (a replayed event, or one already sent inside its directory).
    parent.children.set(name, after);
    this.emit(before ? { variant: "Modified", path: [...top], node: sent } : { variant: "Inserted", path: [...top], node: sent });
  }

  /** Arms the plain watches of a directory and those below it (shallow first), within FAST_WATCH_DIRS. */
  private watchSubtree(path: string, shadow: Shadow): void {
    const queue: { path: string; shadow: Shadow }[] = [{ path, shadow }];
    while (queue.length > 0 && this.fast.size < FAST_WATCH_DIRS && !this.ended) {
      const next = queue.shift()!;
      this.watchFast(next.path);
      for (const [child, entry] of next.shadow.children) if (isDir(entry)) queue.push({ path: join(next.path, child), shadow: entry });
    }
  }

  /** Whether the directory holding `components` is watched (no unwatched directory above it). */
  private watchedUnder(components: readonly string[]): boolean {
    let at: Entry | undefined = this.shadow;
    for (const c of components.slice(0, -1)) {
      at = isDir(at) ? at.children.get(c) : undefined;
      if (!isDir(at) || at.sig.startsWith("d:false")) return false;
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
