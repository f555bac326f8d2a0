// What can end a filesystem exchange with a container's proxy (tree, read, write), on either transport.

/**
 * Linux's errno numbers by name (asm-generic/errno-base.h and errno.h), which the proxy's OS error texts carry (`No such file or directory
 * (os error 2)`: the proxy runs on Linux, whatever this side runs on). One name a number (EAGAIN for
 * EWOULDBLOCK, ENOTSUP for EOPNOTSUPP, as Node's `code` on Linux).
 */
const LINUX_ERRNO = {
  EPERM: 1, ENOENT: 2, ESRCH: 3, EINTR: 4, EIO: 5, ENXIO: 6, E2BIG: 7, ENOEXEC: 8, EBADF: 9, ECHILD: 10,
  EAGAIN: 11, ENOMEM: 12, EACCES: 13, EFAULT: 14, ENOTBLK: 15, EBUSY: 16, EEXIST: 17, EXDEV: 18, ENODEV: 19,
  ENOTDIR: 20, EISDIR: 21, EINVAL: 22, ENFILE: 23, EMFILE: 24, ENOTTY: 25, ETXTBSY: 26, EFBIG: 27,
  ENOSPC: 28, ESPIPE: 29, EROFS: 30, EMLINK: 31, EPIPE: 32, EDOM: 33, ERANGE: 34, EDEADLK: 35,
  ENAMETOOLONG: 36, ENOLCK: 37, ENOSYS: 38, ENOTEMPTY: 39, ELOOP: 40, ENOMSG: 42, EIDRM: 43, ECHRNG: 44,
  EL2NSYNC: 45, EL3HLT: 46, EL3RST: 47, ELNRNG: 48, EUNATCH: 49, ENOCSI: 50, EL2HLT: 51, EBADE: 52,
  EBADR: 53, EXFULL: 54, ENOANO: 55, EBADRQC: 56, EBADSLT: 57, EBFONT: 59, ENOSTR: 60, ENODATA: 61,
  ETIME: 62, ENOSR: 63, ENONET: 64, ENOPKG: 65, EREMOTE: 66, ENOLINK: 67, EADV: 68, ESRMNT: 69, ECOMM: 70,
  EPROTO: 71, EMULTIHOP: 72, EDOTDOT: 73, EBADMSG: 74, EOVERFLOW: 75, ENOTUNIQ: 76, EBADFD: 77, EREMCHG: 78,
  ELIBACC: 79, ELIBBAD: 80, ELIBSCN: 81, ELIBMAX: 82, ELIBEXEC: 83, EILSEQ: 84, ERESTART: 85, ESTRPIPE: 86,
  EUSERS: 87, ENOTSOCK: 88, EDESTADDRREQ: 89, EMSGSIZE: 90, EPROTOTYPE: 91, ENOPROTOOPT: 92,
  EPROTONOSUPPORT: 93, ESOCKTNOSUPPORT: 94, ENOTSUP: 95, EPFNOSUPPORT: 96, EAFNOSUPPORT: 97, EADDRINUSE: 98,
  EADDRNOTAVAIL: 99, ENETDOWN: 100, ENETUNREACH: 101, ENETRESET: 102, ECONNABORTED: 103, ECONNRESET: 104,
  ENOBUFS: 105, EISCONN: 106, ENOTCONN: 107, ESHUTDOWN: 108, ETOOMANYREFS: 109, ETIMEDOUT: 110,
  ECONNREFUSED: 111, EHOSTDOWN: 112, EHOSTUNREACH: 113, EALREADY: 114, EINPROGRESS: 115, ESTALE: 116,
  EUCLEAN: 117, ENOTNAM: 118, ENAVAIL: 119, EISNAM: 120, EREMOTEIO: 121, EDQUOT: 122, ENOMEDIUM: 123,
  EMEDIUMTYPE: 124, ECANCELED: 125, ENOKEY: 126, EKEYEXPIRED: 127, EKEYREVOKED: 128, EKEYREJECTED: 129,
  EOWNERDEAD: 130, ENOTRECOVERABLE: 131, ERFKILL: 132, EHWPOISON: 133,
} as const;

/** The errno name of an OS error the proxy met (`ENOENT`, `EACCES`, `ENOTDIR`, …). */
export type FilesystemErrno = keyof typeof LINUX_ERRNO;

const ERRNO_BY_NUMBER = new Map<number, FilesystemErrno>(Object.entries(LINUX_ERRNO).map(([name, number]) => [number, name as FilesystemErrno]));

/**
 * The errno name in a filesystem error as the proxy sends it, or undefined when it is no OS error:
 * the `error` member of `{"kind","error"}` (multiplexed), or the text `kind: error` (paths), ending
 * `(os error N)`.
 */
export function errnoOf(error: unknown): FilesystemErrno | undefined {
  const text = typeof error === "string" ? error : typeof error === "object" && error !== null && typeof (error as { error?: unknown }).error === "string" ? (error as { error: string }).error : undefined;
  const found = text === undefined ? null : /\(os error (\d+)\)$/.exec(text);
  return found ? ERRNO_BY_NUMBER.get(Number(found[1])) : undefined;
}

export type FilesystemErrorDetail =
  /**
   * The proxy answered with its error: on the multiplexed connection the JSON value (`{"kind","error"}`, or a relayed content error); on paths the text `kind: error`.
   * `code` is the errno name when that error is an OS error's (`… (os error 2)` → `ENOENT`), absent otherwise; the text is kept exactly as sent.
   */
  | { readonly variant: "Failed"; readonly what: string; readonly error: unknown; readonly code?: FilesystemErrno }
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
  readonly detail: FilesystemErrorDetail;
  constructor(detail: FilesystemErrorDetail) {
    super(describe(detail));
    const code = detail.variant === "Failed" && detail.code === undefined ? errnoOf(detail.error) : undefined;
    this.detail = detail.variant === "Failed" && code ? { ...detail, code } : detail;
  }
  get variant(): FilesystemErrorDetail["variant"] {
    return this.detail.variant;
  }
  /** The errno name of the OS error the proxy met (`ENOENT`, …), when the error is one (see `Failed`). */
  get code(): FilesystemErrno | undefined {
    return this.detail.variant === "Failed" ? this.detail.code : undefined;
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
