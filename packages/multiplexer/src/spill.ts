// A stream's backlog past its in-memory budget, kept on disk: the way nginx buffers an upstream
// answer for a slow client (`proxy_buffering`, `proxy_max_temp_file_size`). The multiplexed wire has
// no per-channel flow control, so a reader slower than its sender must either hold the whole
// connection (every channel waits) or keep what it cannot take yet somewhere. Here, what the sink
// cannot take within its budget is appended to anonymous temporary files (opened, then unlinked at
// once: nothing is left behind, whatever happens to the process), read back in order as the sink
// drains, and each file is closed as soon as it has been read whole. Memory stays at the sink's
// budget, a few in-flight disk writes and one read; disk use is capped per stream (`maxBytes`) and
// across every stream of a process (`SpillPool`). Past either cap the stream is `over`: its owner
// ends it, and only it.
//
// Messages keep their boundaries (a 4-byte length before each on disk), so a message sink (a
// WebSocket) gets the same messages in the same order, and a byte sink gets the same bytes.
import { close, open, read, unlink, writev } from "node:fs";
import { join } from "node:path";
import { tmpdir } from "node:os";
import { randomBytes } from "node:crypto";

/** Where a spilled stream goes: the socket it was headed for. */
export interface SpillSink {
  /** Bytes waiting in the sink's own buffer now. */
  readonly buffered: number;
  /** Writes one message; `flushed` is called once it has left the sink's buffer (or the sink failed). */
  write(message: Uint8Array, flushed: () => void): void;
  /** Optional: holds the writes that follow until `uncork` (a socket's cork), so the messages of one read back leave in one system call. */
  cork?(): void;
  uncork?(): void;
}

/** The disk use of every spilled stream of a process together, and its cap. */
export class SpillPool {
  /** Bytes on disk (or being written there) now, every stream together. */
  used = 0;
  /** The most ever used at once. */
  peak = 0;
  /** Streams that have spilled, ever. */
  spilledStreams = 0;
  constructor(
    /** Bytes every stream together may hold on disk. */
    readonly maxBytes: number,
    /** The directory of the temporary files. Default the OS's. */
    readonly dir: string = tmpdir(),
  ) {}

  /** Takes `bytes` of the cap; false (and nothing taken) when they do not fit. */
  take(bytes: number): boolean {
    if (this.used + bytes > this.maxBytes) return false;
    this.used += bytes;
    if (this.used > this.peak) this.peak = this.used;
    return true;
  }

  give(bytes: number): void {
    this.used -= bytes;
  }
}

export interface SpillOptions {
  /** Bytes the sink may hold in its own buffer; past it what arrives goes to disk. */
  readonly budgetBytes: number;
  /** Bytes this stream may hold on disk; past it the stream is over. */
  readonly maxBytes: number;
  readonly pool: SpillPool;
  /** The stream's backlog went past a disk cap (`which`); nothing more is written to the sink. */
  readonly over: (which: "stream" | "total") => void;
  /** Disk writes in flight past which the sender must wait; `hold(true)` asks to pause it, `hold(false)` to resume. */
  readonly hold?: (holding: boolean) => void;
  /** A temporary file could not be written or read: the stream is over too. */
  readonly failed?: (error: Error) => void;
  /** One disk write is done: its bytes and the milliseconds from its call to its callback (for counters). */
  readonly wrote?: (bytes: number, ms: number) => void;
}

/** Bytes of one temporary file before the next one is begun (a file is removed once read whole). */
const SEGMENT_BYTES = 16 * 1024 * 1024;
/** Bytes read back from disk at once. */
const READ_BYTES = 256 * 1024;
/** Disk writes in flight past which the sender is asked to wait. */
const WRITING_HIGH = 8 * 1024 * 1024;
/**
 * Bytes waiting at which a disk write begins at once; fewer wait for WRITE_DELAY_MS first, so
 * messages arriving one per turn (a socket's reads) go to disk in a few large writes, not one each.
 */
const WRITE_AT_BYTES = 256 * 1024;
const WRITE_DELAY_MS = 2;

interface Segment {
  fd: number;
  /** Bytes written (and being written) to it. */
  size: number;
  /** Bytes of it written to disk already. */
  written: number;
  /** Bytes of it read back. */
  readAt: number;
}

