// What a family's adapter on the paths transport is given: the proxy's context and the asking
// machinery of `/requests`. The registry (families/index.ts) attaches every family's adapter with it.
import type { ProxyContext } from "../context.js";
import type { ProxyAsks } from "../gen/exchanges.js";
import type { AskBoard } from "./board.js";
import type { BeginScopeLink, TransportChoice } from "../exchanges/begin-scope.js";

export interface PathsServices {
  readonly context: ProxyContext;
  /** The asking machinery: `/requests` and the answer paths. */
  readonly board: AskBoard;
  /** The engine every ask goes through: the begin scope while a provider has begun tools on `/`, else `/requests`. */
  readonly engine: TransportChoice;
  /** Every exchange of the `/requests` table, typed, through `engine`. */
  readonly asks: ProxyAsks;
  /** Where the begin scope is, while one is begun. */
  readonly beginScope: () => BeginScopeLink | undefined;
}
