// The generic engine of a standing stream on `/requests`: a stream the proxy keeps for its life
// rather than asks per request (the generated `ProxyStandingAsks`, src/gen/exchanges.ts, binds each
// onto it). Everything it does comes from the exchange's descriptor:
// - it is first asked once the board has announced an exchange of one of `standing.after`;
// - each message is read with the answer frame's decoder; the `last` variant, when sent, is the last
//   message (anything after it is disregarded); a message that does not decode closes the path;
// - when its path ends abruptly before its last message, it is asked again at once when `unanswered`
//   says so; a clean close with no message at all is not served, and never asked again when
//   `notServed` says so; any other end (a clean close after messages, the last message, a message
//   that did not decode) asks it again on the next `/requests` connection (`standing.ended`), so a
//   provider that ends the stream is not asked again in a loop on the same connection.
// Nothing here names a kind; the descriptors do.
import type { DecodeError } from "@diverge/codec";
import type { ExchangeDescriptor } from "@diverge/codec/exchanges";
import type { AnswerPath, AskBoard, AskOwner, PathEnding } from "../paths/board.js";
import { decodeAnswer, encodeAskOnRequests } from "./engine.js";

/** What happened to a standing stream besides its answers. */
export type StandingEvent =
  /** The ask was sent under `channel`. */
  | { readonly type: "asked"; readonly channel: number }
  /** The provider opened the answer path of `channel`. */
  | { readonly type: "opened"; readonly channel: number }
  /** A message did not decode (the decoder's exact error); the proxy closed the path. */
  | { readonly type: "unreadable"; readonly channel: number; readonly error: DecodeError }
  /** The path ended; `reask` says when the proxy asks again. */
  | { readonly type: "ended"; readonly channel: number; readonly ending: PathEnding; readonly reask: "now" | "nextConnection" | "never" };

/** Where a standing stream's answers and events go. */
export interface StandingSink<A> {
  /** One decoded answer message, in order (the last variant included, when sent). */
  answer(answer: A, channel: number): void;
  event(event: StandingEvent): void;
}

/** Keeps standing streams: the generated `bindProxyStandingAsks` is bound onto one. */
export interface StandingAskEngine {
  standing<K extends string, A>(exchange: ExchangeDescriptor<K, A>, ask: object, sink: StandingSink<A>): void;
}

export interface StandingEngineOptions {
  readonly board: AskBoard;
  /** Writes the whole `/requests` message of an ask. Default {@link encodeAskOnRequests}. */
  readonly encodeAsk?: (channel: number, kindName: string, ask: object) => Uint8Array;
}

/** Keeps each standing stream on the board's `/requests` for the proxy's life. */
export class StandingEngine implements StandingAskEngine {
  constructor(private readonly options: StandingEngineOptions) {}

  standing<K extends string, A>(exchange: ExchangeDescriptor<K, A>, ask: object, sink: StandingSink<A>): void {
    const rule = exchange.standing;
    if (!rule || !exchange.answer) throw new TypeError(`exchange ${exchange.id} is not a standing stream with an answer frame`);
    new StandingStream(this.options.board, exchange, rule, this.options.encodeAsk ?? encodeAskOnRequests, ask, sink);
  }
}

class StandingStream<A> implements AskOwner {
  readonly kind: AskOwner["kind"];
  private started = false;
  private declined = false;
  /** Set while waiting for a `/requests` connection newer than this number. */
  private waitingPast: number | undefined;

  constructor(
    private readonly board: AskBoard,
    private readonly exchange: ExchangeDescriptor<string, A>,
    rule: NonNullable<ExchangeDescriptor["standing"]>,
    private readonly encodeAsk: (channel: number, kindName: string, ask: object) => Uint8Array,
    private readonly ask: object,
    private readonly sink: StandingSink<A>,
  ) {
    this.kind = exchange.kindName as AskOwner["kind"];
    const after: ReadonlySet<string> = new Set(rule.after);
    board.onEvent((event) => {
      if (event.type === "announced" && after.has(event.kind)) this.start();
      if (event.type === "requestsOpened" && this.waitingPast !== undefined && event.connection > this.waitingPast) {
        this.waitingPast = undefined;
        this.board.ask(this);
      }
    });
  }

  /** The first exchange it waits for has been announced: the first call asks. */
  private start(): void {
    if (this.started) return;
    this.started = true;
    this.board.ask(this);
  }

  encode(channel: number): Uint8Array {
    return this.encodeAsk(channel, this.exchange.kindName, this.ask);
  }

  announced(channel: number): void {
    this.sink.event({ type: "asked", channel });
  }

  opened(path: AnswerPath) {
    const { exchange, sink } = this;
    const channel = path.channel;
    let messages = 0;
    let finished: "last" | "unreadable" | undefined;
    sink.event({ type: "opened", channel });
    return {
      message: (bytes: Uint8Array) => {
        if (finished) return;
        messages++;
        const read = decodeAnswer(exchange, bytes);
        if (!("answer" in read)) {
          finished = "unreadable";
          sink.event({ type: "unreadable", channel, error: read.error });
          path.close();
          return;
        }
        // The last variant, when sent, is the last message; anything after it is disregarded.
        if (exchange.last !== undefined && (read.answer as { variant?: string }).variant === exchange.last) finished = "last";
        sink.answer(read.answer, channel);
      },
      ended: (ending: PathEnding) => {
        if (this.declined) return;
        if (ending.how === "clean" && messages === 0 && exchange.notServed === "neverAskedAgain") {
          this.declined = true;
          sink.event({ type: "ended", channel, ending, reask: "never" });
          return;
        }
        if (ending.how === "abrupt" && !finished && exchange.unanswered === "askedAgain") {
          sink.event({ type: "ended", channel, ending, reask: "now" });
          this.board.ask(this);
          return;
        }
        // Asked again on the next connection (`standing.ended`).
        sink.event({ type: "ended", channel, ending, reask: "nextConnection" });
        if (this.board.requestsOpen) this.waitingPast = this.board.connection;
        else this.board.ask(this);
      },
    };
  }
}
