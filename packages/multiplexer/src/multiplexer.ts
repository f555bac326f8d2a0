// The Frames layer as a state machine: scopes opened by the client and ended by the server, channels
// opened by either party inside an open scope and ended only by their responder. The frame bytes
// come from the generated codec; what this module adds is the bookkeeping the spec's rules need.
import {
  FrameError,
  decodeClientFrame,
  decodeServerFrame,
  encodeClientFrame,
  encodeServerFrame,
  type ClientFrame,
  type ServerFrame,
} from "@diverge/codec";

/** Which Frames-layer party this side is. The provider is the client, the proxy the server. */
export type Role = "client" | "server";

/** Why an incoming frame was disregarded. Never a reason to end the connection. */
export type Disregard =
  | { readonly reason: "malformed"; readonly error: FrameError }
  | { readonly reason: "scope-open"; readonly scope: number }
  | { readonly reason: "unknown-scope"; readonly scope: number; readonly type: string }
  | { readonly reason: "channel-open"; readonly scope: number; readonly channel: number }
  | { readonly reason: "unknown-channel"; readonly scope: number; readonly channel: number; readonly type: string };

/** The receiving end of a stream this side asked for: a scope's request or a channel's request. */
export interface AnswerHandlers {
  /** One piece of the answer, in order. The bytes are a view: copy before keeping. */
  response(payload: Uint8Array): void;
  /** The responder's finish; `served` is false for a finish that no response preceded. */
  finish(served: boolean): void;
  /** The connection ended before the finish: the stream is over without one. */
  lost?(): void;
}

/** An empty payload: a frame encoded with it is the frame's header alone. */
const NO_BYTES = new Uint8Array(0);

/** The answering end of a stream the other party opened. */
export interface Responder {
  readonly scope: number;
  /** The opener's channel number; for a scope's own exchange, 0. */
  readonly channel: number;
  /** Whether any response has been sent. */
  readonly responded: boolean;
  /** Whether the finish has been sent or the connection has ended; then nothing more is sent. */
  readonly finished: boolean;
  /** Sends one piece of the answer. Ignored once finished. */
  respond(payload: Uint8Array): void;
  /**
   * Sends one piece of the answer whose payload is `head` then `body` (one array, or several in
   * order), the same bytes as `respond(head ++ body)`, built in one buffer: a large body (a file's
   * piece behind its one-byte tag, a Snapshot written in chunks) is copied once, not into a payload
   * and again into its frame. Ignored once finished. Optional: an implementation without it is sent
   * the parts joined.
   */
  respondParts?(head: Uint8Array, body: Uint8Array | readonly Uint8Array[]): void;
  /** Ends the stream; without a response before it, this means "not served". Idempotent. */
  finish(): void;
}

/** A channel this side opened. */
export interface OpenedChannel {
  readonly scope: number;
  readonly channel: number;
  readonly finished: boolean;
}

/** A scope the client opened. */
export interface OpenedScope {
  readonly scope: number;
  readonly finished: boolean;
}

export interface MultiplexerEvents {
  /** Server only: a request opened a scope. Answer through `responder`. */
  scope?(responder: Responder, payload: Uint8Array): void;
  /** The other party opened a channel on an open scope. Answer through `responder`. */
  channel?(responder: Responder, payload: Uint8Array): void;
  /** A type-0 frame arrived. On the proxy connection the proxy closes the connection. */
  authorization?(payload: Uint8Array): void;
  /** A frame was disregarded, and why; for logs and tests. */
  disregarded?(what: Disregard): void;
  /** A scope ended (the server's finish was sent or received); its channels are gone with it. */
  scopeEnded?(scope: number): void;
  /** A scope or channel request over the caps was answered with a bare finish at once. */
  overCap?(what: { readonly kind: "scope"; readonly scope: number } | { readonly kind: "channel"; readonly scope: number; readonly channel: number }): void;
}

export interface MultiplexerOptions {
  readonly role: Role;
  /** Writes one frame as one binary message: a view over an `ArrayBuffer` of its own, as a WHATWG `send` takes. */
  readonly send: (frame: Uint8Array<ArrayBuffer>) => void;
  /**
   * Given, every frame is handed over here instead of `send`, as parts to be sent in order as one
   * binary message: the frame's header (the generated encoder's), then its payload, unjoined (the
   * payload a view of the caller's bytes: write or copy it before returning). Saves the copy that
   * joins them where the writer copies anyway (FrameSocket's own message writer).
   */
  readonly sendFrame?: (parts: readonly Uint8Array[]) => void;
  readonly events?: MultiplexerEvents;
  /** Server only: scopes the client may hold open at once; a request beyond it gets a bare finish. Default unlimited. */
  readonly maxOpenScopes?: number;
  /** Channels the other party may hold open at once on this connection (every scope together); a channel request beyond it gets a bare finish. Default unlimited. */
  readonly maxOpenChannels?: number;
}

