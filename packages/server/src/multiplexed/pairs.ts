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
// - Provider → program: the multiplexed wire has no flow control of its own, so this is a hybrid.
//   What the provider sends on a pair's channel is written to that program's socket; when the program
//   reads slower, it waits in that socket's buffer, and the connection keeps being read (a slow pair
//   within its budget stalls no other channel). Past the pair's budget (`pairBudgetBytes`, 2 MiB) the
//   pair holds the connection's reading paused (TCP backpressure on the provider, every channel waits)
//   until its socket drains to a quarter of the budget: a provider that sends faster than the driver
//   reads is slowed down, never cut. Two things still end a pair, and only it: a program that reads
//   nothing for `pairStallMs` (10 s) while its pair holds the connection paused (it would stall every
//   channel for good), and more than `maxPairBacklogBytes` (64 MiB, the hard cap) unread, which only a
//   connection that cannot pause (or a bound set below one message) lets happen. Then the program's
//   socket is closed, the provider's half is finished (as when the program closes it), the log says
//   so, and whatever the provider still sends on the proxy's half is discarded until it finishes it.
import { BacklogHold, type AnswerHandlers, type OpenedChannel } from "@diverge/multiplexer";

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
  readonly log: (line: string) => void;
}

/** Send-buffer level of the provider connection above which a program's socket is paused. */
export const HIGH_WATER = 1024 * 1024;
/** Level at which it is resumed. */
export const LOW_WATER = 256 * 1024;
/** Default of `maxPairBacklogBytes`, the hard cap: bytes a program's socket may hold unread before its pair ends. */
export const DEFAULT_PAIR_BACKLOG_BYTES = 64 * 1024 * 1024;
/** Default of `pairBudgetBytes`: bytes a program's socket may hold unread before its pair pauses the connection. */
export const DEFAULT_PAIR_BUDGET_BYTES = 2 * 1024 * 1024;
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
  };
}

/**
 * The provider → program direction of one pair: the program's socket buffers up to the budget; past
 * it the pair holds the connection paused until the socket drains to a quarter of the budget, and a
 * program that reads nothing for `stallMs` meanwhile is told to `stalled`.
 */
export class ProgramBacklog {
  private readonly hold: BacklogHold;
  private stallTimer: NodeJS.Timeout | undefined;

  constructor(link: PairLink, options: PairOptions, stats: PairStats, stalled: () => void) {
    const budget = Math.max(1, Math.min(options.budgetBytes, Math.floor(options.maxBacklogBytes / 2)));
    this.hold = new BacklogHold(() => link.pauseIncoming(), budget, Math.floor(budget / 4), (holding) => {
      if (holding) {
        stats.pausedConnection++;
        stats.holdingNow++;
        this.stallTimer = setTimeout(stalled, options.stallMs);
        this.stallTimer.unref?.();
      } else {
        stats.holdingNow--;
        clearTimeout(this.stallTimer);
        this.stallTimer = undefined;
      }
    });
  }

  /** Bytes waiting in the program's socket after a write. */
  wrote(waiting: number): void {
    this.hold.update(waiting);
  }

  /** A write left the socket's buffer (the program is reading): the stall timer starts over. */
  flushed(waiting: number): void {
    this.stallTimer?.refresh();
    this.hold.update(waiting);
  }

  /** The pair is over: the connection is no longer held for it. */
  dispose(): void {
    this.hold.dispose();
  }
}
