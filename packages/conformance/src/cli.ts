#!/usr/bin/env node
// diverge-conformance: reads JSON lines on standard input and answers each with one JSON line.
import { createInterface } from "node:readline";
import { answer } from "./testee.js";

const help = `diverge-conformance: a conformance testee for the Diverge container-proxy protocol.

Reads one JSON object per line on standard input and writes exactly one JSON line per input line,
in order:
  {"revision":"2.3.0","frame":"<id>","decode":"<hex>"}  ->  {"value":<view>} or {"error":{"variant","message"}}
  {"revision":"2.3.0","frame":"<id>","encode":<view>}   ->  {"hex":"<hex>"} or {"error":{"variant","message"}}
An unknown revision or frame id answers {"error":{"variant":"UnknownFrame","message":"..."}}.
`;

if (process.argv.includes("--help") || process.argv.includes("-h")) {
  process.stdout.write(help);
} else {
  const lines = createInterface({ input: process.stdin, crlfDelay: Infinity });
  for await (const line of lines) {
    if (line.trim() === "") {
      process.stdout.write(`${JSON.stringify({ error: { variant: "BadInput", message: "empty line" } })}\n`);
      continue;
    }
    let reply: unknown;
    try {
      reply = answer(line);
    } catch (error) {
      // A decoder that throws anything but its own error is a bug; say so on the line it broke.
      reply = { error: { variant: "Internal", message: String((error as Error)?.message ?? error) } };
    }
    process.stdout.write(`${JSON.stringify(reply)}\n`);
  }
}
