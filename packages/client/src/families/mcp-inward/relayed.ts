// The lean relay of the inward MCP family: an exchange's result kept as the JSON bytes the proxy
// sent, for the --serve-tools bridge to write into its answer as they are. The answer frame is read
// by its own decoder without the MCP type check (the JSON is checked as the codec checks any JSON;
// the agent's MCP client checks the result's shape itself), and the parsed value is not used.
import type { AnswerCodec } from "@diverge/codec/exchanges";

/** The requests the bridge relays to the container's server: one exchange each, on either transport. */
export type RelayedMethod = "tools/list" | "tools/call" | "resources/list" | "resources/read";

/** An answer frame read leanly: the result as its JSON bytes, or the MCP error as the codec reads it. */
export type RelayedAnswer = { readonly variant: "Result"; readonly result: Uint8Array } | { readonly variant: "Error"; readonly error: unknown };

/**
 * `codec` (an MCP answer frame, `[0][result: JSON …]` or `[1][error: JSON …]`) with its result kept as
 * bytes: a view of the frame past its tag byte, valid as long as the frame's bytes are.
 */
export function relayedAnswer(codec: Pick<AnswerCodec<{ readonly variant: string }>, "frame" | "decode"> | undefined): AnswerCodec<RelayedAnswer> {
  if (!codec) throw new TypeError("an MCP exchange without an answer frame");
  return {
    frame: codec.frame,
    decode: (bytes) => {
      // No `check`: well-formed JSON (the codec's own rules) is all that is asked of it here.
      const answer = codec.decode(bytes) as { readonly variant: string; readonly error?: unknown };
      return answer.variant === "Result" ? { variant: "Result", result: bytes.subarray(1) } : { variant: "Error", error: answer.error };
    },
    encode: () => {
      throw new TypeError("a relayed answer is only read");
    },
  };
}
