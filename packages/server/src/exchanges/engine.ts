// The generic engine the generated `ProxyAsks` (src/gen/exchanges.ts) is bound onto: it asks any
// exchange of the `/requests` table on the ask board and reads its answer path as the exchange's
// descriptor says: the answer frame's decoder, the message pattern, and whether an unanswered
// exchange is asked again. It never names a kind; the descriptors do.
import type { Say } from "@diverge/multiplexer/log";
import { DecodeError, encodeRequestsAsk } from "@diverge/codec";
import type { ExchangeDescriptor } from "@diverge/codec/exchanges";
import { checkMcp, loadMcpChecks } from "../mcp-checks.js";
import type { AnswerPath, AskBoard, AskOwner, PathEnding } from "../paths/board.js";

/** How a one-message exchange ended, from the program's point of view. */
export type AskOutcome<A> =
  /** The answer arrived and its path closed cleanly. */
  | { readonly type: "answered"; readonly answer: A }
  /** The path closed cleanly with no message: not served, never asked again. */
  | { readonly type: "notServed"; readonly channel: number }
  /** An exchange never asked again whose path ended abruptly, or whose `/requests` ended before the path opened: outcome unknown. */
  | { readonly type: "lost" }
  /** The answer did not decode; the text is the decoder's exact error. */
  | { readonly type: "unreadable"; readonly channel: number; readonly error: DecodeError }
  /** The provider sent a message over the proxy's limit. */
  | { readonly type: "answerTooLarge"; readonly channel: number; readonly limit: number }
  /** The ask itself is larger than one message may be; it was never sent. */
  | { readonly type: "askTooLarge"; readonly bytes: number; readonly limit: number }
  /** The caller gave up (its signal aborted) before an answer; the exchange is forgotten. */
  | { readonly type: "aborted" };

/** How a stream ended: `done` after its messages and a clean close; otherwise as a one-message exchange. */
export type StreamEnding = { readonly type: "done" } | Exclude<AskOutcome<never>, { readonly type: "answered" }> | { readonly type: "overflow"; readonly limit: number };

export interface AskOptions {
  /** Aborting forgets the exchange: its answer, if any comes, is disregarded and its path closed. */
  readonly signal?: AbortSignal;
  /**
   * An exchange given up (its signal aborted) may be answered after all: a proxy-opened begin-scope
   * channel cannot be withdrawn, and an answer path may carry its answer while it closes. That answer
   * then comes here instead of being disregarded.
   * A vault lock granted to a program that has gone is released through it.
   */
  readonly answeredAfterAbort?: (answer: unknown) => void;
  /**
   * Streams only: once the answers held for a reader that does not pull reach this many bytes, the
   * answer path stops being read (TCP backpressure reaches the provider) until the reader has taken
   * half of them; without it a reader that does not pull ends the stream at `maxBufferedMessages`.
   */
  readonly pauseAtBytes?: number;
  /**
   * The ask waits for no later `/requests` connection: made while none is open (or while the one
   * open is closing), or still unsent when it ends, it is `lost` at once. Operations a program waits
   * on in the kernel (FUSE) use it, so a provider gone fails them with EIO, never holds them.
   */
  readonly whileConnected?: boolean;
}

/** Every answer message of a stream, in order; `ended` says how it ended once iteration stops. */
export interface AskStream<A> extends AsyncIterable<A> {
  readonly ended: Promise<StreamEnding>;
}

export interface AskEngine {
  one<K extends string, A>(exchange: ExchangeDescriptor<K, A>, ask: object, options?: AskOptions): Promise<AskOutcome<A>>;
  stream<K extends string, A>(exchange: ExchangeDescriptor<K, A>, ask: object, options?: AskOptions): AskStream<A>;
}

/** The whole `/requests` message of an ask: its channel, its kind and the kind's own fields. */
export function encodeAskOnRequests(channel: number, kindName: string, ask: object): Uint8Array {
  return encodeRequestsAsk({ channel, variant: kindName, ...ask } as Parameters<typeof encodeRequestsAsk>[0]);
}

/** From this many bytes on, an ask's tail (its `askTail` field) is sent after the rest of the ask, not joined with it. */
const TAIL_APART_BYTES = 64 * 1024;
const NO_BYTES = new Uint8Array(0);

/**
 * The ask's `/requests` message: whole, or, when its tail field holds a large body (a file written
 * back whole), as the ask encoded with that field empty and then the field's bytes. The same bytes,
 * and the body is not copied into a second buffer as large as itself.
 */
