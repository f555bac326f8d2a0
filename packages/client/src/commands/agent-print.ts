// How `diverge agent` (and `diverge connect --agent`) prints an agent's loop: the chunks folded as they
// come — text as text, streamed; a user message, reasoning, a refusal, a tool call, its result, an
// image or audio and a notification one line each — and the usage summed at the end. `--json` prints
// each chunk as one JSON line instead.
import type { AgenticLoopChunk, ContentBlock } from "@diverge/codec";
import { ChunkFold, type FoldedMessage, type FoldStep } from "../families/agents/fold.js";

function textOf(content: readonly ContentBlock[]): string {
  return content
    .map((block) => {
      switch (block.type) {
        case "text":
          return block.text;
        case "image":
        case "audio":
          return `[${block.type} ${block.mimeType}]`;
        case "resource":
          return `[resource ${block.resource.uri}]`;
        case "resource_link":
          return `[link ${block.uri}]`;
      }
    })
    .join(" ");
}

function oneLine(text: string): string {
  return text.replace(/\s*\n\s*/g, " ").trim();
}

/** The one line a whole message prints as (undefined for text, which streams). */
export function lineOf(message: FoldedMessage): string | undefined {
  const thread = "parent_tool_call_id" in message && message.parent_tool_call_id ? `[${message.parent_tool_call_id}] ` : "";
  switch (message.kind) {
    case "text":
      return undefined;
    case "user":
      return `> ${message.key}: ${oneLine(textOf(message.content))}`;
    case "reasoning":
      return `${thread}(reasoning) ${oneLine(message.text)}`;
    case "refusal":
      return `${thread}(refusal) ${oneLine(message.text)}`;
    case "tool_call":
      return `${thread}→ ${message.name} ${message.arguments || "{}"} (${message.id})`;
    case "tool_response":
      return `${thread}← ${message.id}${message.isError ? " (error)" : ""}: ${oneLine(textOf(message.content))}`;
    case "image":
    case "audio":
      return `${thread}[${message.kind} ${message.mimeType}, ${Math.floor((message.data.length * 3) / 4)} bytes]`;
    case "notification":
      return `${message.is_fatal ? "! fatal: " : "! "}${typeof message.message === "string" ? message.message : JSON.stringify(message.message)}`;
  }
}

/** A printer of one agent's chunks onto `write` (stdout). */
export function chunkPrinter(write: (text: string) => void, options: { json?: boolean } = {}) {
  const fold = new ChunkFold();
  let atLineStart = true;
  const out = (text: string) => {
    if (text === "") return;
    write(text);
    atLineStart = text.endsWith("\n");
  };
  const line = (text: string) => out(`${atLineStart ? "" : "\n"}${text}\n`);
  const step = (taken: FoldStep) => {
    if (taken.type === "usage") return;
    const { message } = taken;
    if (message.kind === "text") {
      if (taken.type === "began") {
        if (!atLineStart) out("\n");
        if (message.parent_tool_call_id) out(`[${message.parent_tool_call_id}] `);
      }
      if (taken.type !== "completed") out(taken.delta ?? "");
      else if (!atLineStart) out("\n");
      return;
    }
    if (taken.type === "completed") {
      const text = lineOf(message);
      if (text !== undefined) line(text);
    }
  };
  return {
    fold,
    chunk(chunk: AgenticLoopChunk): void {
      if (options.json) return out(`${JSON.stringify(chunk)}\n`);
      for (const taken of fold.add(chunk)) step(taken);
    },
    /** The loop ended: what is open is completed, and the usage said when there was any. */
    end(): void {
      if (options.json) return;
      for (const taken of fold.finish()) step(taken);
      const usage = fold.usage;
      if (usage.total_tokens > 0 || usage.prompt_tokens > 0 || usage.completion_tokens > 0) line(`usage: prompt ${usage.prompt_tokens}, completion ${usage.completion_tokens}, total ${usage.total_tokens}`);
    },
  };
}
