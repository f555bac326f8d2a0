// The run loop on the multiplexed transport (agents.md §6): the queue is the proxy's. One driver owns
// the queue, the one delivery in flight, the run state and the `halted` flag; every call to the
// program is a task of its own that reports back to it, and after every event one post-step decides
// what starts next. Transport-free: the adapter (multiplexed.ts) gives it the program, the gate and
// where chunks go, and answers the channels with the fates.
import type { Say } from "@diverge/multiplexer/log";
import type { AgentMessage } from "@diverge/codec";

/** A message's fate, sent once on its enqueue channel. */
export type Fate = { readonly variant: "Delivered" } | { readonly variant: "Dequeued" } | { readonly variant: "Refused"; readonly error: unknown };

/** What a dequeue found. */
export type DequeueResult = { readonly variant: "Withdrew" } | { readonly variant: "Nothing" } | { readonly variant: "Failed"; readonly error: unknown };

/** How `POST /run` answered: a loop runs (its events follow), or nothing ran. */
export type RunStart = { readonly ok: true; readonly events: AsyncIterable<string> } | { readonly ok: false; readonly error: unknown };

/** How `POST /enqueue` answered: a fate, a refusal (4xx, final), or a failure that hands the message back (5xx, unreachable, a body that does not parse). */
export type Delivery = { readonly type: "delivered" | "dequeued" | "missed" } | { readonly type: "refused"; readonly error: unknown } | { readonly type: "failed"; readonly error: unknown };

/** How `POST /dequeue` answered. */
export type ProgramDequeue = { readonly type: "dequeued" | "empty" } | { readonly type: "failed"; readonly error: unknown };

/** The program, as the driver asks it. Every call ends when `signal` aborts. */
export interface AgentProgram {
  run(messages: readonly AgentMessage[], signal: AbortSignal): Promise<RunStart>;
  enqueue(message: AgentMessage, signal: AbortSignal): Promise<Delivery>;
  dequeue(key: string, signal: AbortSignal): Promise<ProgramDequeue>;
}

export interface RunLoopOptions {
  readonly program: AgentProgram;
  /** The secrets gate: no `/run` and no `/enqueue` reaches the program until it is open. */
  readonly gate: { readonly isOpen: boolean; pass(): Promise<void> };
  /** One event's data of the loop in flight, in order; the relay waits for what it returns. */
  readonly chunk: (data: string) => void | Promise<void>;
  /** Aborted when the connection ends: the driver ends and every call to the program with it. */
  readonly signal: AbortSignal;
  readonly log: Say;
}

/** The error of a `/run` call that died without an answer (agents.md §6.2). */
export const RUN_CALL_DIED = { kind: "agent", error: "the call that was to start the run died" } as const;

interface Waiting {
  readonly message: AgentMessage;
  /** Sends the fate; only the first call does anything. */
  readonly settle: (fate: Fate) => void;
  /** A dequeue of its key came while it was in flight. */
  withdrawn: boolean;
}

type RunState = { readonly phase: "idle" } | { readonly phase: "starting"; readonly batch: readonly Waiting[] } | { readonly phase: "active" };

const DELIVERED: Fate = { variant: "Delivered" };
const DEQUEUED: Fate = { variant: "Dequeued" };

export class RunLoop {
  private queue: Waiting[] = [];
  private inFlight: Waiting | undefined;
  private state: RunState = { phase: "idle" };
  private halted = false;
  private waitingForGate = false;
  private ended = false;

  constructor(private readonly options: RunLoopOptions) {
    if (options.signal.aborted) this.ended = true;
    else options.signal.addEventListener("abort", () => this.end(), { once: true });
  }

  /** What the driver holds now (for tests and logs). */
  get status(): { readonly phase: RunState["phase"]; readonly queued: number; readonly inFlight: boolean; readonly halted: boolean; readonly ended: boolean } {
    return { phase: this.state.phase, queued: this.queue.length, inFlight: this.inFlight !== undefined, halted: this.halted, ended: this.ended };
  }

  /** An enqueue channel: the message joins the back of the queue; `answer` is called once, with its fate. */
  enqueue(message: AgentMessage, answer: (fate: Fate) => void): void {
    if (this.ended) return;
    let answered = false;
    const settle = (fate: Fate) => {
      // Exactly once, and never after the connection has ended (its channels are over).
      if (answered || this.ended) return;
      answered = true;
      answer(fate);
    };
    this.queue.push({ message, settle, withdrawn: false });
    this.step();
  }

