// The base classes every generated error extends. Generated frames add their own typed details.

/** What every decode error carries: a discriminant and the fields that variant names. */
export interface ErrorDetail {
  readonly variant: string;
}

/**
 * A frame that could not be read. Each frame (or family of frames) has its own subclass whose
 * `detail` is a discriminated union of that frame's error variants, and whose `message` is exactly
 * the text the spec gives for the variant.
 */
export abstract class DecodeError<D extends ErrorDetail = ErrorDetail> extends Error {
  readonly detail: D;

  protected constructor(detail: D, message: string, cause?: unknown) {
    super(message, cause === undefined ? undefined : { cause });
    this.detail = detail;
  }

  /** The error variant's name, as the spec spells it (`Empty`, `UnknownTag`, …). */
  get variant(): D["variant"] {
    return this.detail.variant;
  }
}

/** A value that cannot be written as the frame it claims to be (an integer out of range, …). */
export class EncodeError extends Error {
  override readonly name = "EncodeError";
  constructor(
    /** The frame being written, by its spec id. */
    readonly frame: string,
    /** The field at fault, when one is. */
    readonly field: string | undefined,
    message: string,
  ) {
    super(message);
  }
}
