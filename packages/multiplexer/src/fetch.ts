// A fetch for the MCP SDK's Streamable HTTP client transport that gives every request a signal of its own
// (shared by the proxy's inward MCP client and the provider's relay, which both talk to MCP servers).
//
// Why: @modelcontextprotocol/sdk 1.32.2 passes one AbortSignal (its transport's) to every fetch it
// makes. Node's fetch (undici) adds an 'abort' listener to that signal per request and removes it only
// when the request object is garbage-collected, so a busy relay collects hundreds of listeners on the
// one signal between collections and Node prints `MaxListenersExceededWarning` (issue 13). Here each
// request gets its own AbortController; the transport's signal gets exactly one listener (added the
// first time it is seen) that aborts the requests in flight, each of which leaves the in-flight set as
// soon as its response's body has been read, cancelled or has failed. (`AbortSignal.any` would do the
// linking, but in Node 20 it keeps a reference per dependent signal on the source: it grows too.)
export type FetchLike = (url: string | URL, init?: RequestInit) => Promise<Response>;

export interface FetchWatch {
  /** Called when a response body ends (`error` when it failed); not when the transport aborted it. */
  readonly bodyEnded?: (method: string, status: number, error?: unknown) => void;
  /** Called with each response's status, before its body is read. */
  readonly responded?: (method: string, status: number) => void;
}

export interface WatchedFetch extends FetchLike {
  /** Requests whose response has not been read to its end yet. */
  readonly inFlight: () => number;
}

/** Statuses whose responses carry no body (the Response constructor refuses one). */
const NULL_BODY = new Set([101, 103, 204, 205, 304]);

export function perRequestSignalFetch(watch: FetchWatch = {}, base: FetchLike = fetch): WatchedFetch {
  const inFlight = new Set<AbortController>();
  const linked = new WeakSet<AbortSignal>();
  const link = (outer: AbortSignal) => {
    if (linked.has(outer)) return;
    linked.add(outer);
    outer.addEventListener("abort", () => {
      for (const controller of [...inFlight]) controller.abort(outer.reason);
    }, { once: true });
  };
  const watched = async (url: string | URL, init?: RequestInit): Promise<Response> => {
    const outer = init?.signal ?? undefined;
    const method = (init?.method ?? "GET").toUpperCase();
    if (!outer) return base(url, init);
    outer.throwIfAborted();
    link(outer);
    const controller = new AbortController();
    inFlight.add(controller);
    const release = () => inFlight.delete(controller);
    let response: Response;
    try {
      response = await base(url, { ...init, signal: controller.signal });
    } catch (error) {
      release();
      throw error;
    }
    watch.responded?.(method, response.status);
    const body = response.body;
    if (!body || NULL_BODY.has(response.status)) {
      release();
      return response;
    }
    const reader = body.getReader();
    const ended = (error?: unknown) => {
      release();
      if (!controller.signal.aborted) watch.bodyEnded?.(method, response.status, error);
    };
    const wrapped = new ReadableStream<Uint8Array>({
      async pull(stream) {
        let step: ReadableStreamReadResult<Uint8Array>;
        try {
          step = await reader.read();
        } catch (error) {
          ended(error);
          stream.error(error);
          return;
        }
        if (step.done) {
          ended();
          stream.close();
        } else stream.enqueue(step.value);
      },
      cancel(reason) {
        release();
        return reader.cancel(reason);
      },
    });
    return new Response(wrapped, { status: response.status, statusText: response.statusText, headers: response.headers });
  };
  return Object.assign(watched, { inFlight: () => inFlight.size });
}
