// What a tree watch remembers of the tree, to tell a change from a replayed event and an Inserted
// from a Modified: per directory, its entries' names and one signature each, in a flat table (one
// string of the names, sorted and joined by "/", and one array of numbers holding each name's offset
// and a 53-bit hash of the entry's kind, size or target and times) instead of an object per entry.
// For 100,000 files that is about 2.5 MB where a Map of nodes took 11 MB, so the kept state stays
// near the Snapshot's own size; a small directory costs a few hundred bytes (plain arrays, not typed
// ones, whose fixed cost is larger). Changes go to a small overlay, merged into the table once it grows.

/** A file's or link's signature (a hash of what its node says), or a directory's shadow. */
export type ShadowEntry = number | DirShadow;

const ENTRY_IS_DIRECTORY = -1;

/** Compares `name` with `text[start, end)` by UTF-16 code units, as `<` on strings does. */
function compareAt(text: string, start: number, end: number, name: string): number {
  const length = Math.min(end - start, name.length);
  for (let i = 0; i < length; i++) {
    const difference = text.charCodeAt(start + i) - name.charCodeAt(i);
    if (difference !== 0) return difference;
  }
  return end - start - name.length;
}

export class DirShadow {
  /** Whether the directory is watched (its `changes`). */
  watched = true;
  /** Which directory it is (`identityOf`): another one made at the same name has another. */
  identity = 0;
  /** What its node's own fields say (`dirSig`): changes, times and identity. */
  sig = 0;
  /** The names, sorted, joined by "/" (which no name holds). */
  private names = "";
  /**
   * For the i-th name, `table[2i]` is where it starts in `names` and `table[2i + 1]` its signature
   * (ENTRY_IS_DIRECTORY for a subdirectory, whose shadow is in `dirs`); one more start, past the end.
   */
  private table: number[] = [0];
  private dirs: Map<string, DirShadow> | undefined;
  /** Changes since the table was built (null: removed). */
  private overlay: Map<string, ShadowEntry | null> | undefined;

  /** A shadow of `entries` (names unique). */
  static of(entries: Iterable<readonly [string, ShadowEntry]>): DirShadow {
    const shadow = new DirShadow();
    shadow.build([...entries]);
    return shadow;
  }

  /**
   * A shadow of a directory's listing: `names[i]` where `present[i]` is not 0, with signature
   * `sigs[i]`, or its shadow in `dirs` (by name) when it is a subdirectory. No per-entry object is
   * made: a walk's garbage that survives a collection makes V8 grow its young generation.
   */
  static ofListing(names: readonly string[], present: Uint8Array, sigs: Float64Array, dirs: Map<string, DirShadow> | undefined): DirShadow {
    let count = 0;
    for (let i = 0; i < names.length; i++) if (present[i]) count++;
    const order = new Uint32Array(count);
    for (let i = 0, j = 0; i < names.length; i++) if (present[i]) order[j++] = i;
    order.sort((a, b) => (names[a]! < names[b]! ? -1 : names[a]! > names[b]! ? 1 : 0));
    const shadow = new DirShadow();
    const table: number[] = [];
    const sorted = new Array<string>(count);
    let at = 0;
    for (let j = 0; j < count; j++) {
      const i = order[j]!;
      const name = names[i]!;
      sorted[j] = name;
      table.push(at, dirs?.has(name) ? ENTRY_IS_DIRECTORY : sigs[i]!);
      at += name.length + 1;
    }
    table.push(at);
    shadow.table = table;
    shadow.names = sorted.join("/");
    shadow.dirs = dirs && dirs.size > 0 ? dirs : undefined;
    return shadow;
  }

  private build(entries: (readonly [string, ShadowEntry])[]): void {
    entries.sort((a, b) => (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0));
    this.names = entries.map((e) => e[0]).join("/");
    this.dirs = undefined;
    const table: number[] = [];
    let at = 0;
    for (const [name, value] of entries) {
      if (typeof value === "number") table.push(at, value);
      else {
        table.push(at, ENTRY_IS_DIRECTORY);
        (this.dirs ??= new Map()).set(name, value);
      }
      at += name.length + 1;
    }
    table.push(at);
    this.table = table;
    this.overlay = undefined;
  }

  /** Names in the table (the overlay aside). */
  private get size(): number {
    return (this.table.length - 1) / 2;
  }

