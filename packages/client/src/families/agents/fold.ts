// Folding an agent's chunk stream (agents.md §7) into whole messages: the deltas of text, reasoning
// and refusals concatenated (and their logprobs appended) while the same kind goes on in the same
// thread, a tool call's fragments joined by its id, a message's user parts gathered into its content
// blocks, whole pieces kept as they are, and usage summed. Transport-free: it reads typed chunks.
import type { AgenticLoopChunk, ContentBlock, Logprob } from "@diverge/codec";

/** Tokens used, summed over every `usage` chunk folded. */
export interface UsageTotals {
  prompt_tokens: number;
  completion_tokens: number;
  total_tokens: number;
}

/** Members every folded message may carry: the sub-agent's tool call that produced it (absent on the main thread). */
interface Thread {
  readonly parent_tool_call_id?: string;
}

/** One whole message of the loop, folded from its chunks. */
export type FoldedMessage =
  /** A user message that landed: its parts gathered back into content blocks, under its enqueue's key. */
  | { readonly kind: "user"; readonly key: string; readonly content: ContentBlock[] }
  /** The assistant's text, reasoning or refusal: the deltas concatenated, their logprobs appended. */
  | ({ readonly kind: "text" | "reasoning" | "refusal"; text: string; readonly logprobs: Logprob[] } & Thread)
  | ({ readonly kind: "image" | "audio"; readonly data: string; readonly mimeType: string } & Thread)
  /**
   * A tool call: every fragment under its `id` joined. `parsed` is the arguments' JSON once they parse
   * (undefined while they do not); `complete` once its response arrived or another message began.
   */
  | ({ readonly kind: "tool_call"; readonly id: string; name: string; arguments: string; parsed: unknown; complete: boolean } & Thread)
  /** A tool call's whole result. */
  | ({ readonly kind: "tool_response"; readonly id: string; readonly content: ContentBlock[]; readonly structuredContent?: unknown; readonly isError: boolean } & Thread)
  /** The loop speaking on its own account; `is_fatal` means it ended there. */
  | { readonly kind: "notification"; readonly is_fatal: boolean; readonly message: unknown };

/** What folding one chunk did. */
export type FoldStep =
  /** A new message began with this chunk (`text` the first delta, for a text-like message). */
  | { readonly type: "began"; readonly message: FoldedMessage; readonly index: number; readonly delta?: string }
  /** A delta was added to the message at `index` (`delta`: the text or the arguments' fragment). */
  | { readonly type: "grew"; readonly message: FoldedMessage; readonly index: number; readonly delta: string }
  /** The message at `index` is whole: the next message began, its response arrived, or `finish()` was called. */
  | { readonly type: "completed"; readonly message: FoldedMessage; readonly index: number }
  /** A `usage` chunk, added to the totals. */
  | { readonly type: "usage"; readonly usage: UsageTotals; readonly totals: UsageTotals };

const USER_BLOCK: Record<string, ContentBlock["type"]> = {
  user_text_content: "text",
  user_image_content: "image",
  user_audio_content: "audio",
  user_resource: "resource",
  user_resource_link: "resource_link",
};

const TEXT_KIND: Record<string, "text" | "reasoning" | "refusal"> = {
  assistant_text_content: "text",
  assistant_reasoning: "reasoning",
  assistant_refusal: "refusal",
};

/** The content block a user part carries: its members with `type` put back and `key` taken out. */
export function blockOfUserPart(chunk: AgenticLoopChunk): ContentBlock | undefined {
  const type = USER_BLOCK[chunk.type];
  if (!type) return undefined;
  const { type: _type, key: _key, ...rest } = chunk as unknown as Record<string, unknown>;
  return { type, ...rest } as unknown as ContentBlock;
}

function thread(chunk: { readonly parent_tool_call_id?: string | null }): Thread {
  return typeof chunk.parent_tool_call_id === "string" ? { parent_tool_call_id: chunk.parent_tool_call_id } : {};
}

function parseArguments(text: string): unknown {
  if (text.trim() === "") return {};
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}

/**
 * Folds chunks into whole messages as they come. `add(chunk)` says what the chunk did (a message
 * began, grew, or the one before it is complete); `messages` is everything so far; `usage` the totals.
 * A delta continues the last message when it is the same kind in the same thread; a tool call's
 * fragments join the call of their `id` wherever it is. `finish()` completes what is still open.
 */
export class ChunkFold {
  readonly messages: FoldedMessage[] = [];
  readonly usage: UsageTotals = { prompt_tokens: 0, completion_tokens: 0, total_tokens: 0 };
  private open: number | undefined;
  private readonly calls = new Map<string, number>();

