// What a message asks of the scripted loop. Every line of every text block is one step: a directive
// below, or plain text the agent answers. Other blocks (image, audio, resource, resource_link) are
// described in one line of text. A message the agent cannot take is refused as a whole (4xx).
import { ContentBlockSchema, type ContentBlock } from "@modelcontextprotocol/sdk/types.js";

export type Step =
  | { readonly kind: "say"; readonly text: string }
  | { readonly kind: "describe"; readonly text: string }
  | { readonly kind: "tool"; readonly name: string; readonly arguments: Record<string, unknown> }
  | { readonly kind: "tools" }
  | { readonly kind: "spawn"; readonly task: string }
  | { readonly kind: "pause"; readonly label: string }
  | { readonly kind: "sleep"; readonly ms: number }
  | { readonly kind: "burst"; readonly count: number }
  | { readonly kind: "seam" }
  | { readonly kind: "notify"; readonly text: string }
  | { readonly kind: "refusal"; readonly text: string }
  | { readonly kind: "image" }
  | { readonly kind: "audio" }
  | { readonly kind: "fatal"; readonly text: string }
  | { readonly kind: "stop" };

/** A message as the loop holds it: its key, its blocks as sent, and the steps they ask for. */
export interface Message {
  readonly key: string;
  readonly content: readonly ContentBlock[];
  readonly steps: readonly Step[];
}

/** Why a message is refused: the 4xx body's `error`. */
export class Refusal extends Error {}

/** Reads `{"key": string, "content": [ContentBlock…]}`; throws `TypeError` when malformed (400), `Refusal` when refused (422). */
export function readMessage(value: unknown, where = "the message"): Message {
  if (typeof value !== "object" || value === null || Array.isArray(value)) throw new TypeError(`${where} is not an object`);
  const { key, content } = value as { key?: unknown; content?: unknown };
  if (typeof key !== "string") throw new TypeError(`${where} has no string key`);
  if (!Array.isArray(content)) throw new TypeError(`${where} has no content array`);
  if (content.length === 0) throw new Refusal(`${where} has no content block`);
  const blocks = content.map((block, at) => {
    if (!ContentBlockSchema.safeParse(block).success) throw new Refusal(`content block ${at} of ${where} is not an MCP content block`);
    return block as ContentBlock;
  });
  return { key, content: blocks, steps: blocks.flatMap((block) => stepsOf(block)) };
}

function stepsOf(block: ContentBlock): Step[] {
  switch (block.type) {
    case "text":
      return block.text
        .split("\n")
        .map((line) => line.trim())
        .filter((line) => line !== "")
        .map(stepOf);
    case "image":
    case "audio":
      return [{ kind: "describe", text: `I see ${block.type === "image" ? "an image" : "a sound"} (${block.mimeType}, ${Buffer.from(block.data, "base64").length} bytes).` }];
    case "resource":
      return [{ kind: "describe", text: `I see the resource ${block.resource.uri}.` }];
    case "resource_link":
      return [{ kind: "describe", text: `I see a link to ${block.uri} (${block.name}).` }];
  }
}

const TOOL = /^tool:(\S+)(?:\s+([\s\S]*))?$/;

function stepOf(line: string): Step {
  const tool = TOOL.exec(line);
  if (tool) {
    const name = tool[1]!;
    let args: unknown = {};
    if (tool[2] !== undefined && tool[2].trim() !== "") {
      try {
        args = JSON.parse(tool[2]);
      } catch {
        throw new Refusal(`the arguments of tool:${name} are not JSON`);
      }
    }
    if (typeof args !== "object" || args === null || Array.isArray(args)) throw new Refusal(`the arguments of tool:${name} are not a JSON object`);
    return { kind: "tool", name, arguments: args as Record<string, unknown> };
  }
  const [word, rest] = splitDirective(line);
  switch (word) {
    case "tools":
      if (rest === undefined) return { kind: "tools" };
      break;
    case "spawn":
      return { kind: "spawn", task: rest || "a task" };
    case "pause":
      return { kind: "pause", label: rest || "pause" };
    case "sleep": {
      const ms = Number(rest);
      if (rest === undefined || !/^[0-9]+$/.test(rest) || !Number.isSafeInteger(ms)) throw new Refusal("sleep: needs a whole number of milliseconds");
      return { kind: "sleep", ms };
    }
    case "burst": {
      const count = Number(rest);
      if (rest === undefined || !/^[0-9]+$/.test(rest) || !Number.isSafeInteger(count)) throw new Refusal("burst: needs a whole number of chunks");
      return { kind: "burst", count };
    }
    case "seam":
      if (rest === undefined) return { kind: "seam" };
      break;
    case "notify":
      return { kind: "notify", text: rest ?? "" };
    case "refusal":
      return { kind: "refusal", text: rest ?? "I will not do that." };
    case "image":
      if (rest === undefined) return { kind: "image" };
      break;
    case "audio":
      if (rest === undefined) return { kind: "audio" };
      break;
    case "fatal":
      return { kind: "fatal", text: rest ?? "the loop failed on purpose" };
    case "stop":
      if (rest === undefined) return { kind: "stop" };
      break;
    case "refuse":
      throw new Refusal(rest ?? "the message asked to be refused");
  }
  return { kind: "say", text: line };
}

/** `word` or `word:rest` → `[word, rest]`; anything else → `[undefined]`. */
function splitDirective(line: string): [string | undefined, string | undefined] {
  const match = /^([a-z]+)(?::([\s\S]*))?$/.exec(line);
  if (!match) return [undefined, undefined];
  return [match[1], match[2]];
}

/** Text cut into deltas of one word each (the spaces kept), so concatenating them gives the text back. */
export function deltas(text: string): string[] {
  const parts = text.match(/\S+\s*|\s+/g) ?? [];
  return parts.length > 0 ? parts : [text];
}

/** A JSON text cut into (at most) three fragments. */
export function fragments(json: string): string[] {
  const size = Math.max(1, Math.ceil(json.length / 3));
  const out: string[] = [];
  for (let at = 0; at < json.length; at += size) out.push(json.slice(at, at + size));
  return out.length > 0 ? out : [json];
}
