// fuse: kernel FUSE mounts inside the proxy's root served by typed async handlers, independent of
// transport (mount.ts, loaded when a mount is made; place.ts). Multiplexed: the fuse::mount scope,
// endpoint 2, its asks on channels of the mount scope (multiplexed.ts); paths: /fuse/mount, its asks
// on /requests kinds 12-18 (paths.ts). The handler types, the asks as frames and the directory
// handlers live in @diverge/multiplexer/fuse (the provider uses them too). Spec: spec/2.3.0/fuse.yaml,
// fuse-asks.yaml; ../shared/protocol/fs-fuse.md §3–§4, §10, paths.md §8.
export { NOT_A_MOUNT_PATH, mountMembers } from "./place.js";
export { mountFuse, fuseUnavailable, isMountPoint, MountError, type FuseMount, type MountOptions } from "./mount.js";
export {
  directoryHandlers,
  askThrough,
  serveAsk,
  serveAskParts,
  joinedAnswer,
  type AnswerParts,
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
