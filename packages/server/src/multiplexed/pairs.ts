// The pair engine: what the postgres and daemon families share to carry a program's connection (TCP to
// the proxy's postgres listener, or WebSocket to the proxy's `/daemon`) as two channels on the begin
// scope. The proxy announces it on a channel of its own under a fresh id; the provider opens its half
// quoting the id. Nothing is read from the program's socket before the provider's half is open. The
// pairs themselves are in families/postgres/multiplexed.ts and families/daemon/multiplexed.ts.
//
// Buffering is bounded both ways, and per channel:
// - Program → provider: the program's socket pauses while the provider connection's send buffer is
//   above HIGH_WATER and resumes once it drains to LOW_WATER, so a provider that does not read pushes
//   back on the program (TCP), not into the proxy's memory.
// - Provider → program: the multiplexed wire has no flow control of its own. What the provider sends
//   on a pair's channel is written to that program's socket up to the pair's budget
//   (`pairBudgetBytes`, 2 MiB); past it the rest spills to a temporary file (SpillStream in
//   @diverge/multiplexer) and is written to the socket in order as the program reads. The connection
//   keeps being read: a slow reader is never cut and stalls no other channel. Only a disk cap ends a
//   pair (`maxPairSpillBytes` for it, `maxSpillBytes` for every pair together), or more than
//   `maxPairBacklogBytes` (64 MiB, the hard cap) in the socket itself. Then the program's socket is
//   closed, the provider's half is finished (as when the program closes it), the log says so, and
//   whatever the provider still sends on the proxy's half is discarded until it finishes it. With
//   spilling off (`maxPairSpillBytes` 0) a pair past its budget pauses the connection instead until
//   its socket drains to a quarter, and a program that reads nothing for `pairStallMs` meanwhile is cut.
import type { Say } from "@diverge/multiplexer/log";
import { BacklogHold, SpillStream, type AnswerHandlers, type OpenedChannel, type SpillPool, type SpillSink } from "@diverge/multiplexer";

/** What a pair needs of the provider connection. */
export interface PairLink {
  /** Resolves once `Begun` has been sent; rejects when the connection ends first. */
  readonly begun: Promise<void>;
  /** Whether the connection has ended: no pair is made any more. */
  readonly ended: boolean;
  /** Opens a proxy channel on the begin scope; undefined when the connection has ended. */
  openChannel(payload: Uint8Array, handlers: AnswerHandlers): OpenedChannel | undefined;
  readonly bufferedAmount: number;
  /** Resolves once at most `lowWater` bytes wait in the connection's send buffer, or it has closed. */
  drained(lowWater: number): Promise<void>;
  /** Stops reading the connection until the returned function is called (counted: paused while any hold). */
  pauseIncoming(): () => void;
}

export interface PairOptions {
  /** The hard cap: bytes from the provider one program socket may hold unread before its pair ends. */
  readonly maxBacklogBytes: number;
  /** Bytes one program socket may hold unread before its pair pauses the connection (clamped to half the hard cap). */
  readonly budgetBytes: number;
  /** How long a pair may hold the connection paused while its program reads nothing before the pair ends. */
  readonly stallMs: number;
  /** Bytes one pair may hold on disk (past the budget) before it ends; 0: no spilling (the budget pauses the connection). */
  readonly spillBytes: number;
  /** Every pair's disk use together, and its cap. */
  readonly spillPool: SpillPool;
  readonly log: Say;
}

/** Send-buffer level of the provider connection above which a program's socket is paused. */
export const HIGH_WATER = 1024 * 1024;
/** Level at which it is resumed. */
export const LOW_WATER = 256 * 1024;
/** Default of `maxPairBacklogBytes`, the hard cap: bytes a program's socket may hold unread before its pair ends. */
export const DEFAULT_PAIR_BACKLOG_BYTES = 64 * 1024 * 1024;
/** Default of `pairBudgetBytes`: bytes a program's socket may hold unread before its pair pauses the connection. */
export const DEFAULT_PAIR_BUDGET_BYTES = 2 * 1024 * 1024;
/** Default of `maxPairSpillBytes`: bytes one pair may hold on disk for a slow program (nginx's `proxy_max_temp_file_size` is 1 GiB too). */
export const DEFAULT_PAIR_SPILL_BYTES = 1024 * 1024 * 1024;
/** Default of `maxSpillBytes`: bytes every pair of the proxy together may hold on disk. */
export const DEFAULT_SPILL_BYTES = 4 * 1024 * 1024 * 1024;
/** Default of `pairStallMs`: how long a pair may keep the connection paused with its program reading nothing. */
export const DEFAULT_PAIR_STALL_MS = 10_000;

