// The container's filesystem from the provider's side, on either transport.
export { FilesystemError, type FilesystemErrorDetail } from "./errors.js";
export { LiveTree, foldTree, type FiletreeFrame, type FiletreeNode } from "./tree.js";
export { treeOn, readOn, writeOn, DEFAULT_READ_STALL_MS, type FilesystemHost, type ReadFlowStats, type ReadOptions, type TreeOptions, type TreeStream, type TransferOptions } from "./multiplexed.js";
export { filesystemPaths, type FilesystemPaths, type FilesystemPathsOptions } from "./paths.js";
export { PIECE_SIZE, READ_HIGH_WATER, READ_LOW_WATER, type WriteSource } from "./queue.js";
export { mountOn, readOnlyHandlers, type MountOptions, type ProviderMount } from "./mount.js";
export { directoryHandlers, serveAsk, type FuseHandlers, type FuseAckResult, type FuseAttrs, type FuseEntry, type FuseStat, type FuseTime, type FuseReadResult, type FuseStatResult, type FuseListResult, type DirectoryHandlersOptions } from "@diverge/multiplexer/fuse";
export { PathsMounts, type PathsMountOptions } from "./paths-mount.js";