  /** A dequeue channel (agents.md §6.4). */
  async dequeue(key: string): Promise<DequeueResult> {
    const drained = this.queue.filter((waiting) => waiting.message.key === key);
    this.queue = this.queue.filter((waiting) => waiting.message.key !== key);
    for (const waiting of drained) waiting.settle(DEQUEUED);
    // The loop in flight holds it but may not have taken it: its answer decides (missed → dequeued).
    if (this.inFlight?.message.key === key) this.inFlight.withdrawn = true;
    const some: DequeueResult = drained.length > 0 ? { variant: "Withdrew" } : { variant: "Nothing" };
    if (this.state.phase !== "active") return some;
    let outcome: ProgramDequeue;
    try {
      outcome = await this.options.program.dequeue(key, this.options.signal);
    } catch (problem) {
      outcome = { type: "failed", error: { kind: "agent", error: `the dequeue call died: ${problem instanceof Error ? problem.message : String(problem)}` } };
    }
    if (outcome.type === "failed") return { variant: "Failed", error: outcome.error };
    return outcome.type === "dequeued" ? { variant: "Withdrew" } : some;
  }

  /** The connection ended: nothing more starts, nothing more is answered; the calls in flight are aborted by the signal. */
  private end(): void {
    this.ended = true;
    this.queue = [];
    this.inFlight = undefined;
  }

  /** The post-step: the only place work begins. */
  private step(): void {
    if (this.ended) return;
    if (!this.options.gate.isOpen) {
      if (this.queue.length > 0 && !this.waitingForGate) {
        this.waitingForGate = true;
        this.options.log("the secrets gate holds the agent's queue until the program takes its secrets");
        void this.options.gate.pass().then(() => {
          this.waitingForGate = false;
          this.step();
        });
      }
      return;
    }
    if (this.state.phase === "idle" && this.queue.length > 0) {
      const batch = this.queue;
      this.queue = [];
      this.state = { phase: "starting", batch };
      void this.start(batch);
      return;
    }
    if (this.state.phase === "active" && !this.halted && !this.inFlight && this.queue.length > 0) {
      const next = this.queue.shift()!;
      this.inFlight = next;
      void this.deliver(next);
    }
  }

  private async start(batch: readonly Waiting[]): Promise<void> {
    let started: RunStart;
    try {
      started = await this.options.program.run(
        batch.map((waiting) => waiting.message),
        this.options.signal,
      );
    } catch {
      started = { ok: false, error: RUN_CALL_DIED };
    }
    if (this.ended) return;
    if (!started.ok) {
      // Nothing ran: every message of the batch is refused with that one error.
      for (const waiting of batch) waiting.settle({ variant: "Refused", error: started.error });
      this.state = { phase: "idle" };
      this.options.log(`the program did not start a loop on ${batch.length} message(s)`);
      return this.step();
    }
    for (const waiting of batch) waiting.settle(DELIVERED);
    this.state = { phase: "active" };
    this.options.log(`a loop started on ${batch.length} message(s)`);
    this.step();
    try {
      for await (const data of started.events) {
        if (this.ended) return;
        await this.options.chunk(data);
      }
    } catch {
      // A stream that dies ends the relay exactly as a clean end does (no marker in A4d).
      this.options.log("the loop's event stream died");
    }
    if (this.ended) return;
    this.state = { phase: "idle" };
    this.halted = false;
    this.options.log("the loop ended");
    this.step();
  }

  private async deliver(waiting: Waiting): Promise<void> {
    let delivery: Delivery;
    try {
      delivery = await this.options.program.enqueue(waiting.message, this.options.signal);
    } catch (problem) {
      delivery = { type: "failed", error: problem };
    }
    if (this.ended) return;
    this.inFlight = undefined;
    switch (delivery.type) {
      case "delivered":
        waiting.settle(DELIVERED);
        break;
      case "dequeued":
        waiting.settle(DEQUEUED);
        break;
      case "refused":
        // Final: never offered again.
        waiting.settle({ variant: "Refused", error: delivery.error });
        break;
      default:
        // Missed, the program's own failure, or a fate that does not parse: the message is handed back.
        if (waiting.withdrawn) waiting.settle(DEQUEUED);
        else {
          this.queue.unshift(waiting);
          this.halted = true;
          this.options.log(`a delivery into the loop in flight was not taken (${delivery.type}); it waits at the front for the next loop`);
        }
    }
    this.step();
  }
}