function openTemporary(dir: string): Promise<number> {
  const path = join(dir, `diverge-spill-${process.pid}-${randomBytes(6).toString("hex")}`);
  return new Promise((resolve, reject) =>
    open(path, "wx+", 0o600, (error, fd) => {
      if (error) return reject(error);
      unlink(path, () => resolve(fd));
    }),
  );
}

/** One stream toward a sink: within the budget straight to it, past it through disk, in order. */
export class SpillStream {
  private readonly segments: Segment[] = [];
  /** Messages waiting to be written to disk, with their length headers. */
  private pending: Buffer[] = [];
  private pendingBytes = 0;
  private busy = false;
  private ended = false;
  /** The delayed write of fewer than WRITE_AT_BYTES, while armed; `writeDue` once it fired. */
  private writeTimer: ReturnType<typeof setTimeout> | undefined;
  private writeDue = false;
  private holding = false;
  /** Bytes on disk or on their way there. */
  private diskBytes = 0;
  /** Messages that went through disk, and their bytes (for the counters). */
  spilledMessages = 0;
  spilledBytes = 0;
  /** The most this stream ever held on disk at once. */
  peakDiskBytes = 0;
  /** Disk writes (`writev` calls) made, and the milliseconds from each one's call to its callback together and at most. */
  diskWrites = 0;
  diskWriteMs = 0;
  maxDiskWriteMs = 0;
  /** Times disk writes fell behind and the sender was asked to wait (`hold(true)`), and for how many milliseconds together. */
  holds = 0;
  heldMs = 0;
  private heldSince = 0;

  constructor(
    private readonly sink: SpillSink,
    private readonly options: SpillOptions,
  ) {}

  /** Whether what arrives now goes through disk (something is still there, or on its way). */
  get spilling(): boolean {
    return this.diskBytes > 0;
  }

  /** Bytes held on disk now. */
  get onDisk(): number {
    return this.diskBytes;
  }

  /** One message for the sink, in order. */
  push(message: Uint8Array): void {
    if (this.ended) return;
    if (!this.spilling && this.sink.buffered <= this.options.budgetBytes) {
      this.sink.write(message, this.kick);
      return;
    }
    const bytes = 4 + message.length;
    if (this.diskBytes + bytes > this.options.maxBytes) return this.over("stream");
    if (!this.options.pool.take(bytes)) return this.over("total");
    if (this.diskBytes === 0) this.options.pool.spilledStreams++;
    this.diskBytes += bytes;
    if (this.diskBytes > this.peakDiskBytes) this.peakDiskBytes = this.diskBytes;
    this.spilledMessages++;
    this.spilledBytes += message.length;
    const head = Buffer.allocUnsafe(4);
    head.writeUInt32BE(message.length, 0);
    this.pending.push(head, Buffer.from(message.buffer, message.byteOffset, message.length));
    this.pendingBytes += bytes;
    if (!this.holding && this.pendingBytes > WRITING_HIGH && this.options.hold) {
      this.holding = true;
      this.holds++;
      this.heldSince = performance.now();
      this.options.hold(true);
    }
    this.kick();
  }

  /** The stream is over: its files are closed, its share of the pool given back, nothing more is written. */
  dispose(): void {
    if (this.ended) return;
    this.ended = true;
    clearTimeout(this.writeTimer);
    this.writeTimer = undefined;
    this.release();
    for (const segment of this.segments.splice(0)) close(segment.fd, () => {});
    this.options.pool.give(this.diskBytes);
    this.diskBytes = 0;
    this.pending = [];
    this.pendingBytes = 0;
  }

  private over(which: "stream" | "total"): void {
    this.dispose();
    this.options.over(which);
  }

  private release(): void {
    if (!this.holding) return;
    this.holding = false;
    this.heldMs += performance.now() - this.heldSince;
    this.options.hold?.(false);
  }

  /** Something may be done: write what waits to disk, read back what the sink has room for. */
  private readonly kick = (): void => {
    if (this.busy || this.ended || !this.spilling) return;
    this.busy = true;
    this.work().then(
      () => {
        this.busy = false;
        if (!this.ended && (this.pendingBytes >= WRITE_AT_BYTES || this.writeDue || this.roomToRead())) this.kick();
        else if (!this.ended && this.pendingBytes > 0) this.writeTimer ??= setTimeout(this.writeSoon, WRITE_DELAY_MS);
      },
      (error: Error) => {
        this.busy = false;
        if (this.ended) return;
        this.dispose();
        (this.options.failed ?? (() => this.options.over("stream")))(error);
      },
    );
  };

