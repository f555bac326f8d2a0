// A write's content as it arrives, taken by the write at its own pace: shared by filesystem::write on
// the multiplexed connection and /filesystem/write on the paths transport.
import { BacklogHold } from "@diverge/multiplexer";
import { FsError } from "./path-checks.js";

/** Pauses reading the sender's socket; the returned function resumes it. */
export type Flow = () => () => void;

/** Content bytes waiting for the disk past which the sender's socket is paused (at most a quarter of the bound); resumed below half. */
const HIGH_WATER = 8 * 1024 * 1024;

/**
 * The content pieces as they arrive, taken by the write at its own pace. The queue is this write's
 * budget: up to HIGH_WATER bytes waiting the sender's socket is read on (other streams on it flow);
 * past it the socket is paused (a provider that sends faster than the disk takes it waits) until the
 * queue is below half of it; past `maxBytes` (what arrives while paused) the write fails rather than
 * holding more.
 */
export class ContentQueue implements AsyncIterable<Uint8Array> {
  private readonly pieces: Uint8Array[] = [];
  private bytes = 0;
  private done = false;
  private failure: unknown;
  private wake: (() => void) | undefined;
  private readonly hold: BacklogHold | undefined;

  constructor(
    private readonly maxBytes: number,
    flow?: Flow,
  ) {
    const highWater = Math.max(2, Math.min(HIGH_WATER, Math.floor(maxBytes / 4)));
    this.hold = flow ? new BacklogHold(flow, highWater, Math.floor(highWater / 2)) : undefined;
  }

  push(piece: Uint8Array): void {
    if (this.done || this.failure !== undefined) return;
    this.bytes += piece.length;
    if (this.bytes > this.maxBytes) return this.fail(new FsError("content", `more than ${this.maxBytes} bytes of content arrived before they could be written`));
    this.pieces.push(piece);
    this.hold?.update(this.bytes);
    this.poke();
  }

  end(): void {
    this.done = true;
    this.poke();
  }

  fail(problem: unknown): void {
    if (this.failure !== undefined) return;
    this.failure = problem;
    this.pieces.length = 0;
    this.bytes = 0;
    this.hold?.dispose();
    this.poke();
  }

  private poke(): void {
    const wake = this.wake;
    this.wake = undefined;
    wake?.();
  }

  async *[Symbol.asyncIterator](): AsyncIterator<Uint8Array> {
    try {
      for (;;) {
        if (this.failure !== undefined) throw this.failure;
        const piece = this.pieces.shift();
        if (piece) {
          this.bytes -= piece.length;
          this.hold?.update(this.bytes);
          yield piece;
          continue;
        }
        if (this.done) return;
        await new Promise<void>((resolve) => (this.wake = resolve));
      }
    } finally {
      this.hold?.dispose();
    }
  }
}
