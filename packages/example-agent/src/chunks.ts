// The chunk JSON an agent program streams from `POST /run`: the fourteen `AgenticLoopChunk` variants
// of revision 2.3.0 (agents.md §7.2), `type` deciding. Members are written in the order §7.2 lists
// them; receivers must not depend on key order. The flattened MCP members (`text`, `data`,
// `mimeType`, `content`, `isError`, …) are MCP 2025-11-25's own camelCase names.
import type { AudioContent, CallToolResult, ContentBlock, EmbeddedResource, ImageContent, ResourceLink, TextContent } from "@modelcontextprotocol/sdk/types.js";

type Meta = { _meta?: Record<string, unknown> };
/** MCP's content members without their own `type` (the chunk's `type` replaces it). */
type Flat<T> = Omit<T, "type">;

/** One token's log-probability (agents.md §7.2). `logprob` is a number (a string is accepted by readers). */
export interface Logprob {
  token: string;
  bytes: number[] | null;
  logprob: number;
  top_logprobs: { token: string; bytes: number[] | null; logprob: number | null }[];
}

export type AssistantReasoningChunk = { type: "assistant_reasoning"; parent_tool_call_id?: string; logprobs?: Logprob[] } & Flat<TextContent>;
export type AssistantTextChunk = { type: "assistant_text_content"; parent_tool_call_id?: string; logprobs?: Logprob[] } & Flat<TextContent>;
export type AssistantImageChunk = { type: "assistant_image_content"; parent_tool_call_id?: string } & Flat<ImageContent>;
export type AssistantAudioChunk = { type: "assistant_audio_content"; parent_tool_call_id?: string } & Flat<AudioContent>;
/** A delta of one tool call: chunks with the same `id` concatenate their `arguments` (fragments of the arguments' JSON text). */
export type AssistantToolCallChunk = { type: "assistant_tool_call"; parent_tool_call_id?: string; id: string; name: string; arguments?: string } & Meta;
export type AssistantRefusalChunk = { type: "assistant_refusal"; parent_tool_call_id?: string; logprobs?: Logprob[] } & Flat<TextContent>;
/** A tool call's whole result: `id` is the call's, the rest is MCP's `CallToolResult`. */
export type ToolResponseChunk = { type: "tool_response"; parent_tool_call_id?: string; id: string } & Pick<CallToolResult, "content" | "structuredContent" | "isError" | "_meta">;
export type UserTextChunk = { type: "user_text_content"; key: string } & Flat<TextContent>;
export type UserImageChunk = { type: "user_image_content"; key: string } & Flat<ImageContent>;
export type UserAudioChunk = { type: "user_audio_content"; key: string } & Flat<AudioContent>;
export type UserResourceChunk = { type: "user_resource"; key: string } & Flat<EmbeddedResource>;
export type UserResourceLinkChunk = { type: "user_resource_link"; key: string } & Flat<ResourceLink>;
/** Additive: a loop's totals are the sums. */
export type UsageChunk = { type: "usage"; completion_tokens: number; prompt_tokens: number; total_tokens: number } & Meta;
/** `is_fatal: true` = the loop is over and says why (output, not an error). */
export type NotificationChunk = { type: "notification"; is_fatal: boolean; message: unknown } & Meta;

export type AgenticLoopChunk =
  | AssistantReasoningChunk
  | AssistantTextChunk
  | AssistantImageChunk
  | AssistantAudioChunk
  | AssistantToolCallChunk
  | AssistantRefusalChunk
  | ToolResponseChunk
  | UserTextChunk
  | UserImageChunk
  | UserAudioChunk
  | UserResourceChunk
  | UserResourceLinkChunk
  | UsageChunk
  | NotificationChunk;

/** Every chunk `type`, in agents.md §7.2's order. */
export const CHUNK_TYPES = [
  "assistant_reasoning",
  "assistant_text_content",
  "assistant_image_content",
  "assistant_audio_content",
  "assistant_tool_call",
  "assistant_refusal",
  "tool_response",
  "user_text_content",
  "user_image_content",
  "user_audio_content",
  "user_resource",
  "user_resource_link",
  "usage",
  "notification",
] as const satisfies readonly AgenticLoopChunk["type"][];

const USER_TYPES = {
  text: "user_text_content",
  image: "user_image_content",
  audio: "user_audio_content",
  resource: "user_resource",
  resource_link: "user_resource_link",
} as const;

/** A message's block as its user part (agents.md §7.3): the block's members, its `type` replaced, `key` after it. */
export function userPart(key: string, block: ContentBlock): AgenticLoopChunk {
  const { type, ...rest } = block as ContentBlock & Record<string, unknown>;
  return { type: USER_TYPES[type], key, ...rest } as AgenticLoopChunk;
}
