// @diverge/multiplexer: the Frames layer (scopes and channels) of the multiplexed Diverge
// connection, for the client (the provider) and the server (the proxy) alike.
export {
  Multiplexer,
  MultiplexerError,
  type Role,
  type Disregard,
  type AnswerHandlers,
  type Responder,
  type OpenedChannel,
  type OpenedScope,
  type MultiplexerEvents,
  type MultiplexerOptions,
} from "./multiplexer.js";
export { BacklogHold } from "./backlog.js";
export { BinaryMessageWriter, type ByteSink } from "./message-writer.js";
export { FrameSocket, binaryOf, type Corkable, type WebSocketLike, type FrameSocketOptions } from "./socket.js";
export { SPOKEN_REVISIONS, RevisionError, speakRevision, type SpokenRevision } from "./revision.js";
export { perRequestSignalFetch, type FetchLike, type FetchWatch, type WatchedFetch } from "./fetch.js";
export { guardRefusal, LOOPBACK_HOSTS, type HostGuard } from "./guard.js";
export { SessionBook, STREAM_GRACE_MS, type SessionEntry, type SessionBookOptions } from "./sessions.js";
export { SpillPool, SpillStream, type SpillSink, type SpillOptions } from "./spill.js";
