// The FUSE family: the provider asks the proxy to mount a FUSE filesystem at a path in the container
// and answers every operation there, with typed handlers or from a directory of this machine. Defined
// by spec/2.3.0/fuse.yaml and spec/2.3.0/fuse-asks.yaml, ../shared/protocol/fs-fuse.md §3-§4
// (fuse::mount, endpoint 2, and the asks on the mount scope) and ../shared/protocol/paths.md §8 with fs-fuse.md §10
// (/fuse/mount and /requests kinds 12-18).
export { mountOn, readOnlyHandlers, type MountOptions, type ProviderMount } from "./multiplexed.js";
export { directoryHandlers, serveAsk, serveAskParts, joinedAnswer, type AnswerParts, type FuseHandlers, type FuseAckResult, type FuseAttrs, type FuseEntry, type FuseStat, type FuseTime, type FuseReadResult, type FuseStatResult, type FuseListResult, type DirectoryHandlersOptions } from "@diverge/multiplexer/fuse";
export { PathsMounts, type PathsMountOptions } from "./paths.js";
