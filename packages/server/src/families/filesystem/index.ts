// The proxy's filesystem service, independent of transport: the wiring of filesystem::tree/read/
// write and /filesystem/* turns these into frames.
export { watchTree, leftOut, lexical, ALWAYS_LEFT_OUT, type TreeOptions } from "./tree.js";
export { readPieces, CHUNK_SIZE, type ReadOptions } from "./read.js";
export { prepareWrite, writeFile, ContentError, type PreparedWrite, type WriteOptions } from "./write.js";
export { checkPath, isName, realRoot, inside, FsError, PATH_NAMES_NO_FILE } from "./path-checks.js";
