// What a provider holds of an agent container, whichever transport carries it: the Agent API
// (enqueue, dequeue, the chunk stream, info, secrets), the fates, and the chunk hub both adapters feed.
import type { AgenticLoopChunk, ContentBlock } from "@diverge/codec";
import type { ContainerInfo } from "../info/front-matter.js";
import type { DeclaredTool } from "../../multiplexed/container.js";
import type { RequestOptions } from "../../waiting.js";

/** The begin of an agent container: its run's `arguments` (handed to the program once) and, optionally, its image. */
export interface AgentBeginRequest {
  readonly arguments: unknown;
  readonly image?: { readonly name: string; readonly digest: string };
}

/** A message's fate: a loop took it, or a dequeue of its key withdrew it first. A refusal rejects instead. */
export type EnqueueFate = "delivered" | "dequeued";

export interface EnqueueOptions {
  /**
   * Stops waiting for the fate: the promise rejects with `Aborted`. The message itself stays where it
   * is (nothing on the wire withdraws one message); `dequeue(key)` withdraws it.
   */
  readonly signal?: AbortSignal;
}

export interface ChunksOptions {
  /** Ends the iteration once the chunks already received are taken (the loop returns). */
  readonly signal?: AbortSignal;
}

export interface SettledOptions {
  /**
   * How long the agent must be quiet (no chunk, no fate pending, no ask of its own in flight) to be
   * taken as idle, on a transport that does not mark a loop's end (the multiplexed A4d scope). Default 2000.
   */
  readonly idleMs?: number;
  readonly signal?: AbortSignal;
}

/** Something the agent's stream carried that is not a chunk to hand on. */
export type AgentEvent =
  /** A chunk that is none of the fourteen (its frame's typed error); it is skipped. */
  | { readonly type: "unreadableChunk"; readonly reason: string }
  /** An A5 loop marker (`[03]` Active, `[04]` Inactive): skipped by `chunks()`, used by `settled()`. */
  | { readonly type: "loopMarker"; readonly marker: "active" | "inactive" }
  /** A loop on the paths transport ended with the proxy's error (`/agent/run` refused, or its stream died). */
  | { readonly type: "loopFailed"; readonly error: unknown };

/** An agent container, begun. */
export interface Agent {
  /** Which transport carries it. */
  readonly transport: "multiplexed" | "paths";
  /** The tools the program declared when it took the arguments (`[]` on the paths transport, whose register answers none). */
  readonly tools: readonly DeclaredTool[];
  /** The proxy's message limit (its --max-message-bytes) this agent's messages must fit, in bytes. */
  readonly maxMessageBytes: number;
  /**
   * How many bytes a message under `key` takes on the wire (the channel's frame, or the path's message,
   * that its enqueue sends). One over `maxMessageBytes` is not sent: `enqueue` rejects with `TooLarge`.
   */
  enqueueBytes(key: string, content: string | readonly ContentBlock[]): number;
  /**
   * The one way into the agent: a message under `key` (the provider's handle, not unique). Resolves
   * with its fate when it is known, however long that takes (no timeout): `delivered` once a loop took
   * it, `dequeued` when a dequeue of its key withdrew it first. Rejects with ContainerError `Refused`
   * (the program's words) when the program would not take it, `TooLarge` (not sent, the connection
   * unharmed) when it is over the proxy's message limit, or `NotServed`/`Lost`/`Unreadable`.
   * A string is one text block.
   */
  enqueue(key: string, content: string | readonly ContentBlock[], options?: EnqueueOptions): Promise<EnqueueFate>;
  /** Withdraws every message waiting under `key`; true when one or more were. */
  dequeue(key: string, options?: RequestOptions): Promise<boolean>;
  /**
   * The loop's chunks, typed, in the order the program produced them, from the call on (chunks that
   * came while no iteration was open are handed to the next one). Ends when the agent ends.
   */
  chunks(options?: ChunksOptions): AsyncIterable<AgenticLoopChunk>;
  /**
   * Resolves once the agent is idle as far as the provider can tell: every enqueue has its fate and the
   * loop has ended (paths: its stream ended; multiplexed: an A5 `[04]`, or `idleMs` of quiet with no ask
   * of the agent's own in flight, since A4d marks no loop's end), or the agent ended.
   */
  settled(options?: SettledOptions): Promise<void>;
  /** The container's `DIVERGE.md` (on paths: the program's schema as the front matter's `arguments`). */
  info(options?: RequestOptions): Promise<ContainerInfo | undefined>;
  /** Feeds the secrets' values (the proxy holds every enqueue until the program has taken them). */
  feedSecrets(values: Record<string, string>, options?: RequestOptions): Promise<void>;
  /** Sees what the stream carried besides chunks; returns the removal. */
  onEvent(listener: (event: AgentEvent) => void): () => void;
  /** Resolves when the agent has ended (the connection or the begin scope ended). */
  ended(): Promise<void>;
}

