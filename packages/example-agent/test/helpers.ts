// Shared by the example agent's tests: a real MCP server on loopback (standing in for the proxy's
// program-facing /mcp), a reader of `text/event-stream` bodies, and small HTTP helpers.
import { randomUUID } from "node:crypto";
import { createServer, type IncomingMessage, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import { StreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/streamableHttp.js";
import { z } from "zod";
import { CHUNK_TYPES, type AgenticLoopChunk } from "../src/index.js";

export interface ToolServer {
  readonly url: string;
  /** Every `tools/call` the server handled, as `name JSON-arguments`. */
  readonly calls: string[];
  close(): Promise<void>;
}

/** The MCP SDK's McpServer over Streamable HTTP on loopback, one session per client, with tools `add` and `echo`. */
export async function startToolServer(): Promise<ToolServer> {
  const calls: string[] = [];
  const sessions = new Map<string, StreamableHTTPServerTransport>();
  const build = () => {
    const server = new McpServer({ name: "provider-tools", version: "1.0.0" });
    server.registerTool(
      "add",
      { description: "Adds two numbers.", inputSchema: { a: z.number(), b: z.number() }, outputSchema: { sum: z.number() } },
      async ({ a, b }) => {
        calls.push(`add ${JSON.stringify({ a, b })}`);
        return { content: [{ type: "text", text: String(a + b) }], structuredContent: { sum: a + b } };
      },
    );
    server.registerTool("echo", { description: "Answers its text.", inputSchema: { text: z.string() } }, async ({ text }) => {
      calls.push(`echo ${JSON.stringify({ text })}`);
      return { content: [{ type: "text", text }] };
    });
    return server;
  };
  const http: Server = createServer((request, response) => {
    void (async () => {
      const body = request.method === "POST" ? await readJson(request) : undefined;
      const id = request.headers["mcp-session-id"];
      const existing = typeof id === "string" ? sessions.get(id) : undefined;
      if (existing) return existing.handleRequest(request, response, body);
      const transport: StreamableHTTPServerTransport = new StreamableHTTPServerTransport({
        sessionIdGenerator: () => randomUUID(),
        onsessioninitialized: (sessionId) => {
          sessions.set(sessionId, transport);
        },
      });
      transport.onclose = () => {
        if (transport.sessionId) sessions.delete(transport.sessionId);
      };
      await build().connect(transport);
      await transport.handleRequest(request, response, body);
    })().catch(() => {
      if (!response.headersSent) response.writeHead(500).end();
    });
  });
  await new Promise<void>((resolve) => http.listen(0, "127.0.0.1", resolve));
  return {
    url: `http://127.0.0.1:${(http.address() as AddressInfo).port}/mcp`,
    calls,
    async close() {
      await Promise.allSettled([...sessions.values()].map((transport) => transport.close()));
      http.closeAllConnections();
      await new Promise<void>((resolve) => http.close(() => resolve()));
    },
  };
}

async function readJson(request: IncomingMessage): Promise<unknown> {
  const chunks: Buffer[] = [];
  for await (const chunk of request) chunks.push(chunk as Buffer);
  const text = Buffer.concat(chunks).toString("utf8");
  return text === "" ? undefined : JSON.parse(text);
}

export const post = (base: string, path: string, body: unknown, init: RequestInit = {}) =>
  fetch(`${base}${path}`, { method: "POST", headers: { "content-type": "application/json" }, body: typeof body === "string" ? body : JSON.stringify(body), ...init });

export const text = (value: string) => ({ type: "text" as const, text: value });
export const message = (key: string, ...lines: string[]) => ({ key, content: [text(lines.join("\n"))] });

/** Reads a `text/event-stream` body event by event: each event's `data` (lines joined by `\n`). */
export class EventReader {
  private readonly reader: ReadableStreamDefaultReader<Uint8Array>;
  private readonly decoder = new TextDecoder();
  private buffer = "";
  private done = false;
  /** Every event's data read so far. */
  readonly events: string[] = [];

  constructor(response: Response) {
    if (!response.body) throw new Error("no body");
    this.reader = response.body.getReader();
  }

  /** The next event's data, or `undefined` at a clean end; rejects when the stream breaks. */
  async next(): Promise<string | undefined> {
    for (;;) {
      const end = this.buffer.indexOf("\n\n");
      if (end >= 0) {
        const block = this.buffer.slice(0, end);
        this.buffer = this.buffer.slice(end + 2);
        const data = block
          .split("\n")
          .filter((line) => line.startsWith("data:"))
          .map((line) => line.slice(5).replace(/^ /, ""));
        if (data.length === 0) continue;
        const event = data.join("\n");
        this.events.push(event);
        return event;
      }
      if (this.done) return undefined;
      const { value, done } = await this.reader.read();
      if (done) this.done = true;
      else this.buffer += this.decoder.decode(value, { stream: true });
    }
  }

  /** The next chunk (parsed), or `undefined` at a clean end. */
  async chunk(): Promise<AgenticLoopChunk | undefined> {
    const event = await this.next();
    return event === undefined ? undefined : (JSON.parse(event) as AgenticLoopChunk);
  }

  /** Chunks up to and including the first that `predicate` accepts; fails at the end of the stream. */
  async until(predicate: (chunk: AgenticLoopChunk) => boolean): Promise<AgenticLoopChunk[]> {
    const seen: AgenticLoopChunk[] = [];
    for (;;) {
      const chunk = await this.chunk();
      if (chunk === undefined) throw new Error(`the stream ended first; saw ${JSON.stringify(seen)}`);
      seen.push(chunk);
      if (predicate(chunk)) return seen;
    }
  }

  /** Every chunk to the clean end of the stream. */
  async rest(): Promise<AgenticLoopChunk[]> {
    const seen: AgenticLoopChunk[] = [];
    for (let chunk = await this.chunk(); chunk !== undefined; chunk = await this.chunk()) seen.push(chunk);
    return seen;
  }

  /** Reads to the end: `clean` (the body ended) or `abrupt` (it broke). */
  async drain(): Promise<"clean" | "abrupt"> {
    try {
      while ((await this.next()) !== undefined);
      return "clean";
    } catch {
      return "abrupt";
    }
  }
}

/** Opens a loop: POST /run and, when it answers 2xx, a reader of its stream. */
export async function startRun(base: string, messages: unknown[], init: RequestInit = {}) {
  const response = await post(base, "/run", { messages }, init);
  return { response, stream: new EventReader(response) };
}

/** What §7.2 requires of each chunk kind: its required members and their JSON types. */
const REQUIRED: Record<AgenticLoopChunk["type"], Record<string, string>> = {
  assistant_reasoning: { text: "string" },
  assistant_text_content: { text: "string" },
  assistant_image_content: { data: "string", mimeType: "string" },
  assistant_audio_content: { data: "string", mimeType: "string" },
  assistant_tool_call: { id: "string", name: "string" },
  assistant_refusal: { text: "string" },
  tool_response: { id: "string", content: "array" },
  user_text_content: { key: "string", text: "string" },
  user_image_content: { key: "string", data: "string", mimeType: "string" },
  user_audio_content: { key: "string", data: "string", mimeType: "string" },
  user_resource: { key: "string", resource: "object" },
  user_resource_link: { key: "string", uri: "string", name: "string" },
  usage: { completion_tokens: "number", prompt_tokens: "number", total_tokens: "number" },
  notification: { is_fatal: "boolean" },
};

const OPTIONAL: Record<string, string> = { parent_tool_call_id: "string", arguments: "string", _meta: "object", isError: "boolean", logprobs: "array" };

/** Whether a value is one of the fourteen chunks of §7.2, by `type`, with its members of the right JSON types. */
export function isChunk(value: unknown): value is AgenticLoopChunk {
  if (typeof value !== "object" || value === null || Array.isArray(value)) return false;
  const chunk = value as Record<string, unknown>;
  if (!(CHUNK_TYPES as readonly unknown[]).includes(chunk.type)) return false;
  const kind = (member: unknown) => (Array.isArray(member) ? "array" : member === null ? "null" : typeof member);
  for (const [name, type] of Object.entries(REQUIRED[chunk.type as AgenticLoopChunk["type"]])) if (kind(chunk[name]) !== type) return false;
  if (chunk.type === "notification" && !("message" in chunk)) return false;
  for (const [name, type] of Object.entries(OPTIONAL)) if (name in chunk && kind(chunk[name]) !== type) return false;
  return true;
}

/** Concatenates the `text` of every chunk of one kind. */
export const joined = (chunks: readonly AgenticLoopChunk[], type: AgenticLoopChunk["type"]) =>
  chunks
    .filter((chunk) => chunk.type === type)
    .map((chunk) => (chunk as { text: string }).text)
    .join("");
