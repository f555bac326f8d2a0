// FUSE handlers, shared by both parties (`@diverge/multiplexer/fuse`): the typed handler interface,
// the asks as frames (`askThrough` for the proxy, `serveAsk` for the provider) and a handler set
// serving a directory of this machine. Node only (the directory handlers use node:fs).
export type { FuseHandlers, FuseAckResult, FuseAttrs, FuseEntry, FuseStat, FuseTime, FuseReadResult, FuseStatResult, FuseListResult } from "./handlers.js";
export { FUSE_CHUNK_SIZE } from "./handlers.js";
export { askThrough, serveAsk, serveAskParts, joinedAnswer, type AnswerParts, type SendAsk } from "./frames.js";
export { directoryHandlers, type DirectoryHandlersOptions } from "./directory.js";