/** A message's content as blocks: a string is one text block. */
export function contentOf(content: string | readonly ContentBlock[]): ContentBlock[] {
  return typeof content === "string" ? [{ type: "text", text: content }] : [...content];
}

/**
 * The chunks of one agent to every iteration open, and the bookkeeping `settled()` reads: when the
 * last chunk came, how many fates and asks are pending, and whether the agent has ended.
 */
export class ChunkHub {
  private readonly sinks = new Set<{ queue: AgenticLoopChunk[]; wake?: () => void }>();
  /** Held while no iteration is open, for the next one. */
  private held: AgenticLoopChunk[] = [];
  private static readonly HELD_LIMIT = 10_000;
  private over = false;
  private readonly endWaiters: (() => void)[] = [];
  private readonly listeners = new Set<(event: AgentEvent) => void>();
  private readonly changeWaiters = new Set<() => void>();
  /** When the last chunk (or marker) came. */
  lastActivity = Date.now();
  /** Enqueues whose fate is not known yet. */
  pendingFates = 0;
  /** Asks of the agent's own (proxy-opened exchanges) being answered. */
  asksInFlight = 0;
  /** Whether a loop is known to run (paths: a `/agent/run` open; multiplexed: between A5 markers). */
  loopRunning = false;
  /** Whether this transport marks each loop's end (then idleness is not guessed). */
  marksLoopEnd = false;

  get isOver(): boolean {
    return this.over;
  }

  push(chunk: AgenticLoopChunk): void {
    if (this.over) return;
    this.lastActivity = Date.now();
    if (this.sinks.size === 0) {
      if (this.held.length < ChunkHub.HELD_LIMIT) this.held.push(chunk);
    } else
      for (const sink of this.sinks) {
        sink.queue.push(chunk);
        sink.wake?.();
      }
    this.changed();
  }

  emit(event: AgentEvent): void {
    this.lastActivity = Date.now();
    for (const listener of this.listeners) {
      try {
        listener(event);
      } catch {
        // A listener's failure is its own.
      }
    }
    this.changed();
  }

  onEvent(listener: (event: AgentEvent) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  /** Something `settled()` reads changed. */
  changed(): void {
    for (const wake of [...this.changeWaiters]) wake();
  }

  end(): void {
    if (this.over) return;
    this.over = true;
    for (const sink of this.sinks) sink.wake?.();
    for (const resolve of this.endWaiters.splice(0)) resolve();
    this.changed();
  }

  ended(): Promise<void> {
    if (this.over) return Promise.resolve();
    return new Promise((resolve) => this.endWaiters.push(resolve));
  }

  chunks(options?: ChunksOptions): AsyncIterable<AgenticLoopChunk> {
    const hub = this;
    return {
      async *[Symbol.asyncIterator]() {
        const sink: { queue: AgenticLoopChunk[]; wake?: () => void } = { queue: hub.held.splice(0) };
        hub.held = [];
        hub.sinks.add(sink);
        const signal = options?.signal;
        const onAbort = () => sink.wake?.();
        signal?.addEventListener("abort", onAbort);
        try {
          for (;;) {
            if (sink.queue.length > 0) {
              yield sink.queue.shift()!;
              continue;
            }
            if (hub.over || signal?.aborted) return;
            await new Promise<void>((resolve) => (sink.wake = resolve));
            sink.wake = undefined;
          }
        } finally {
          signal?.removeEventListener("abort", onAbort);
          hub.sinks.delete(sink);
        }
      },
    };
  }

  /** See {@link Agent.settled}. */
  settled(options?: SettledOptions): Promise<void> {
    const idleMs = options?.idleMs ?? 2000;
    const signal = options?.signal;
    return new Promise<void>((resolve, reject) => {
      let timer: ReturnType<typeof setTimeout> | undefined;
      const done = (action: () => void) => {
        if (timer) clearTimeout(timer);
        this.changeWaiters.delete(check);
        signal?.removeEventListener("abort", onAbort);
        action();
      };
      const onAbort = () => done(() => reject(signal!.reason ?? new Error("aborted")));
      const check = () => {
        if (timer) clearTimeout(timer);
        timer = undefined;
        if (this.over) return done(resolve);
        if (this.pendingFates > 0 || this.asksInFlight > 0 || this.loopRunning) return;
        if (this.marksLoopEnd) return done(resolve);
        const quiet = Date.now() - this.lastActivity;
        if (quiet >= idleMs) return done(resolve);
        timer = setTimeout(check, idleMs - quiet);
      };
      if (signal?.aborted) return onAbort();
      signal?.addEventListener("abort", onAbort, { once: true });
      this.changeWaiters.add(check);
      check();
    });
  }
}
