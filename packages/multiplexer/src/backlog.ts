// One stream's share of the connection's flow control. The multiplexed wire has no flow control of
// its own, so each stream buffers what it cannot hand on yet (up to its budget), and past that budget
// it holds the connection's reading paused (TCP backpressure on the sender) until its own backlog has
// drained to the low-water mark. A slow stream within its budget never stalls the others; a stream
// past it stalls them only until it drains.

/** Hysteresis on one stream's backlog: holds `pause()` above `highWater`, releases at `lowWater` or below. */
export class BacklogHold {
  private release: (() => void) | undefined;
  /** How many times this stream held the connection paused. */
  holds = 0;

  constructor(
    /** Pauses reading the connection; the returned function resumes it (counted: paused while any hold). */
    private readonly pause: () => () => void,
    readonly highWater: number,
    readonly lowWater: number,
    /** Told when a hold begins and when it ends. */
    private readonly changed?: (holding: boolean) => void,
  ) {
    if (!(lowWater < highWater)) throw new RangeError(`the low-water mark (${lowWater}) must be below the high-water mark (${highWater})`);
  }

  get holding(): boolean {
    return this.release !== undefined;
  }

  /** The stream's backlog now: above the high-water mark the connection is paused, at or below the low one resumed. */
  update(backlog: number): void {
    if (this.release === undefined) {
      if (backlog <= this.highWater) return;
      this.release = this.pause();
      this.holds++;
      this.changed?.(true);
    } else if (backlog <= this.lowWater) {
      this.dispose();
    }
  }

  /** The stream is over: whatever it held is released. */
  dispose(): void {
    const release = this.release;
    if (release === undefined) return;
    this.release = undefined;
    release();
    this.changed?.(false);
  }
}