export function askMessage(exchange: ExchangeDescriptor, channel: number, ask: object, encodeAsk: (channel: number, kindName: string, ask: object) => Uint8Array): Uint8Array | readonly Uint8Array[] {
  const field = exchange.askTail;
  const tail = field === undefined ? undefined : (ask as Record<string, unknown>)[field];
  if (!(tail instanceof Uint8Array) || tail.length < TAIL_APART_BYTES) return encodeAsk(channel, exchange.kindName, ask);
  return [encodeAsk(channel, exchange.kindName, { ...ask, [field!]: NO_BYTES }), tail];
}

export interface RequestsEngineOptions {
  readonly board: AskBoard;
  /** Writes the whole `/requests` message of an ask. Default {@link encodeAskOnRequests}. */
  readonly encodeAsk?: (channel: number, kindName: string, ask: object) => Uint8Array;
  /** Messages a stream holds for a reader that does not pull; past it the path is closed. Default 4096. */
  readonly maxBufferedMessages?: number;
  readonly log?: Say;
}

/** Reads an answer message with the exchange's decoder; its typed error (JSON nested too deeply included) is unreadable. */
export function decodeAnswer<A>(exchange: ExchangeDescriptor<string, A>, bytes: Uint8Array): { answer: A } | { error: DecodeError } {
  try {
    return { answer: exchange.answer!.decode(bytes, { check: checkMcp }) };
  } catch (problem) {
    if (problem instanceof DecodeError) return { error: problem };
    throw problem;
  }
}

/** The `/requests` transport's engine: every exchange an ask on the board, its answer read from its path. */
export class RequestsEngine implements AskEngine {
  private readonly maxBuffered: number;
  private readonly log: Say;

  constructor(private readonly options: RequestsEngineOptions) {
    this.maxBuffered = options.maxBufferedMessages ?? 4096;
    this.log = options.log ?? (() => {});
  }

  async one<K extends string, A>(exchange: ExchangeDescriptor<K, A>, ask: object, options: AskOptions = {}): Promise<AskOutcome<A>> {
    if (!exchange.answer) throw new TypeError(`exchange ${exchange.id} has no answer frame to read`);
    // The answer's MCP checks are loaded (on first use) before the ask goes out.
    await loadMcpChecks();
    const { board, encodeAsk = encodeAskOnRequests } = this.options;
    const log = this.log;
    return new Promise((resolve) => {
      let settled = false;
      let current: AnswerPath | undefined;
      const settle = (outcome: AskOutcome<A>) => {
        if (settled) return;
        settled = true;
        options.signal?.removeEventListener("abort", onAbort);
        resolve(outcome);
      };
      const onAbort = () => {
        current?.close();
        settle({ type: "aborted" });
      };
      if (options.signal?.aborted) return settle({ type: "aborted" });
      options.signal?.addEventListener("abort", onAbort, { once: true });
      const owner: AskOwner = {
        kind: exchange.kindName as AskOwner["kind"],
        encode: (channel) => askMessage(exchange, channel, ask, encodeAsk),
        refused: (bytes, limit) => settle({ type: "askTooLarge", bytes, limit }),
        withdrawn: () => settled,
        ...(options.whileConnected ? { unsent: () => settle({ type: "lost" }) } : {}),
        lostWithConnection: () => {
          if (settled) return false;
          if (exchange.unanswered === "askedAgain") return true;
          settle({ type: "lost" });
          return false;
        },
        opened: (path) => {
          current = path;
          if (settled) path.close();
          let answer: Uint8Array | undefined;
          return {
            // Exactly one message is the rule; should more arrive, the first is the answer.
            message: (bytes) => {
              answer ??= bytes;
            },
            ended: (ending: PathEnding) => {
              current = undefined;
              if (settled) {
                // Answered while the path was closing after the caller gave up: the caller may still act on it.
                if (answer && ending.how === "clean" && options.answeredAfterAbort) {
                  const late = decodeAnswer(exchange, answer);
                  if ("answer" in late) options.answeredAfterAbort(late.answer);
                }
                return;
              }
              if (ending.how === "abrupt") {
                if (exchange.unanswered === "askedAgain") {
                  log(`${exchange.pathPrefix}${path.channel} ended abruptly; asking again`);
                  board.ask(owner);
                } else settle({ type: "lost" });
                return;
              }
              const channel = path.channel;
              if (ending.how === "tooLarge") return settle({ type: "answerTooLarge", channel, limit: ending.limit });
              if (!answer) return settle({ type: "notServed", channel });
              const read = decodeAnswer(exchange, answer);
              settle("answer" in read ? { type: "answered", answer: read.answer } : { type: "unreadable", channel, error: read.error });
            },
          };
        },
      };
      board.ask(owner);
    });
  }

