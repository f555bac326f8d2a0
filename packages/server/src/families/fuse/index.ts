// Kernel FUSE mounts served by typed async handlers, independent of transport: the wiring of
// fuse::mount and /fuse/mount turns each handler call into a FUSE ask. The handler types, the asks
// as frames and the directory handlers live in @diverge/multiplexer/fuse (the provider uses them too).
export { mountFuse, fuseUnavailable, isMountPoint, MountError, type FuseMount, type MountOptions } from "./mount.js";
export {
  directoryHandlers,
  askThrough,
  serveAsk,
  FUSE_CHUNK_SIZE,
  type DirectoryHandlersOptions,
  type SendAsk,
  type FuseHandlers,
  type FuseAckResult,
  type FuseAttrs,
  type FuseEntry,
  type FuseStat,
  type FuseTime,
  type FuseReadResult,
  type FuseStatResult,
  type FuseListResult,
} from "@diverge/multiplexer/fuse";
