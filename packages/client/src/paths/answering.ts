// What a family's paths adapter may use of the paths connection, and what it gives it: its handlers
// in the generated shape, and answering an ask itself when its own handler shape needs the open path.
// The paths connection (connect.ts) iterates over the families' adapters (families/index.ts) and
// never names one.
import type { RequestsAsk } from "@diverge/codec";
import type { ProviderHandlers } from "../gen/exchanges.js";
import type { ProviderError } from "./errors.js";
import type { OpenSocket, SocketEnding } from "./socket.js";

export type PathsConnectionEvent =
  | { readonly type: "requestsOpened" }
  /** `/requests` ended; `redial` says whether it is dialled again (false once `close()` was called). */
  | { readonly type: "requestsClosed"; readonly ending: SocketEnding; readonly redial: boolean }
  | { readonly type: "ask"; readonly ask: RequestsAsk }
  /** An answer path ended: `answered` (one message sent), `declined` (none), or a stream's end. */
  | { readonly type: "pathEnded"; readonly path: string; readonly outcome: "answered" | "declined" | "streamEnded"; readonly ending: SocketEnding }
  | { readonly type: "error"; readonly error: ProviderError };

export interface PathsAnswerHost {
  /** Opens the answer path `path`; undefined when it could not be opened (reported) or the connection has stopped. */
  openPath(path: string): Promise<OpenSocket | undefined>;
  emit(event: PathsConnectionEvent): void;
  /** The proxy's message limit the connection was given (`maxMessageBytes`), in bytes. */
  readonly maxMessageBytes?: number;
}

/** A family's adapter on the paths connection, over the caller's handlers `H`. */
export interface PathsFamily<H> {
  /** The family's handlers in the generated shape; a generated member the caller gives directly wins. */
  generated?(handlers: H, host: PathsAnswerHost): Partial<ProviderHandlers>;
  /** Answers `ask` on `path` itself; undefined leaves it to the generated dispatch. */
  answer?(ask: RequestsAsk, handlers: H, path: string, host: PathsAnswerHost): Promise<void> | undefined;
}