/** Traffic of the postgres (or daemon) pairs, for the proxy's report and the tests. */
export interface PairStats {
  /** Frames and bytes the provider sent toward the program (database → driver, daemon → program). */
  toProgramFrames: number;
  toProgramBytes: number;
  /** Frames and bytes sent toward the provider (program → database or daemon). */
  toProviderFrames: number;
  toProviderBytes: number;
  /** The most bytes ever waiting unread in one program socket's write buffer. */
  maxProgramBuffered: number;
  /** The most bytes ever waiting in the provider connection's send buffer after a pair's frame. */
  maxProviderBuffered: number;
  /** Connections announced. */
  announced: number;
  /** Pairs ended because their program left more than the hard cap unread. */
  endedOverBacklog: number;
  /** Times a pair past its budget paused the connection (resumed once its program read it down). */
  pausedConnection: number;
  /** Pairs ended because their program read nothing for `pairStallMs` while they held the connection paused. */
  endedStalled: number;
  /** Pairs holding the connection paused now. */
  holdingNow: number;
  /** Bytes the provider sent on pairs already ended (discarded). */
  discardedBytes: number;
  /** Times a pair began to spill to disk (its program read slower than the budget allows). */
  spilled: number;
  /** Bytes that went through disk. */
  spilledBytes: number;
  /** The most bytes one pair ever held on disk. */
  maxSpilledBytes: number;
  /** Pairs ended at a disk cap (theirs or every pair's together) or because their file failed. */
  endedOverSpill: number;
  /** Disk writes of spilled pairs (`writev` calls), and their milliseconds (call to callback) together and at most. */
  spillWrites: number;
  spillWriteMs: number;
  maxSpillWriteMs: number;
  /** Times a spilling pair's disk writes fell behind and it paused the connection, and the milliseconds it was paused so. */
  spillHolds: number;
  spillHeldMs: number;
}

export function emptyPairStats(): PairStats {
  return {
    toProgramFrames: 0,
    toProgramBytes: 0,
    toProviderFrames: 0,
    toProviderBytes: 0,
    maxProgramBuffered: 0,
    maxProviderBuffered: 0,
    announced: 0,
    endedOverBacklog: 0,
    pausedConnection: 0,
    endedStalled: 0,
    holdingNow: 0,
    discardedBytes: 0,
    spilled: 0,
    spilledBytes: 0,
    maxSpilledBytes: 0,
    endedOverSpill: 0,
    spillWrites: 0,
    spillWriteMs: 0,
    maxSpillWriteMs: 0,
    spillHolds: 0,
    spillHeldMs: 0,
  };
}

/** Why a pair's program side was ended by the proxy. */
export type PairCut = "stalled" | "over-backlog" | "over-spill" | "over-spill-total" | "spill-failed";

/** What one pair says of each cut, for the log. */
export function cutReason(cut: PairCut, options: PairOptions): string {
  switch (cut) {
    case "stalled":
      return `read nothing for ${options.stallMs} ms while the connection waited on it`;
    case "over-backlog":
      return `left more than ${options.maxBacklogBytes} bytes unread`;
    case "over-spill":
      return `left more than ${options.spillBytes} bytes unread on disk (maxPairSpillBytes)`;
    case "over-spill-total":
      return `could not spill: every pair together holds ${options.spillPool.maxBytes} bytes on disk (maxSpillBytes)`;
    case "spill-failed":
      return "could not spill: its temporary file could not be written or read";
  }
}

/**
 * The provider → program direction of one pair. With spilling on (the default), what the program's
 * socket cannot take within the budget goes to a temporary file and back, in order, and the pair
 * ends only past its disk cap (or the pool's). With spilling off (`spillBytes` 0), the program's
 * socket buffers up to the budget; past it the pair holds the connection paused until the socket
 * drains to a quarter of the budget, and a program that reads nothing for `stallMs` meanwhile is cut.
 */
