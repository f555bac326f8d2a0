// node node-vectors.mjs: runs the vectors shipped in @diverge/conformance through @diverge/codec and
// prints the report as one JSON line.
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { parseVectors, runVectors } from "./vectors.mjs";

const require = createRequire(import.meta.url);
const file = require.resolve("@diverge/conformance/vectors/2.3.0.jsonl");
process.stdout.write(`${JSON.stringify(runVectors(parseVectors(readFileSync(file, "utf8"))))}\n`);
