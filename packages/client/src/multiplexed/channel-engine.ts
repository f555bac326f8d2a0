// The generic engine the generated `ProviderAsks` (src/gen/exchanges.ts) is bound onto on the
// multiplexed connection: it opens a channel of the provider's on a scope with the request's bytes and
// reads the answers as the channel's descriptor says (the answer frame's decoder, the message pattern,
// the variant sent last, what a bare finish means). It never names a kind or a variant; the
// descriptors do.
import type { ChannelDescriptor } from "@diverge/codec/exchanges";
import { checkMcp } from "@diverge/codec/mcp";
import type { AnswerHandlers } from "@diverge/multiplexer";
import type { ChannelAskEngine, ChannelOutcome, ChannelStream, ChannelStreamEnding, ChannelStreamListener } from "../exchanges/engine.js";

export interface ChannelEngineOptions<R> {
  /** Writes the channel request's bytes (the scope's channel request frame). */
  readonly encode: (request: R) => Uint8Array;
  /**
   * Opens a channel with `payload` on the scope, its answers going to `handlers`. What it throws
   * (no scope to open on) `one` rejects with and `stream` throws.
   */
  readonly open: (payload: Uint8Array, handlers: AnswerHandlers) => void;
}

/** The answer read with the channel's decoder (MCP JSON checked where the frame names an MCP type). */
function decodeOn<A>(channel: ChannelDescriptor<string, A>, bytes: Uint8Array): { answer: A } | { reason: string } {
  try {
    return { answer: channel.answer!.decode(bytes, { check: checkMcp }) };
  } catch (problem) {
    return { reason: problem instanceof Error ? problem.message : String(problem) };
  }
}

/** Whether `answer` is the variant the descriptor says is sent last. */
function isLast(channel: ChannelDescriptor, answer: unknown): boolean {
  return channel.last !== undefined && typeof answer === "object" && answer !== null && (answer as { variant?: unknown }).variant === channel.last;
}

/** A channel engine over a connection's channels (see {@link ChannelEngineOptions}). */
export function channelAskEngine<R>(options: ChannelEngineOptions<R>): ChannelAskEngine<R> {
  const requireAnswer = (channel: ChannelDescriptor) => {
    if (!channel.answer) throw new TypeError(`channel ${channel.variant} has no answer frame to read`);
  };
  return {
    one<V extends string, A>(channel: ChannelDescriptor<V, A>, request: R): Promise<ChannelOutcome<A>> {
      return new Promise<ChannelOutcome<A>>((resolve) => {
        requireAnswer(channel);
        // The first message is the answer; it is read once the channel finishes.
        let first: Uint8Array | undefined;
        options.open(options.encode(request), {
          response: (payload) => {
            first ??= payload.slice();
          },
          finish: (served) => {
            if (!served || !first) return resolve({ type: "bareFinish", meaning: channel.bareFinish });
            const read = decodeOn(channel, first);
            resolve("answer" in read ? { type: "answered", answer: read.answer } : { type: "unreadable", reason: read.reason });
          },
          lost: () => resolve({ type: "lost" }),
        });
      });
    },

    stream<V extends string, A>(channel: ChannelDescriptor<V, A>, request: R): ChannelStream<A> {
      requireAnswer(channel);
      let settle!: (ending: ChannelStreamEnding) => void;
      const ended = new Promise<ChannelStreamEnding>((resolve) => (settle = resolve));
      let outcome: ChannelStreamEnding | undefined;
      const settleOnce = (ending: ChannelStreamEnding) => {
        if (outcome) return;
        outcome = ending;
        settle(ending);
      };
      let over = false;
      // Until `listen`, the events feed the iterator; once its loop has stopped, answers are not kept.
      const queue: A[] = [];
      let stopped = false;
      let wake: (() => void) | undefined;
      const rouse = () => {
        wake?.();
        wake = undefined;
      };
      let listener: ChannelStreamListener<A> = {
        answer: (answer) => {
          if (outcome || stopped) return;
          queue.push(answer);
          rouse();
        },
        unreadable: (reason) => {
          settleOnce({ type: "unreadable", reason });
          rouse();
        },
        end: (ending) => {
          settleOnce(ending);
          rouse();
        },
      };
      const end = (ending: Exclude<ChannelStreamEnding, { readonly type: "unreadable" }>) => {
        if (over) return;
        over = true;
        settleOnce(ending);
        listener.end(ending);
      };
      options.open(options.encode(request), {
        response: (payload) => {
          if (over) return;
          const read = decodeOn(channel, payload);
          if ("reason" in read) {
            settleOnce({ type: "unreadable", reason: read.reason });
            listener.unreadable(read.reason);
            return;
          }
          listener.answer(read.answer);
          // The variant sent last ends the stream; what follows it until the finish is disregarded.
          if (isLast(channel, read.answer)) end({ type: "done" });
        },
        finish: (served) => end(served ? { type: "done" } : { type: "bareFinish", meaning: channel.bareFinish }),
        lost: () => end({ type: "lost" }),
      });
      return {
        ended,
        listen(taker) {
          listener = taker;
        },
        async *[Symbol.asyncIterator]() {
          try {
            for (;;) {
              if (queue.length > 0) {
                yield queue.shift()!;
                continue;
              }
              if (outcome) return;
              await new Promise<void>((resolve) => (wake = resolve));
            }
          } finally {
            stopped = true;
            queue.length = 0;
          }
        },
      };
    },
  };
}