export class ProgramBacklog {
  private readonly hold: BacklogHold | undefined;
  private readonly spill: SpillStream | undefined;
  private stallTimer: NodeJS.Timeout | undefined;
  private writeHold: (() => void) | undefined;
  private writeHeldSince = 0;
  private over = false;

  constructor(
    link: PairLink,
    private readonly options: PairOptions,
    private readonly stats: PairStats,
    private readonly sink: SpillSink,
    private readonly cut: (why: PairCut) => void,
  ) {
    const budget = Math.max(1, Math.min(options.budgetBytes, Math.floor(options.maxBacklogBytes / 2)));
    if (options.spillBytes > 0) {
      this.spill = new SpillStream(
        {
          get buffered() {
            return sink.buffered;
          },
          write: (message, flushed) => this.write(message, flushed),
          cork: sink.cork && (() => sink.cork!()),
          uncork: sink.uncork && (() => sink.uncork!()),
        },
        {
          budgetBytes: budget,
          maxBytes: options.spillBytes,
          pool: options.spillPool,
          over: (which) => this.end(which === "stream" ? "over-spill" : "over-spill-total"),
          failed: () => this.end("spill-failed"),
          // Disk writes fall behind the wire (rare): the connection waits for them, briefly.
          hold: (holding) => {
            if (holding) {
              if (this.writeHold) return;
              stats.spillHolds++;
              this.writeHeldSince = performance.now();
              this.writeHold = link.pauseIncoming();
            } else this.releaseWriteHold();
          },
          wrote: (_bytes, ms) => {
            stats.spillWrites++;
            stats.spillWriteMs += ms;
            if (ms > stats.maxSpillWriteMs) stats.maxSpillWriteMs = ms;
          },
        },
      );
      return;
    }
    this.hold = new BacklogHold(() => link.pauseIncoming(), budget, Math.floor(budget / 4), (holding) => {
      if (holding) {
        stats.pausedConnection++;
        stats.holdingNow++;
        this.stallTimer = setTimeout(() => this.end("stalled"), options.stallMs);
        this.stallTimer.unref?.();
      } else {
        stats.holdingNow--;
        clearTimeout(this.stallTimer);
        this.stallTimer = undefined;
      }
    });
  }

  /** Bytes of this pair held on disk now. */
  get onDisk(): number {
    return this.spill?.onDisk ?? 0;
  }

  /** One message from the provider for the program, in order. */
  send(message: Uint8Array): void {
    if (this.over) return;
    if (this.spill) {
      const before = this.spill.spilledBytes;
      const wasSpilling = this.spill.spilling;
      this.spill.push(message);
      if (this.spill.spilledBytes !== before) {
        this.stats.spilledBytes += message.length;
        if (!wasSpilling) this.stats.spilled++;
        if (this.spill.onDisk > this.stats.maxSpilledBytes) this.stats.maxSpilledBytes = this.spill.onDisk;
      }
      return;
    }
    this.write(message, this.flushed);
    this.hold?.update(this.sink.buffered);
  }

  private write(message: Uint8Array, flushed: () => void): void {
    this.sink.write(message, flushed);
    const waiting = this.sink.buffered;
    if (waiting > this.stats.maxProgramBuffered) this.stats.maxProgramBuffered = waiting;
    if (waiting > this.options.maxBacklogBytes) this.end("over-backlog");
  }

  /** A write left the socket's buffer (the program is reading): the stall timer starts over. */
  private readonly flushed = (): void => {
    if (this.over) return;
    this.stallTimer?.refresh();
    this.hold?.update(this.sink.buffered);
  };

  private end(why: PairCut): void {
    if (this.over) return;
    if (why === "stalled") this.stats.endedStalled++;
    else if (why === "over-backlog") this.stats.endedOverBacklog++;
    else this.stats.endedOverSpill++;
    this.dispose();
    this.cut(why);
  }

  private releaseWriteHold(): void {
    if (!this.writeHold) return;
    this.stats.spillHeldMs += performance.now() - this.writeHeldSince;
    this.writeHold();
    this.writeHold = undefined;
  }

  /** The pair is over: the connection is no longer held for it, its temporary files are gone. */
  dispose(): void {
    this.over = true;
    this.hold?.dispose();
    this.spill?.dispose();
    this.releaseWriteHold();
    clearTimeout(this.stallTimer);
  }
}
