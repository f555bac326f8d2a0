// What can end a filesystem exchange with a container's proxy (tree, read, write), on either transport.

export type FilesystemErrorDetail =
  /** The proxy answered with its error: on the multiplexed connection the JSON value (`{"kind","error"}`, or a relayed content error); on paths the text `kind: error`. */
  | { readonly variant: "Failed"; readonly what: string; readonly error: unknown }
  /** The proxy could not read the request: a bare finish, or a close with no message. */
  | { readonly variant: "NotServed"; readonly what: string }
  /** The connection ended before the exchange did. */
  | { readonly variant: "Lost"; readonly what: string }
  /** An answer did not decode; `reason` is the decoder's text. */
  | { readonly variant: "Unreadable"; readonly what: string; readonly reason: string }
  /** The reader fell more than `limit` frames behind; the tree was stopped. */
  | { readonly variant: "Overflow"; readonly what: string; readonly limit: number }
  /** The reader took nothing for `stallMs` while its read held the multiplexed connection paused; the read was stopped. */
  | { readonly variant: "Stalled"; readonly what: string; readonly stallMs: number }
  /** The path could not be opened (paths transport). */
  | { readonly variant: "Unreachable"; readonly what: string; readonly url: string; readonly status: number | undefined; readonly reason: string };

export class FilesystemError extends Error {
  override readonly name = "FilesystemError";
  constructor(readonly detail: FilesystemErrorDetail) {
    super(describe(detail));
  }
  get variant(): FilesystemErrorDetail["variant"] {
    return this.detail.variant;
  }
}

function describe(detail: FilesystemErrorDetail): string {
  switch (detail.variant) {
    case "Failed":
      return `${detail.what}: ${typeof detail.error === "string" ? detail.error : JSON.stringify(detail.error)}`;
    case "NotServed":
      return `${detail.what}: not served (the proxy could not read the request)`;
    case "Lost":
      return `${detail.what}: the connection ended before the answer`;
    case "Unreadable":
      return `${detail.what}: unreadable answer: ${detail.reason}`;
    case "Overflow":
      return `${detail.what}: the reader fell more than ${detail.limit} frames behind; the tree was stopped`;
    case "Stalled":
      return `${detail.what}: the reader took nothing for ${detail.stallMs} ms while the read held the connection paused; the read was stopped`;
    case "Unreachable":
      return `${detail.what}: could not open ${detail.url}${detail.status ? ` (HTTP ${detail.status})` : ""}: ${detail.reason}`;
  }
}