interface ScopeState {
  /** Channels this side opened, by number. */
  readonly mine: Map<number, OwnChannelState>;
  /** Channels the other party opened and this side answers, by the opener's number. */
  readonly theirs: Map<number, ResponderState>;
  /** Client side: the handlers of the scope's own answer. */
  readonly answer?: AnswerHandlers;
  /** Server side: the responder of the scope's own request. */
  responder?: ResponderState;
  nextChannel: number;
  answered: boolean;
  finished: boolean;
}

interface OwnChannelState extends OpenedChannel {
  readonly handlers: AnswerHandlers;
  answered: boolean;
  finished: boolean;
}

interface ResponderState extends Responder {
  responded: boolean;
  finished: boolean;
}

const U32_LIMIT = 2 ** 32;

export class MultiplexerError extends Error {
  override readonly name = "MultiplexerError";
  constructor(
    readonly variant: "wrong-role" | "unknown-scope" | "scope-open" | "numbers-exhausted" | "ended",
    message: string,
  ) {
    super(message);
  }
}

export class Multiplexer {
  readonly role: Role;
  private readonly sendBytes: (frame: Uint8Array<ArrayBuffer>) => void;
  private readonly sendFrameParts: ((parts: readonly Uint8Array[]) => void) | undefined;
  private readonly events: MultiplexerEvents;
  private readonly scopes = new Map<number, ScopeState>();
  private nextScope = 1;
  private over = false;
  private readonly maxOpenScopes: number;
  private readonly maxOpenChannels: number;
  /** Channels the other party has open now, every scope together. */
  private theirChannels = 0;

  constructor(options: MultiplexerOptions) {
    this.role = options.role;
    this.sendBytes = options.send;
    this.sendFrameParts = options.sendFrame;
    this.events = options.events ?? {};
    this.maxOpenScopes = options.maxOpenScopes ?? Infinity;
    this.maxOpenChannels = options.maxOpenChannels ?? Infinity;
  }

  /** Channels the other party has open now (requested, not yet finished), every scope together. */
  get openTheirChannels(): number {
    return this.theirChannels;
  }

  /** Whether the connection has ended. */
  get ended(): boolean {
    return this.over;
  }

  /** The scopes open now, by number. */
  openScopes(): number[] {
    return [...this.scopes.keys()];
  }

  /** Feeds one binary message from the other party. Never throws for what the bytes say. */
  receive(message: Uint8Array): void {
    if (this.over) return;
    let frame: ClientFrame | ServerFrame;
    try {
      frame = this.role === "server" ? decodeClientFrame(message) : decodeServerFrame(message);
    } catch (error) {
      if (error instanceof FrameError) return this.disregard({ reason: "malformed", error });
      throw error;
    }
    switch (frame.variant) {
      case "Authorization":
        this.events.authorization?.(frame.payload);
        return;
      case "Request":
        return this.onRequest(frame.scope, frame.payload);
      case "Response":
        return this.onScopeAnswer(frame.scope, frame.payload);
      case "ResponseFinish":
        return this.onScopeAnswer(frame.scope, undefined);
      case "ChannelRequest":
        return this.onChannelRequest(frame.scope, frame.channel, frame.payload);
      case "ChannelResponse":
        return this.onChannelAnswer(frame.scope, frame.channel, frame.payload, "ChannelResponse");
      case "ChannelResponseFinish":
        return this.onChannelAnswer(frame.scope, frame.channel, undefined, "ChannelResponseFinish");
    }
  }

  /** Client only: opens a scope under the next free number and sends its request. */
  openScope(payload: Uint8Array, handlers: AnswerHandlers, scope?: number): OpenedScope {
    if (this.role !== "client") throw new MultiplexerError("wrong-role", "only the client opens scopes");
    this.assertLive();
    const number = scope ?? this.freeScopeNumber();
    if (this.scopes.has(number)) throw new MultiplexerError("scope-open", `scope ${number} is open`);
    const state: ScopeState = { mine: new Map(), theirs: new Map(), answer: handlers, nextChannel: 0, answered: false, finished: false };
    this.scopes.set(number, state);
    this.send({ variant: "Request", scope: number, channel: 0, payload });
    return {
      scope: number,
      get finished() {
        return state.finished;
      },
    };
  }

