// The values the codec benchmarks carry. Deterministic, so every run measures the same bytes, and
// valid MCP (the checked decoders accept them).
import type { CallToolRequestParams, ListToolsResult, ReadResourceResult } from "@diverge/codec";

/** A tools/call's params, about 100 bytes of JSON. */
export const callToolParams: CallToolRequestParams = {
  name: "query",
  arguments: { sql: "select id, name from users where id = $1", params: [42], limit: 10 },
};

/** A tools/list result of about 10 KB: 16 tools with descriptions and input schemas. */
export function listToolsResult(): ListToolsResult {
  const tools = [];
  for (let i = 0; i < 16; i++) {
    tools.push({
      name: `tool_${i}_${["query", "read_file", "write_file", "list_dir"][i % 4]}`,
      title: `Tool number ${i}`,
      description:
        `Runs operation ${i} against the container's resources. It takes a path or a query, ` +
        `validates it against the scope the session was granted, and returns the result as text ` +
        `or as structured content. Errors come back as tool results with isError set.`,
      inputSchema: {
        type: "object" as const,
        properties: {
          path: { type: "string", description: "An absolute path inside the container." },
          query: { type: "string", description: "A SQL statement; parameters as $1, $2, …" },
          limit: { type: "integer", minimum: 1, maximum: 1000, description: "At most this many rows." },
          recursive: { type: "boolean", description: "Descend into directories." },
        },
        required: ["path"],
      },
      annotations: { readOnlyHint: i % 2 === 0, idempotentHint: true },
    });
  }
  return { tools };
}

/**
 * A resources/read result of about 1 MB: one text resource of log lines. Mostly ASCII, with a few
 * non-ASCII characters and JSON escapes (quotes, newlines), as real text has.
 */
export function readResourceResult(targetBytes = 1 << 20): ReadResourceResult {
  const lines: string[] = [];
  let size = 0;
  for (let i = 0; size < targetBytes; i++) {
    const line =
      `2026-11-29T19:${String(i % 60).padStart(2, "0")}:00.${String(i % 1000).padStart(3, "0")}Z ` +
      `INFO request id=${i} path="/api/v1/items/${i * 7}" status=200 took=${(i % 97) + 1}µs → ok\n`;
    lines.push(line);
    size += line.length + 3; // the escapes of the two quotes and the newline
  }
  return { contents: [{ uri: "file:///var/log/app.log", mimeType: "text/plain", text: lines.join("") }] };
}
