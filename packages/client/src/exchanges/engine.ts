// The generic pieces the generated provider surface (src/gen/exchanges.ts) is bound onto: turning a
// handler's result into answer messages (one, or a stream), and the shape of a channel engine for the
// typed asks of provider-opened channels. Nothing here names a kind; the descriptors do.
import type { ChannelDescriptor } from "@diverge/codec/exchanges";

/** What a handler knows of the ask it answers. */
export interface AnswerContext {
  /** The `/requests` channel, or the begin-scope channel number. */
  readonly channel: number;
  /** The answer path (`/vault/get/7`), or a description of the channel (`/ channel 7`). */
  readonly path: string;
  /**
   * Aborted when the answer path or channel has ended, whoever ended it; with an
   * {@link AnswerUndelivered} reason when the handler's answer came after the path had closed, so
   * nobody received it (a lock taken then is released by its handler).
   */
  readonly signal: AbortSignal;
}

/** The reason a handler's signal aborts when its answer came too late: the path had closed, and it was not sent. */
export class AnswerUndelivered extends Error {
  override readonly name = "AnswerUndelivered";
  constructor(readonly path: string) {
    super(`the answer on ${path} was not sent: the path had closed`);
  }
}

/** The one answer message of a one-message exchange: none when there is no handler or it declines. */
export async function* oneOf<A>(encode: (value: A) => Uint8Array, handler: ((context: AnswerContext) => Promise<A | undefined> | A | undefined) | undefined, context: AnswerContext): AsyncIterable<Uint8Array> {
  if (!handler) return;
  const answer = await handler(context);
  if (answer !== undefined) yield encode(answer);
}

/** The answer messages of a stream, one per value the handler yields, until it ends or the path does. */
export async function* streamOf<A>(encode: (value: A) => Uint8Array, handler: ((context: AnswerContext) => AsyncIterable<A>) | undefined, context: AnswerContext): AsyncIterable<Uint8Array> {
  if (!handler) return;
  for await (const value of handler(context)) {
    if (context.signal.aborted) return;
    yield encode(value);
  }
}

/** How a channel the provider opened ended, when it carried one answer. */
export type ChannelOutcome<A> =
  | { readonly type: "answered"; readonly answer: A }
  /** A finish with no response before it: what that means is the channel's `bareFinish`. */
  | { readonly type: "bareFinish"; readonly meaning: ChannelDescriptor["bareFinish"] }
  /** The connection ended before the finish. */
  | { readonly type: "lost" }
  | { readonly type: "unreadable"; readonly reason: string };

/** How a streamed channel ended: `done` after its finish (or its last variant), otherwise as a one-message channel. */
export type ChannelStreamEnding = { readonly type: "done" } | Exclude<ChannelOutcome<never>, { readonly type: "answered" }>;

/**
 * A streamed channel's events, delivered in the turn their frame arrives (an iterator delivers them some
 * microtasks later, after the answers of other channels read in the same turn).
 */
export interface ChannelStreamListener<A> {
  /** One answer, in order. */
  answer(answer: A): void;
  /** A message that did not decode; the channel goes on. */
  unreadable(reason: string): void;
  /** The channel ended: `done` after its finish or its last variant, `bareFinish`, or `lost`. */
  end(ending: Exclude<ChannelStreamEnding, { readonly type: "unreadable" }>): void;
}

/** Every answer of a streamed channel, in order; `ended` says how it ended (the first unreadable message ends it). */
export interface ChannelStream<A> extends AsyncIterable<A> {
  readonly ended: Promise<ChannelStreamEnding>;
  /**
   * Delivers every event to `listener` as its frame arrives, instead of iterating (do not do both).
   * Call it in the turn the stream was opened, before its first frame can arrive. An unreadable message
   * settles `ended` but the listener goes on receiving what follows it, up to the channel's end.
   */
  listen(listener: ChannelStreamListener<A>): void;
}

/** Opens a channel with `request` and reads its answers as the descriptor says. */
export interface ChannelAskEngine<R> {
  one<V extends string, A>(channel: ChannelDescriptor<V, A>, request: R): Promise<ChannelOutcome<A>>;
  stream<V extends string, A>(channel: ChannelDescriptor<V, A>, request: R): ChannelStream<A>;
}
