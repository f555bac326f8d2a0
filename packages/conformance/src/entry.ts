import type { PostcardView } from "./postcard-view.js";

// What the testee knows about one frame: enough to decode, encode, and convert to and from views.
export interface FrameEntry {
  readonly decode: (bytes: Uint8Array, options?: { check?: (type: string, value: unknown) => string | undefined }) => unknown;
  readonly encode: (value: unknown) => Uint8Array;
  /** The frame's own error class: anything else thrown by `decode` is a bug. */
  readonly error: abstract new (...args: never[]) => Error & { readonly variant: string };
  /** The member a view names the variant in, as the spec does (`variant`, `type`, `kind`, `endpoint`, `ask`, `ack`, `answer`); the codec's values name it `variant`. Undefined for a plain frame. */
  readonly discriminant: string | undefined;
  /** The value fields that hold bytes, per variant name ("" for a plain frame); hex in a view. */
  readonly bytesFields: Readonly<Record<string, readonly string[]>>;
  /** For a frame whose values hold postcard: how to walk them (u64 as decimal text in a view). */
  readonly postcard?: PostcardView;
}
