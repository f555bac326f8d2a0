// What a family's adapter on the multiplexed connection is given by the connection, and the shape of
// what it gives back: handlers for the begin-scope channels and the scopes it serves. The connection
// is the engine (Frames server, begin scope); the registry (families/multiplexed.ts) assembles the
// families' pieces into the tables the connection dispatches on. Also what a family's program-facing
// side (the postgres listener, `/daemon`) is given at start: the connection once made, and the
// program connections held until it has begun.
import type { ContainerProxyRequest } from "@diverge/codec";
import type { FrameSocket, Responder } from "@diverge/multiplexer";
import type { ProxyContext, ResolvedProxyOptions } from "../context.js";
import type { Gate } from "../families/secrets/gate.js";
import type { SharedInwardMcp } from "../families/mcp-inward/shared.js";
import type { PairLink, PairOptions } from "./pairs.js";

/** The Frames-layer header in front of every payload. */
export const FRAME_HEADER = 9;

/** A handler for every endpoint a scope can be opened for; which tag is which is the codec's business. */
export type ScopeRoutes = { readonly [E in ContainerProxyRequest["variant"]]: (request: Extract<ContainerProxyRequest, { variant: E }>, responder: Responder) => Promise<void> };

/** What the families count for the connection's `stats()`. */
export interface ConnectionCounters {
  /** Answers larger than the message limit: replaced by an error, or not served. */
  oversizedAnswers: number;
  /** Notifications dropped per stream, keyed `"/ channel <n>"`; kept after the stream ends. */
  readonly dropped: Record<string, number>;
}

/**
 * A family that begins a container on the connection (one begin per connection, whichever family):
 * the engine holds the claim and hands the begun scope's channels to the family that began.
 */
export interface BeginFamily {
  /** A begin while the connection has begun (`begun`) or another begin is being answered: one refusal, then the finish. */
  refuse(responder: Responder, begun: boolean): void;
  /**
   * Answers the begin. `begun` is called right after the family's Begun is sent (before anything
   * else on the scope); a refusal sends its answer and the finish and leaves the connection not begun.
   */
  answer(responder: Responder, begun: () => void): Promise<void>;
  /** A channel the provider opened on the begun scope. */
  channel(responder: Responder, payload: Uint8Array): void;
}

/** What every family's multiplexed adapter is given: one per connection. */
export interface ConnectionServices {
  readonly frames: FrameSocket;
  readonly options: ResolvedProxyOptions;
  readonly gate: Gate;
  /** The proxy's one MCP client to the container's server, shared with the paths transport's `/tool/*`. */
  readonly inward: SharedInwardMcp;
  /** The connection itself: the origin of its exchanges with the shared inward client. */
  readonly origin: object;
  /** Aborted when the connection ends (calls to the program's HTTP server, filesystem work). */
  readonly signal: AbortSignal;
  /** The begin scope as the pairs see it. */
  readonly pairLink: PairLink;
  readonly pairOptions: PairOptions;
  readonly counters: ConnectionCounters;
  /** Whatever goes wrong serving one stream ends that stream (with a finish) and nothing else. */
  guard(responder: Responder, what: string, work: Promise<void>): void;
  /** A begin scope the provider opened: the engine's one claim per connection, answered by `family`. */
  claimBegin(responder: Responder, family: BeginFamily): Promise<void>;
}

/** A program connection that came before the begin, held (unread) until the connection has begun. */
export interface HeldConnection<Connection> {
  /** The connection has begun: it takes this program connection. */
  handOver(connection: Connection): void;
  /** The connection ended before it began, or the proxy closes: this program connection goes. */
  close(): void;
}

/**
 * What a family's program-facing side of the multiplexed transport (a listener, an endpoint) is
 * given: attached at start. `Connection` is the proxy's connection (multiplexed/connection.ts), named
 * by the families so that this engine file need not import it.
 */
export interface ProgramSideServices<Connection> {
  readonly context: ProxyContext;
  /** The connection, once the provider has made it (there is only ever one). */
  connection(): Connection | undefined;
  /** Whether the proxy is closing. */
  closed(): boolean;
  /** Program connections held now until the provider's connection has begun (bounded by `maxHeldConnections`), every family's. */
  readonly held: Set<HeldConnection<Connection>>;
}
