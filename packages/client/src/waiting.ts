// Every wait of the client library is bounded: a request takes `{ signal, timeoutMs }` (the shape of
// the MCP SDK's RequestOptions) and, when either fires first, rejects with the caller's typed error
// saying what it was waiting for.

/** How long a request may wait, and a signal that abandons it. */
export interface RequestOptions {
  /** Abandons the wait: the promise rejects with an `Aborted` error. */
  readonly signal?: AbortSignal;
  /**
   * Milliseconds before the promise rejects with a `TimedOut` error. Default 60 000 (the MCP SDK's
   * default); `0` or `Infinity` waits without a bound (the signal still applies).
   */
  readonly timeoutMs?: number;
}

/** The MCP SDK's default request timeout. */
export const DEFAULT_TIMEOUT_MS = 60_000;

export interface WaitFailures {
  timedOut(timeoutMs: number): Error;
  aborted(reason: unknown): Error;
}

/**
 * Runs `start` with settle functions and bounds it by `options`. `start` may return a clean-up that
 * runs once whichever way the wait ends.
 */
export function bounded<T>(
  options: RequestOptions | undefined,
  failures: WaitFailures,
  start: (resolve: (value: T) => void, reject: (error: unknown) => void) => (() => void) | void,
): Promise<T> {
  const timeoutMs = options?.timeoutMs ?? DEFAULT_TIMEOUT_MS;
  const signal = options?.signal;
  return new Promise<T>((resolve, reject) => {
    if (signal?.aborted) return reject(failures.aborted(signal.reason));
    let done = false;
    let timer: ReturnType<typeof setTimeout> | undefined;
    let cleanUp: (() => void) | void;
    const onAbort = () => finish(() => reject(failures.aborted(signal!.reason)));
    const finish = (action: () => void) => {
      if (done) return;
      done = true;
      if (timer) clearTimeout(timer);
      signal?.removeEventListener("abort", onAbort);
      try {
        cleanUp?.();
      } finally {
        action();
      }
    };
    if (Number.isFinite(timeoutMs) && timeoutMs > 0) timer = setTimeout(() => finish(() => reject(failures.timedOut(timeoutMs))), timeoutMs);
    signal?.addEventListener("abort", onAbort, { once: true });
    try {
      cleanUp = start(
        (value) => finish(() => resolve(value)),
        (error) => finish(() => reject(error)),
      );
      if (done) cleanUp?.();
    } catch (error) {
      finish(() => reject(error));
    }
  });
}