  /** Opens a channel of this side's on an open scope under the next free number and sends its request. */
  openChannel(scope: number, payload: Uint8Array, handlers: AnswerHandlers): OpenedChannel {
    this.assertLive();
    const state = this.scopes.get(scope);
    if (!state) throw new MultiplexerError("unknown-scope", `scope ${scope} is not open`);
    const channel = this.freeChannelNumber(state);
    const own: OwnChannelState = { scope, channel, handlers, answered: false, finished: false };
    state.mine.set(channel, own);
    this.send({ variant: "ChannelRequest", scope, channel, payload });
    return own;
  }

  /** The connection ended: every open scope and channel is over without a finish. */
  end(): void {
    if (this.over) return;
    this.over = true;
    const scopes = [...this.scopes.values()];
    this.scopes.clear();
    this.theirChannels = 0;
    for (const state of scopes) {
      state.finished = true;
      if (state.responder) state.responder.finished = true;
      for (const responder of state.theirs.values()) responder.finished = true;
      for (const own of state.mine.values()) {
        own.finished = true;
        own.handlers.lost?.();
      }
      state.answer?.lost?.();
    }
  }

  private onRequest(scope: number, payload: Uint8Array): void {
    if (this.scopes.has(scope)) return this.disregard({ reason: "scope-open", scope });
    if (this.scopes.size >= this.maxOpenScopes) {
      // Over the cap: "received and could not be served", and nothing is kept for it.
      this.send({ variant: "ResponseFinish", scope, channel: 0 });
      this.events.overCap?.({ kind: "scope", scope });
      return;
    }
    const state: ScopeState = { mine: new Map(), theirs: new Map(), nextChannel: 0, answered: false, finished: false };
    const responder = this.responder(scope, undefined);
    state.responder = responder;
    this.scopes.set(scope, state);
    this.events.scope?.(responder, payload);
  }

  private onScopeAnswer(scope: number, payload: Uint8Array | undefined): void {
    const state = this.scopes.get(scope);
    const type = payload ? "Response" : "ResponseFinish";
    if (!state || !state.answer) return this.disregard({ reason: "unknown-scope", scope, type });
    if (payload) {
      state.answered = true;
      state.answer.response(payload);
      return;
    }
    this.scopes.delete(scope);
    state.finished = true;
    this.dropChannels(state);
    state.answer.finish(state.answered);
    this.events.scopeEnded?.(scope);
  }

  private onChannelRequest(scope: number, channel: number, payload: Uint8Array): void {
    const state = this.scopes.get(scope);
    if (!state) return this.disregard({ reason: "unknown-scope", scope, type: "ChannelRequest" });
    if (state.theirs.has(channel)) return this.disregard({ reason: "channel-open", scope, channel });
    if (this.theirChannels >= this.maxOpenChannels) {
      this.send({ variant: "ChannelResponseFinish", scope, channel });
      this.events.overCap?.({ kind: "channel", scope, channel });
      return;
    }
    const responder = this.responder(scope, channel);
    state.theirs.set(channel, responder);
    this.theirChannels++;
    this.events.channel?.(responder, payload);
  }

  private onChannelAnswer(scope: number, channel: number, payload: Uint8Array | undefined, type: string): void {
    const state = this.scopes.get(scope);
    if (!state) return this.disregard({ reason: "unknown-scope", scope, type });
    const own = state.mine.get(channel);
    if (!own) return this.disregard({ reason: "unknown-channel", scope, channel, type });
    if (payload) {
      own.answered = true;
      own.handlers.response(payload);
      return;
    }
    own.finished = true;
    state.mine.delete(channel);
    own.handlers.finish(own.answered);
  }

