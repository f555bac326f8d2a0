// The container's filesystem from the provider's side, on either transport.
export { FilesystemError, type FilesystemErrorDetail } from "./errors.js";
export { LiveTree, foldTree, type FiletreeFrame, type FiletreeNode } from "./tree.js";
export { treeOn, readOn, writeOn, type FilesystemHost, type TreeOptions, type TreeStream, type TransferOptions } from "./multiplexed.js";
export { filesystemPaths, type FilesystemPaths, type FilesystemPathsOptions } from "./paths.js";
export { PIECE_SIZE, type WriteContent } from "./queue.js";