  private roomToRead(): boolean {
    const head = this.segments[0];
    return head !== undefined && head.readAt < head.written && this.sink.buffered <= this.options.budgetBytes / 2;
  }

  private async work(): Promise<void> {
    while (!this.ended) {
      if (this.pendingBytes >= WRITE_AT_BYTES || (this.pendingBytes > 0 && this.writeDue)) {
        this.writeDue = false;
        clearTimeout(this.writeTimer);
        this.writeTimer = undefined;
        await this.writeOut();
      } else if (this.roomToRead()) await this.readBack();
      else {
        // A few bytes wait: they go after a short delay, with whatever arrives meanwhile.
        if (this.pendingBytes > 0) this.writeTimer ??= setTimeout(this.writeSoon, WRITE_DELAY_MS);
        return;
      }
    }
  }

  private readonly writeSoon = (): void => {
    this.writeTimer = undefined;
    this.writeDue = true;
    this.kick();
  };

  private async writeOut(): Promise<void> {
    let tail = this.segments[this.segments.length - 1];
    if (tail === undefined || tail.size >= SEGMENT_BYTES) {
      const fd = await openTemporary(this.options.pool.dir);
      if (this.ended) return void close(fd, () => {});
      tail = { fd, size: 0, written: 0, readAt: 0 };
      this.segments.push(tail);
    }
    const buffers = this.pending;
    const bytes = this.pendingBytes;
    this.pending = [];
    this.pendingBytes = 0;
    const segment = tail;
    segment.size += bytes;
    let position = segment.written;
    let left = bytes;
    let list = buffers;
    while (left > 0) {
      const began = performance.now();
      const wrote = await new Promise<number>((resolve, reject) => writev(segment.fd, list, position, (error, n) => (error ? reject(error) : resolve(n))));
      const took = performance.now() - began;
      this.diskWrites++;
      this.diskWriteMs += took;
      if (took > this.maxDiskWriteMs) this.maxDiskWriteMs = took;
      this.options.wrote?.(wrote, took);
      if (this.ended) return;
      position += wrote;
      left -= wrote;
      if (left > 0) list = skip(list, wrote);
    }
    segment.written = position;
    if (this.pendingBytes <= WRITING_HIGH / 4) this.release();
  }

  private async readBack(): Promise<void> {
    const segment = this.segments[0]!;
    const available = segment.written - segment.readAt;
    let want = Math.min(READ_BYTES, available);
    let chunk = await readAt(segment.fd, want, segment.readAt);
    if (this.ended) return;
    // A message larger than one read: read it whole.
    if (chunk.length >= 4) {
      const first = 4 + chunk.readUInt32BE(0);
      if (first > chunk.length) {
        want = first;
        chunk = await readAt(segment.fd, want, segment.readAt);
        if (this.ended) return;
      }
    }
    let at = 0;
    this.sink.cork?.();
    try {
      while (at + 4 <= chunk.length) {
        const length = chunk.readUInt32BE(at);
        if (at + 4 + length > chunk.length) break;
        this.sink.write(chunk.subarray(at + 4, at + 4 + length), this.kick);
        at += 4 + length;
      }
    } finally {
      this.sink.uncork?.();
    }
    segment.readAt += at;
    this.diskBytes -= at;
    this.options.pool.give(at);
    if (segment.readAt === segment.size) {
      // Read whole (nothing more is on its way into it): removed.
      this.segments.shift();
      close(segment.fd, () => {});
    }
  }
}

function readAt(fd: number, length: number, position: number): Promise<Buffer> {
  const buffer = Buffer.allocUnsafe(length);
  return new Promise((resolve, reject) =>
    read(fd, buffer, 0, length, position, (error, n) => (error ? reject(error) : resolve(n === length ? buffer : buffer.subarray(0, n)))),
  );
}

/** The buffers left after the first `n` bytes. */
function skip(list: Buffer[], n: number): Buffer[] {
  const rest: Buffer[] = [];
  for (const buffer of list) {
    if (n >= buffer.length) {
      n -= buffer.length;
      continue;
    }
    rest.push(n > 0 ? buffer.subarray(n) : buffer);
    n = 0;
  }
  return rest;
}