  /** A responder for the other party's scope request (`channel` undefined) or channel request. */
  private responder(scope: number, channel: number | undefined): ResponderState {
    const mux = this;
    const isScope = channel === undefined;
    const state: ResponderState = {
      scope,
      channel: channel ?? 0,
      responded: false,
      finished: false,
      respond(payload: Uint8Array) {
        if (state.finished || mux.over) return;
        state.responded = true;
        if (mux.sendFrameParts) mux.sendHeaderThen(isScope ? { variant: "Response", scope, channel: 0, payload: NO_BYTES } : { variant: "ChannelResponse", scope, channel: channel!, payload: NO_BYTES }, payload);
        else mux.send(isScope ? { variant: "Response", scope, channel: 0, payload } : { variant: "ChannelResponse", scope, channel: channel!, payload });
      },
      respondParts(head: Uint8Array, body: Uint8Array | readonly Uint8Array[]) {
        if (state.finished || mux.over) return;
        state.responded = true;
        mux.sendParts(isScope ? { variant: "Response", scope, channel: 0, payload: NO_BYTES } : { variant: "ChannelResponse", scope, channel: channel!, payload: NO_BYTES }, head, body);
      },
      finish() {
        if (state.finished || mux.over) return;
        state.finished = true;
        const scopeState = mux.scopes.get(scope);
        if (isScope) {
          mux.send({ variant: "ResponseFinish", scope, channel: 0 });
          if (scopeState?.responder === state) {
            mux.scopes.delete(scope);
            mux.dropChannels(scopeState);
            mux.events.scopeEnded?.(scope);
          }
        } else {
          mux.send({ variant: "ChannelResponseFinish", scope, channel: channel! });
          if (scopeState?.theirs.get(channel!) === state) {
            scopeState.theirs.delete(channel!);
            mux.theirChannels--;
          }
        }
      },
    };
    return state;
  }

  /** A scope ended: its channels end with it, without finishes. */
  private dropChannels(state: ScopeState): void {
    for (const responder of state.theirs.values()) responder.finished = true;
    for (const own of state.mine.values()) {
      own.finished = true;
      own.handlers.lost?.();
    }
    this.theirChannels -= state.theirs.size;
    state.theirs.clear();
    state.mine.clear();
  }

  private freeScopeNumber(): number {
    for (let tries = 0; tries < U32_LIMIT; tries++) {
      const candidate = this.nextScope;
      this.nextScope = (this.nextScope + 1) % U32_LIMIT;
      if (!this.scopes.has(candidate)) return candidate;
    }
    throw new MultiplexerError("numbers-exhausted", "every scope number is in use");
  }

  private freeChannelNumber(state: ScopeState): number {
    for (let tries = 0; tries < U32_LIMIT; tries++) {
      const candidate = state.nextChannel;
      state.nextChannel = (state.nextChannel + 1) % U32_LIMIT;
      if (!state.mine.has(candidate)) return candidate;
    }
    throw new MultiplexerError("numbers-exhausted", "every channel number of the scope is in use");
  }

  private send(frame: ClientFrame | ServerFrame): void {
    if (this.over) return;
    // The codec's encoders allocate each frame's bytes as a new Uint8Array (over an ArrayBuffer).
    const encoded = (this.role === "client" ? encodeClientFrame(frame as ClientFrame) : encodeServerFrame(frame as ServerFrame)) as Uint8Array<ArrayBuffer>;
    if (this.sendFrameParts) return this.sendFrameParts([encoded]);
    this.sendBytes(encoded);
  }

  /** With `sendFrame`: the frame's header (`frame` encoded with an empty payload), then `payload`, not joined here. */
  private sendHeaderThen(frame: ClientFrame | ServerFrame, payload: Uint8Array): void {
    if (this.over) return;
    this.sendFrameParts!([this.role === "client" ? encodeClientFrame(frame as ClientFrame) : encodeServerFrame(frame as ServerFrame), payload]);
  }

  /**
   * A frame whose payload (its last field: the rest of the frame) is `head` then `body`: the
   * generated encoder writes the frame with no payload, which is its header, and the parts follow it.
   */
  private sendParts(frame: ClientFrame | ServerFrame, head: Uint8Array, body: Uint8Array | readonly Uint8Array[]): void {
    if (this.over) return;
    const header = this.role === "client" ? encodeClientFrame(frame as ClientFrame) : encodeServerFrame(frame as ServerFrame);
    const parts = body instanceof Uint8Array ? [header, head, body] : [header, head, ...body];
    if (this.sendFrameParts) return this.sendFrameParts(parts);
    const out = new Uint8Array(parts.reduce((sum, part) => sum + part.length, 0));
    let at = 0;
    for (const part of parts) {
      out.set(part, at);
      at += part.length;
    }
    this.sendBytes(out);
  }

  private disregard(what: Disregard): void {
    this.events.disregarded?.(what);
  }

  private assertLive(): void {
    if (this.over) throw new MultiplexerError("ended", "the connection has ended");
  }
}
