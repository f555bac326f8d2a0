// The filesystem family: the container's tree under the proxy's root, watched (a Snapshot, then one
// delta per change), and its files read and written whole, from the provider's side on either
// transport. Defined by spec/2.3.0/filesystem.yaml and ../shared/protocol/fs-fuse.md §5-§8
// (filesystem::tree 3, ::read 4, ::write 5 on the multiplexed connection) and
// ../shared/protocol/paths.md §9 with fs-fuse.md §10 (/filesystem/tree, /filesystem/read, /filesystem/write).
export { FilesystemError, type FilesystemErrno, type FilesystemErrorDetail } from "./errors.js";
export { LiveTree, foldTree, type FiletreeFrame, type FiletreeNode, type TreePath } from "./tree.js";
export { treeOn, readOn, writeOn, DEFAULT_READ_STALL_MS, type FilesystemHost, type ReadFlowStats, type ReadOptions, type TreeOptions, type TreeStream, type TransferOptions } from "./multiplexed.js";
export { filesystemPaths, type FilesystemPaths, type FilesystemPathsOptions } from "./paths.js";
export { PIECE_SIZE, READ_HIGH_WATER, READ_LOW_WATER, type WriteSource } from "./queue.js";
