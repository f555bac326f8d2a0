// Which transport carries an exchange the proxy asks (project decision): once a provider has begun
// tools on `/`, an exchange whose descriptor names a proxy-opened begin-scope channel goes on that
// scope; before that, or on a proxy no provider has begun, it goes on `/requests`. A channel is asked
// exactly once: a bare finish is not served, a connection that ends first loses the exchange.
// Nothing here names a kind or a tag; the descriptors carry both.
import { DecodeError, encodeToolsBeginServerChannelRequest } from "@diverge/codec";
import type { ExchangeDescriptor } from "@diverge/codec/exchanges";
// The provider's connection on `/` is accepted only once the MCP checks are loaded, so a begin scope
// never reads an answer before they are.
import { checkMcp } from "../mcp-checks.js";
import type { AnswerHandlers, OpenedChannel } from "@diverge/multiplexer";
import { type AskEngine, type AskOptions, type AskOutcome, type AskStream, type StreamEnding } from "./engine.js";

/** The begin scope of the provider's connection, while it is begun. */
export interface BeginScopeLink {
  /** The connection the scope belongs to: the same object for every link of one connection. */
  readonly key?: object;
  /** Opens a proxy channel with `payload`; undefined when the connection has ended meanwhile. */
  openChannel(payload: Uint8Array, handlers: AnswerHandlers): OpenedChannel | undefined;
}

/** The whole channel request of a proxy-opened channel: its variant and the exchange's own fields. */
export function encodeProxyChannelRequest(variant: string, ask: object): Uint8Array {
  return encodeToolsBeginServerChannelRequest({ variant, ...ask } as Parameters<typeof encodeToolsBeginServerChannelRequest>[0]);
}

function decode<A>(exchange: ExchangeDescriptor<string, A>, bytes: Uint8Array): { answer: A } | { error: DecodeError } {
  try {
    return { answer: exchange.answer!.decode(bytes, { check: checkMcp }) };
  } catch (problem) {
    if (problem instanceof DecodeError) return { error: problem };
    throw problem;
  }
}

/** A channel request frame's header: its type, scope and channel (multiplexed.md §2). */
const CHANNEL_REQUEST_HEADER_BYTES = 9;

export class TransportChoice implements AskEngine {
  constructor(
    /** The begin scope when a provider has begun tools on `/`, else undefined. */
    private readonly beginScope: () => BeginScopeLink | undefined,
    /** The `/requests` engine. */
    private readonly requests: AskEngine,
    /** The proxy's message limit: a channel request frame over it is refused (askTooLarge), never sent. */
    private readonly maxMessageBytes?: number,
  ) {}

  private link(exchange: ExchangeDescriptor): BeginScopeLink | undefined {
    return exchange.channel?.opener === "proxy" && exchange.answer ? this.beginScope() : undefined;
  }

  one<K extends string, A>(exchange: ExchangeDescriptor<K, A>, ask: object, options: AskOptions = {}): Promise<AskOutcome<A>> {
    const link = this.link(exchange);
    if (!link) return this.requests.one(exchange, ask, options);
    if (options.signal?.aborted) return Promise.resolve({ type: "aborted" });
    // An ask that cannot be written (a field over its length prefix) throws here, as on `/requests`.
    const payload = encodeProxyChannelRequest(exchange.channel!.variant, ask);
    // Refused before anything is sent, as `/requests` refuses it: never a frame over the proxy's own limit.
    const frameBytes = CHANNEL_REQUEST_HEADER_BYTES + payload.length;
    if (this.maxMessageBytes !== undefined && frameBytes > this.maxMessageBytes) return Promise.resolve({ type: "askTooLarge", bytes: frameBytes, limit: this.maxMessageBytes });
    return new Promise((resolve) => {
      let answer: Uint8Array | undefined;
      let settled = false;
      let channel = 0;
      const settle = (outcome: AskOutcome<A>) => {
        if (settled) return;
        settled = true;
        options.signal?.removeEventListener("abort", onAbort);
        resolve(outcome);
      };
      // A channel the proxy opened cannot be withdrawn; giving up disregards its answer.
      const onAbort = () => settle({ type: "aborted" });
      options.signal?.addEventListener("abort", onAbort, { once: true });
      const opened = link.openChannel(payload, {
          response: (payload) => {
            answer ??= payload.slice();
          },
          finish: () => {
            if (!answer) return settle({ type: "notServed", channel });
            const read = decode(exchange, answer);
            // Answered after the caller gave up: the caller may still act on it (a lock granted to nobody is released).
            if (settled && "answer" in read) return options.answeredAfterAbort?.(read.answer);
            settle("answer" in read ? { type: "answered", answer: read.answer } : { type: "unreadable", channel, error: read.error });
          },
        lost: () => settle({ type: "lost" }),
      });
      if (!opened) {
        // The connection ended between the check and the opening: `/requests` carries it instead.
        options.signal?.removeEventListener("abort", onAbort);
        settled = true;
        void this.requests.one(exchange, ask, options).then(resolve);
        return;
      }
      channel = opened.channel;
    });
  }

  stream<K extends string, A>(exchange: ExchangeDescriptor<K, A>, ask: object, options: AskOptions = {}): AskStream<A> {
    const link = this.link(exchange);
    if (!link) return this.requests.stream(exchange, ask, options);
    const buffered: A[] = [];
    let ending: StreamEnding | undefined;
    let wake: (() => void) | undefined;
    let resolveEnded!: (e: StreamEnding) => void;
    const ended = new Promise<StreamEnding>((resolve) => (resolveEnded = resolve));
    let count = 0;
    let channel = 0;
    let lastSeen = false;
    const finish = (e: StreamEnding) => {
      if (ending) return;
      ending = e;
      resolveEnded(e);
      wake?.();
    };
    const payload = encodeProxyChannelRequest(exchange.channel!.variant, ask);
    const frameBytes = CHANNEL_REQUEST_HEADER_BYTES + payload.length;
    if (this.maxMessageBytes !== undefined && frameBytes > this.maxMessageBytes) {
      const refused: StreamEnding = { type: "askTooLarge", bytes: frameBytes, limit: this.maxMessageBytes };
      return { ended: Promise.resolve(refused), async *[Symbol.asyncIterator]() {} };
    }
    const opened = link.openChannel(payload, {
      response: (payload) => {
        if (ending || lastSeen) return;
        const read = decode(exchange, payload);
        if (!("answer" in read)) return finish({ type: "unreadable", channel, error: read.error });
        count++;
        buffered.push(read.answer);
        if (exchange.last !== undefined && (read.answer as { variant?: string }).variant === exchange.last) lastSeen = true;
        wake?.();
      },
      finish: () => finish(count === 0 ? { type: "notServed", channel } : { type: "done" }),
      lost: () => finish({ type: "lost" }),
    });
    if (!opened) return this.requests.stream(exchange, ask, options);
    channel = opened.channel;
    options.signal?.addEventListener("abort", () => finish({ type: "aborted" }), { once: true });
    return {
      ended,
      async *[Symbol.asyncIterator]() {
        for (;;) {
          if (buffered.length > 0) {
            yield buffered.shift()!;
            continue;
          }
          if (ending) return;
          await new Promise<void>((resolve) => (wake = resolve));
          wake = undefined;
        }
      },
    };
  }
}