  add(chunk: AgenticLoopChunk): FoldStep[] {
    const steps: FoldStep[] = [];
    const last = this.open === undefined ? undefined : this.messages[this.open];
    const textKind = TEXT_KIND[chunk.type];
    if (textKind) {
      const delta = chunk as { text: string; logprobs?: Logprob[] | null; parent_tool_call_id?: string | null };
      const parent = thread(delta).parent_tool_call_id;
      if (last && last.kind === textKind && last.parent_tool_call_id === parent) {
        last.text += delta.text;
        if (delta.logprobs) last.logprobs.push(...delta.logprobs);
        steps.push({ type: "grew", message: last, index: this.open!, delta: delta.text });
        return steps;
      }
      return this.begin(steps, { kind: textKind, text: delta.text, logprobs: [...(delta.logprobs ?? [])], ...thread(delta) }, delta.text);
    }
    switch (chunk.type) {
      case "assistant_tool_call": {
        const fragment = chunk.arguments ?? "";
        const at = this.calls.get(chunk.id);
        if (at !== undefined) {
          const call = this.messages[at] as Extract<FoldedMessage, { kind: "tool_call" }>;
          call.arguments += fragment;
          if (chunk.name) call.name = call.name || chunk.name;
          call.parsed = parseArguments(call.arguments);
          steps.push({ type: "grew", message: call, index: at, delta: fragment });
          return steps;
        }
        this.begin(steps, { kind: "tool_call", id: chunk.id, name: chunk.name, arguments: fragment, parsed: parseArguments(fragment), complete: false, ...thread(chunk) }, fragment);
        this.calls.set(chunk.id, this.messages.length - 1);
        return steps;
      }
      case "tool_response": {
        const at = this.calls.get(chunk.id);
        if (at !== undefined) this.completeCall(steps, at);
        return this.begin(steps, { kind: "tool_response", id: chunk.id, content: chunk.content, ...(chunk.structuredContent != null ? { structuredContent: chunk.structuredContent } : {}), isError: chunk.isError === true, ...thread(chunk) });
      }
      case "usage": {
        const usage = { prompt_tokens: chunk.prompt_tokens, completion_tokens: chunk.completion_tokens, total_tokens: chunk.total_tokens };
        this.usage.prompt_tokens += usage.prompt_tokens;
        this.usage.completion_tokens += usage.completion_tokens;
        this.usage.total_tokens += usage.total_tokens;
        steps.push({ type: "usage", usage, totals: { ...this.usage } });
        return steps;
      }
      case "notification":
        return this.begin(steps, { kind: "notification", is_fatal: chunk.is_fatal, message: chunk.message });
      case "assistant_image_content":
      case "assistant_audio_content":
        return this.begin(steps, { kind: chunk.type === "assistant_image_content" ? "image" : "audio", data: chunk.data, mimeType: chunk.mimeType, ...thread(chunk) });
      default: {
        const block = blockOfUserPart(chunk);
        if (!block) return steps;
        const key = (chunk as { key: string }).key;
        // A message's parts are consecutive: a part under the same key as the open user message joins it.
        if (last && last.kind === "user" && last.key === key) {
          last.content.push(block);
          steps.push({ type: "grew", message: last, index: this.open!, delta: "" });
          return steps;
        }
        return this.begin(steps, { kind: "user", key, content: [block] });
      }
    }
  }

  /** Completes the open message (call it when the loop has ended). */
  finish(): FoldStep[] {
    const steps: FoldStep[] = [];
    this.close(steps);
    for (const at of this.calls.values()) this.completeCall(steps, at);
    return steps;
  }

  private begin(steps: FoldStep[], message: FoldedMessage, delta?: string): FoldStep[] {
    this.close(steps);
    this.messages.push(message);
    this.open = this.messages.length - 1;
    steps.push(delta === undefined ? { type: "began", message, index: this.open } : { type: "began", message, index: this.open, delta });
    return steps;
  }

  private close(steps: FoldStep[]): void {
    if (this.open === undefined) return;
    const at = this.open;
    this.open = undefined;
    const message = this.messages[at]!;
    // A tool call stays open for its fragments until its response arrives (or finish()).
    if (message.kind === "tool_call") return;
    steps.push({ type: "completed", message, index: at });
  }

  private completeCall(steps: FoldStep[], at: number): void {
    const call = this.messages[at] as Extract<FoldedMessage, { kind: "tool_call" }>;
    if (call.complete) return;
    call.complete = true;
    steps.push({ type: "completed", message: call, index: at });
  }
}

/** Folds a chunk stream: every step of {@link ChunkFold.add}, then those of `finish()` when the stream ends. */
export async function* foldChunks(chunks: AsyncIterable<AgenticLoopChunk>, fold: ChunkFold = new ChunkFold()): AsyncGenerator<FoldStep, ChunkFold> {
  for await (const chunk of chunks) yield* fold.add(chunk);
  yield* fold.finish();
  return fold;
}

/** The whole messages of `chunks` (every chunk already at hand), folded. */
export function foldAll(chunks: Iterable<AgenticLoopChunk>): { messages: FoldedMessage[]; usage: UsageTotals } {
  const fold = new ChunkFold();
  for (const chunk of chunks) fold.add(chunk);
  fold.finish();
  return { messages: fold.messages, usage: fold.usage };
}
