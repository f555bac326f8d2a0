// The generic engine of the paths the provider opens (`/tool/*`, …), which the generated
// `bindProviderPathAsks` (src/gen/exchanges.ts) binds one typed method per path onto: dial the path,
// send the one request message, read the answer messages as the path's descriptor says. Each opening
// is one exchange and is never repeated. Nothing here names a path; the descriptors do.
import type { OpenedPathDescriptor } from "@diverge/codec/exchanges";
import { checkMcp } from "@diverge/codec/mcp";
import { endpointUrl, proxyBase } from "../url.js";
import { defaultWebSocket, openSocket, type OpenFailure, type OpenSocket, type WebSocketConstructor } from "../paths/socket.js";

/** How an exchange on a path the provider opened ended. */
export type PathOutcome<A> =
  | { readonly type: "answered"; readonly answer: A }
  /** The proxy closed the path cleanly with no message: it could not serve it. */
  | { readonly type: "notServed" }
  /** The path ended abruptly before the answer (no one asks again). */
  | { readonly type: "lost" }
  /** The path could not be opened (`status`: the HTTP refusal, when known). */
  | { readonly type: "refused"; readonly status: number | undefined; readonly reason: string }
  | { readonly type: "unreadable"; readonly reason: string };

/** Every answer of a streamed path, in order, until `close()` or its end; `ended` says how it ended. */
export interface PathStream<A> extends AsyncIterable<A> {
  readonly ended: Promise<{ readonly type: "done" } | Exclude<PathOutcome<never>, { readonly type: "answered" }>>;
  /** Closes the path (the provider's side closes a stream). */
  close(): void;
}

export interface PathAskOptions {
  /** Aborting ends the path abruptly; the exchange is `lost`. */
  readonly signal?: AbortSignal;
}

export interface PathAskEngine {
  one<R, A>(path: OpenedPathDescriptor<R, A>, request: R | undefined, options?: PathAskOptions): Promise<PathOutcome<A>>;
  stream<R, A>(path: OpenedPathDescriptor<R, A>, request: R | undefined, options?: PathAskOptions): PathStream<A>;
}

export interface PathAskEngineOptions {
  readonly WebSocket?: WebSocketConstructor;
}

/** A path engine on the proxy at `url` (its base URL, ws or http). */
export function pathAskEngine(url: string | URL, options: PathAskEngineOptions = {}): PathAskEngine {
  const base = proxyBase(url);
  const Impl = options.WebSocket ?? defaultWebSocket;
  const dial = async <R, A>(path: OpenedPathDescriptor<R, A>, request: R | undefined): Promise<OpenSocket | { refused: OpenFailure }> => {
    try {
      const socket = await openSocket(Impl, endpointUrl(base, path.path.replace(/^\//, "")));
      if (path.request.messages === "one" && path.request.codec) socket.send(path.request.codec.encode(request as R));
      return socket;
    } catch (failure) {
      return { refused: failure as OpenFailure };
    }
  };
  const decode = <R, A>(path: OpenedPathDescriptor<R, A>, bytes: Uint8Array): { answer: A } | { reason: string } => {
    try {
      return { answer: path.answer!.decode(bytes, { check: checkMcp }) };
    } catch (problem) {
      return { reason: problem instanceof Error ? problem.message : String(problem) };
    }
  };

  return {
    async one(path, request, askOptions) {
      const socket = await dial(path, request);
      if ("refused" in socket) return { type: "refused", status: socket.refused.status, reason: socket.refused.message };
      const abort = () => socket.terminate();
      askOptions?.signal?.addEventListener("abort", abort);
      let first: Uint8Array | undefined;
      socket.onMessage((bytes) => {
        first ??= bytes;
      });
      const ending = await socket.ended;
      askOptions?.signal?.removeEventListener("abort", abort);
      if (first) {
        const decoded = decode(path, first);
        return "answer" in decoded ? { type: "answered", answer: decoded.answer } : { type: "unreadable", reason: decoded.reason };
      }
      return ending.clean ? { type: "notServed" } : { type: "lost" };
    },
    stream<R, A>(path: OpenedPathDescriptor<R, A>, request: R | undefined, askOptions?: PathAskOptions): PathStream<A> {
      const queue: A[] = [];
      let wake: (() => void) | undefined;
      let outcome: Awaited<PathStream<A>["ended"]> | undefined;
      let socket: OpenSocket | undefined;
      let closing = false;
      let settle!: (value: Awaited<PathStream<A>["ended"]>) => void;
      const ended = new Promise<Awaited<PathStream<A>["ended"]>>((resolve) => (settle = resolve));
      const finish = (value: Awaited<PathStream<A>["ended"]>) => {
        if (outcome) return;
        outcome = value;
        settle(value);
        wake?.();
      };
      const close = () => {
        closing = true;
        if (socket) socket.close();
        else finish({ type: "done" });
      };
      askOptions?.signal?.addEventListener("abort", () => (socket ? socket.terminate() : finish({ type: "lost" })));
      void dial(path, request).then((opened) => {
        if ("refused" in opened) return finish({ type: "refused", status: opened.refused.status, reason: opened.refused.message });
        socket = opened;
        if (closing || outcome) return opened.close();
        let seen = 0;
        opened.onMessage((bytes) => {
          const decoded = decode(path, bytes);
          if ("reason" in decoded) {
            finish({ type: "unreadable", reason: decoded.reason });
            opened.terminate();
            return;
          }
          seen++;
          queue.push(decoded.answer);
          wake?.();
        });
        void opened.ended.then((ending) => finish(closing || (ending.clean && seen > 0) ? { type: "done" } : ending.clean ? { type: "notServed" } : { type: "lost" }));
      });
      return {
        ended,
        close,
        async *[Symbol.asyncIterator]() {
          try {
            for (;;) {
              if (queue.length > 0) {
                yield queue.shift()!;
                continue;
              }
              if (outcome) return;
              await new Promise<void>((resolve) => (wake = resolve));
              wake = undefined;
            }
          } finally {
            if (!outcome) close();
          }
        },
      };
    },
  };
}