  /** The index of `name` in the table, or -1. */
  private find(name: string): number {
    let low = 0;
    let high = this.size - 1;
    while (low <= high) {
      const middle = (low + high) >>> 1;
      const order = compareAt(this.names, this.table[2 * middle]!, this.table[2 * middle + 2]! - 1, name);
      if (order === 0) return middle;
      if (order < 0) low = middle + 1;
      else high = middle - 1;
    }
    return -1;
  }

  get(name: string): ShadowEntry | undefined {
    const changed = this.overlay?.get(name);
    if (changed !== undefined) return changed ?? undefined;
    const i = this.find(name);
    if (i < 0) return undefined;
    const sig = this.table[2 * i + 1]!;
    return sig === ENTRY_IS_DIRECTORY ? this.dirs!.get(name) : sig;
  }

  set(name: string, value: ShadowEntry): void {
    (this.overlay ??= new Map()).set(name, value);
    this.settle();
  }

  delete(name: string): void {
    if (this.get(name) === undefined) return;
    (this.overlay ??= new Map()).set(name, null);
    this.settle();
  }

  /** Every entry, table and overlay together. */
  *entries(): IterableIterator<[string, ShadowEntry]> {
    for (let i = 0; i < this.size; i++) {
      const name = this.names.slice(this.table[2 * i], this.table[2 * i + 2]! - 1);
      if (this.overlay?.has(name)) continue;
      const sig = this.table[2 * i + 1]!;
      yield [name, sig === ENTRY_IS_DIRECTORY ? this.dirs!.get(name)! : sig];
    }
    for (const [name, value] of this.overlay ?? []) if (value !== null) yield [name, value];
  }

  /** The overlay merged into the table once it holds more than an eighth of it (and 32 changes). */
  private settle(): void {
    const size = this.overlay?.size ?? 0;
    if (size > 32 && size > this.size / 8) this.build([...this.entries()]);
  }
}

// Signatures: two 32-bit mixes of the node's fields, joined into one non-negative 53-bit number
// (never ENTRY_IS_DIRECTORY). Two different nodes share one with a chance of 2^-53. The two halves
// are kept here between calls (each signature is made at once, synchronously) so that hashing an
// entry allocates nothing.
const UNKNOWN = -1;
let hashA = 0;
let hashB = 0;
function mix(h: number, value: number): number {
  h = Math.imul(h ^ (value >>> 0), 0x85ebca6b);
  h = Math.imul(h ^ Math.floor(value / 4294967296), 0xc2b2ae35);
  return (h << 13) | (h >>> 19);
}
/** Starts a signature of a kind of value (its own seeds: a file never hashes like a link). */
function begin(kind: number): void {
  hashA = mix(0x9e3779b9, kind);
  hashB = mix(0x7f4a7c15, kind + 0x1b873593);
}
function add(value: number): void {
  hashA = mix(hashA, value);
  hashB = mix(hashB, value + 0x632be5ab);
}
function end(): number {
  return (hashA >>> 0) * 2097152 + ((hashB >>> 0) >>> 11);
}
const number = (value: bigint | null) => (value === null ? UNKNOWN : Number(value));

/** A directory's identity: its birth time (to the sub-millisecond), device and inode, hashed. */
export function identityOf(birthtimeMs: number, dev: number, ino: number): number {
  begin(4);
  add(birthtimeMs * 1000);
  add(dev);
  add(ino);
  return end();
}

/** A directory node's own signature: its `changes`, times and identity (not its entries'). */
export function dirSig(watched: boolean, created: bigint | null, modified: bigint | null, identity: number): number {
  begin(3);
  add(watched ? 1 : 0);
  add(number(created));
  add(number(modified));
  add(identity);
  return end();
}

/** A file node's signature: its size and times. */
export function fileSig(size: bigint | null, created: bigint | null, modified: bigint | null): number {
  begin(1);
  add(number(size));
  add(number(created));
  add(number(modified));
  return end();
}

/** A link node's signature: its target and times. */
export function linkSig(path: readonly string[], created: bigint | null, modified: bigint | null): number {
  begin(2);
  add(number(created));
  add(number(modified));
  add(path.length);
  for (const part of path) {
    for (let i = 0; i < part.length; i++) add(part.charCodeAt(i));
    add(0x2f);
  }
  return end();
}
