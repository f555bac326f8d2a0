// What a FUSE mount asks and what it is answered: one typed async handler per ask of fs-fuse.md
// §4.3 (generation F4), with the answers of §4.4–§4.6. Paths are relative to the mount's root,
// `/`-separated, no leading `/`; the empty path is the mount itself.

/** Seconds since the Unix epoch and nanoseconds (fs-fuse.md §4.4 `time`). */
export interface FuseTime {
  readonly secs: bigint;
  readonly nanos: number;
}

export interface FuseStat {
  readonly kind: "file" | "directory";
  /** Byte length; 0 for a directory. */
  readonly size: bigint;
  /** Permission bits only, e.g. 0o644. */
  readonly mode: number;
  readonly uid: number;
  readonly gid: number;
  readonly atime: FuseTime;
  readonly mtime: FuseTime;
  readonly ctime: FuseTime;
}

export interface FuseEntry {
  readonly name: string;
  readonly kind: "file" | "directory";
}

/** The fields a setattr changes; an absent field is left as it is. */
export interface FuseAttrs {
  readonly mode?: number;
  readonly uid?: number;
  readonly gid?: number;
  readonly atime?: FuseTime;
  readonly mtime?: FuseTime;
}

/** Ack: done, refused with a reason (EIO inside), or refused because the volume is read-only (EROFS). */
export type FuseAckResult = { readonly kind: "ok" } | { readonly kind: "error"; readonly message: string } | { readonly kind: "readOnly" };
export type FuseReadResult = { readonly kind: "data"; readonly bytes: Uint8Array } | { readonly kind: "missing" } | { readonly kind: "error"; readonly message: string };
export type FuseStatResult = { readonly kind: "stat"; readonly stat: FuseStat } | { readonly kind: "missing" } | { readonly kind: "error"; readonly message: string };
export type FuseListResult = { readonly kind: "entries"; readonly entries: readonly FuseEntry[] } | { readonly kind: "missing" } | { readonly kind: "error"; readonly message: string };

/**
 * The nine asks. A handler that rejects (the provider did not serve the ask, the connection ended,
 * the answer did not decode) makes the program's operation fail with EIO; it is never asked again.
 */
export interface FuseHandlers {
  /**
   * At most `length` bytes from `offset`. The bytes given back are the caller's until the answer has
   * been sent: they are written into the answer's frame as they are, not copied first, so a handler
   * gives a buffer it does not fill again for a later read.
   */
  read(path: string, offset: bigint, length: number): Promise<FuseReadResult>;
  write(path: string, offset: bigint, bytes: Uint8Array): Promise<FuseAckResult>;
  list(path: string): Promise<FuseListResult>;
  remove(path: string): Promise<FuseAckResult>;
  rename(from: string, to: string): Promise<FuseAckResult>;
  mkdir(path: string): Promise<FuseAckResult>;
  stat(path: string): Promise<FuseStatResult>;
  truncate(path: string, size: bigint): Promise<FuseAckResult>;
  setattr(path: string, attrs: FuseAttrs): Promise<FuseAckResult>;
}

/** The most bytes one read ask may ask for (each read(2) is one ask). */
export const FUSE_CHUNK_SIZE = 2 * 1024 * 1024;