  stream<K extends string, A>(exchange: ExchangeDescriptor<K, A>, ask: object, options: AskOptions = {}): AskStream<A> {
    if (!exchange.answer) throw new TypeError(`exchange ${exchange.id} has no answer frame to read`);
    const { board, encodeAsk = encodeAskOnRequests } = this.options;
    const maxBuffered = this.maxBuffered;
    const log = this.log;
    // A queue read from `head` (Array.shift is O(n) on a long array: with 1 MiB of small command items
    // waiting, ~35,000 of them, it was half of the proxy's CPU); compacted once half of it is read.
    const buffered: (A | undefined)[] = [];
    const sizes: number[] = [];
    let head = 0;
    let bufferedBytes = 0;
    let paused: AnswerPath | undefined;
    const pauseAt = options.pauseAtBytes;
    let ending: StreamEnding | undefined;
    let wake: (() => void) | undefined;
    let resolveEnded!: (ending: StreamEnding) => void;
    const ended = new Promise<StreamEnding>((resolve) => (resolveEnded = resolve));
    let current: AnswerPath | undefined;
    const finish = (e: StreamEnding) => {
      if (ending) return;
      ending = e;
      options.signal?.removeEventListener("abort", onAbort);
      resolveEnded(e);
      wake?.();
    };
    const onAbort = () => {
      // A paused path reads again, so its close completes.
      paused?.resume();
      paused = undefined;
      current?.close();
      finish({ type: "aborted" });
    };
    if (options.signal?.aborted) finish({ type: "aborted" });
    else options.signal?.addEventListener("abort", onAbort, { once: true });

    const owner: AskOwner = {
      kind: exchange.kindName as AskOwner["kind"],
      encode: (channel) => askMessage(exchange, channel, ask, encodeAsk),
      refused: (bytes, limit) => finish({ type: "askTooLarge", bytes, limit }),
      withdrawn: () => ending !== undefined,
      ...(options.whileConnected ? { unsent: () => finish({ type: "lost" }) } : {}),
      lostWithConnection: () => {
        if (ending) return false;
        if (exchange.unanswered === "askedAgain") return true;
        finish({ type: "lost" });
        return false;
      },
      opened: (path) => {
        current = path;
        if (ending) path.close();
        let count = 0;
        let lastSeen = false;
        return {
          message: (bytes) => {
            if (ending || lastSeen) return;
            const read = decodeAnswer(exchange, bytes);
            if (!("answer" in read)) {
              path.close();
              return finish({ type: "unreadable", channel: path.channel, error: read.error });
            }
            count++;
            if (pauseAt !== undefined) {
              sizes.push(bytes.length);
              bufferedBytes += bytes.length;
              if (!paused && bufferedBytes >= pauseAt) {
                paused = path;
                path.pause();
              }
            } else if (buffered.length - head >= maxBuffered) {
              path.close();
              return finish({ type: "overflow", limit: maxBuffered });
            }
            buffered.push(read.answer);
            // The stream's last variant, when sent, is its last message: what follows is disregarded.
            if (exchange.last !== undefined && (read.answer as { variant?: string }).variant === exchange.last) lastSeen = true;
            wake?.();
          },
          ended: (pathEnding: PathEnding) => {
            current = undefined;
            if (ending) return;
            if (pathEnding.how === "abrupt") {
              if (exchange.unanswered === "askedAgain" && count === 0) {
                log(`${exchange.pathPrefix}${path.channel} ended abruptly; asking again`);
                board.ask(owner);
                return;
              }
              return finish({ type: "lost" });
            }
            if (pathEnding.how === "tooLarge") return finish({ type: "answerTooLarge", channel: path.channel, limit: pathEnding.limit });
            finish(count === 0 ? { type: "notServed", channel: path.channel } : { type: "done" });
          },
        };
      },
    };
    // The answer's MCP checks are loaded (on first use) before the ask goes out.
    void loadMcpChecks().then(
      () => {
        if (!ending) board.ask(owner);
      },
      () => finish({ type: "lost" }),
    );

    return {
      ended,
      async *[Symbol.asyncIterator]() {
        try {
          for (;;) {
            if (buffered.length > head) {
              const answer = buffered[head] as A;
              buffered[head] = undefined;
              const size = pauseAt !== undefined ? sizes[head]! : 0;
              head++;
              if (head >= 1024 && head * 2 >= buffered.length) {
                buffered.splice(0, head);
                if (pauseAt !== undefined) sizes.splice(0, head);
                head = 0;
              }
              if (pauseAt !== undefined) {
                bufferedBytes -= size;
                // Read again once half of what paused it has been taken.
                if (paused && bufferedBytes < pauseAt / 2) {
                  paused.resume();
                  paused = undefined;
                }
              }
              yield answer;
              continue;
            }
            if (ending) return;
            await new Promise<void>((resolve) => (wake = resolve));
            wake = undefined;
          }
        } finally {
          // A reader that stops early gives the exchange up.
          if (!ending) onAbort();
        }
      },
    };
  }
}
