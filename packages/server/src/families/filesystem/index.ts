// filesystem: the container's files under the proxy's root, independent of transport (tree.ts,
// read.ts, write.ts, path-checks.ts, requests.ts, content-queue.ts). Multiplexed: the
// filesystem::tree/read/write scopes, endpoints 3-5 (multiplexed.ts); paths: /filesystem/tree, /read
// and /write (paths.ts). Only the transport-free pieces are exported here: the adapters import them.
// Spec: spec/2.3.0/filesystem.yaml, fuse-asks.yaml; ../shared/protocol/fs-fuse.md §5–§8, §10,
// paths.md §9.
export { watchTree, watchTreeEncoded, messageHead, joined, snapshotOf, leftOut, lexical, tooLarge, ALWAYS_LEFT_OUT, ROOT_REPLACED, STAT_CONCURRENCY, type TreeOptions, type TreeOutput } from "./tree.js";
export { readPieces, CHUNK_SIZE, type ReadOptions } from "./read.js";
export { prepareWrite, writeFile, temporaryName, removeTemporaries, settleTemporaries, ContentError, type PreparedWrite, type WriteOptions } from "./write.js";
export { checkPath, isName, realRoot, inside, FsError, PATH_NAMES_NO_FILE } from "./path-checks.js";
export { ContentQueue, type Flow } from "./content-queue.js";
