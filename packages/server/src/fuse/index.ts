// Kernel FUSE mounts served by typed async handlers, independent of transport: the wiring of
// fuse::mount and /fuse/mount turns each handler call into a FUSE ask.
export { mountFuse, fuseUnavailable, isMountPoint, MountError, type FuseMount, type MountOptions } from "./mount.js";
export { directoryHandlers, type DirectoryHandlersOptions } from "./directory.js";
export type { FuseHandlers, FuseAckResult, FuseAttrs, FuseEntry, FuseStat, FuseTime, FuseReadResult, FuseStatResult, FuseListResult } from "./handlers.js";
export { FUSE_CHUNK_SIZE } from "./handlers.js";
export { askThrough, serveAsk, type SendAsk } from "./frames.js";
