// One request of the inward MCP session, POSTed with `node:http` rather than through the MCP SDK's
// client (issue 36: the SDK's fetch, web streams and per-message work cost the proxy 1.6–2.6 ms of CPU
// per relayed call). The session itself (initialize, the notification stream, DELETE) stays the SDK's;
// this sends on it with its id and protocol version and reads the answer as the SDK's transport would:
// a JSON body, or an SSE stream resumed with Last-Event-ID when the server closes it after a priming
// event (MCP 2025-11-25's polling). Every other message the server sends on the stream (its own
// requests, notifications not about this call) is handed to the SDK's client, which answers it.
// Failures come back as the errors the SDK's client would have thrown, so the caller classifies them
// one way whichever path carried the call.
import http from "node:http";
import https from "node:https";
import { StreamableHTTPError } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { ErrorCode, McpError } from "@modelcontextprotocol/sdk/types.js";
import { SseParser } from "../../sse.js";

/** What one POST needs of its session. */
export interface LeanSession {
  readonly url: URL;
  readonly agent: http.Agent;
  /** `mcp-session-id` and `mcp-protocol-version`, as the SDK's transport sends them. */
  headers(): Record<string, string>;
  /** A message of the stream that is not this call's answer nor its progress. */
  other(message: unknown): void;
  /** The server answered 404: it no longer knows the session. */
  notFound(): void;
  /** The call's stream closed and could not be resumed: the session is given up. */
  unresumable(): void;
  /** Reconnection timing: the server's `retry` when it sent one (shared by the session, as the SDK's transport keeps it). */
  retryMs: number | undefined;
  /** The proxy's message limit: an answer larger cannot be relayed (see `answerBound`). */
  readonly maxMessageBytes: number;
}

/**
 * The most bytes of one answer read (a JSON body; characters of one SSE event's data): past it the
 * call is refused and its connection cut. Twice the message limit and some: a server's JSON may carry
 * whitespace and an envelope that the answer's frame does not; that frame's own size is checked
 * against the limit after.
 */
export const answerBound = (maxMessageBytes: number): number => 2 * maxMessageBytes + 64 * 1024;

export interface LeanCall {
  readonly id: string;
  readonly body: string;
  readonly onprogress?: (params: Record<string, unknown>) => void;
  readonly signal?: AbortSignal;
  /** Resumptions of one closed stream before the call is given up, and the delays before each. */
  readonly retries: number;
  readonly delay: (attempt: number, serverRetryMs: number | undefined) => number;
}

/** A JSON-RPC response: the answer of the call. */
interface Response {
  readonly result?: unknown;
  readonly error?: { code: number; message: string; data?: unknown };
}

/** The most bytes of an HTTP refusal's body kept for its error message. */
const REFUSAL_TEXT_BYTES = 64 * 1024;

/** The error `fetch` gives for a connection that failed: the caller reads its `cause.code`. */
function connectionFailed(cause: unknown): TypeError {
  return Object.assign(new TypeError("fetch failed"), { cause });
}

/**
 * Sends the call and settles with its result (the server's error as an McpError). Rejects with a
 * StreamableHTTPError for an HTTP error status, a "fetch failed" TypeError for a failed connection,
 * a SyntaxError for a JSON body that does not parse, and the signal's reason when it fires.
 */
export function leanPost(session: LeanSession, call: LeanCall, close: { add(stop: (error: Error) => void): void; delete(stop: (error: Error) => void): void }): Promise<unknown> {
  return new Promise<unknown>((resolve, reject) => {
    let settled = false;
    let current: http.ClientRequest | undefined;
    let timer: ReturnType<typeof setTimeout> | undefined;
    /** The SSE answer being read, while it is. */
    let answering: http.IncomingMessage | undefined;
    const finish = (error: unknown, value?: unknown) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      close.delete(stop);
      call.signal?.removeEventListener("abort", abort);
      // Answered: the rest of the stream (the server ends it after the answer) is read to its end, so
      // the connection goes back to the session's keep-alive pool; one not ended soon is cut. Given up
      // or failed: the exchange's connection is cut now (a request already done is not touched).
      if (error === undefined && answering !== undefined) lingerThenCut(answering);
      else current?.destroy();
      if (error !== undefined) reject(error);
      else resolve(value);
    };
    const stop = (error: Error) => finish(error);
    const abort = () => finish(call.signal!.reason);
    if (call.signal?.aborted) return abort();
    call.signal?.addEventListener("abort", abort, { once: true });
    close.add(stop);

    /** A message of the stream: the answer settles the call; this call's progress goes to `onprogress`. */
    const message = (value: unknown): boolean => {
      const record = value as { id?: unknown; method?: unknown; params?: { progressToken?: unknown } } | null;
      if (typeof record !== "object" || record === null) return false;
      if (record.id === call.id && record.method === undefined) {
        const response = record as Response;
        if ("result" in response) finish(undefined, response.result);
        else if (response.error && typeof response.error === "object") finish(new McpError(response.error.code, response.error.message, response.error.data));
        else finish(new McpError(ErrorCode.InternalError, "the container's MCP server answered with a message that is neither a result nor an error"));
        return true;
      }
      if (record.method === "notifications/progress" && record.params?.progressToken === call.id && call.onprogress) {
        const { progressToken: _token, ...progress } = record.params as Record<string, unknown>;
        call.onprogress(progress);
        return false;
      }
      session.other(value);
      return false;
    };

    const transport = session.url.protocol === "https:" ? https : http;
    const send = (method: "POST" | "GET", lastEventId: string | undefined, attempt: number) => {
      const headers: Record<string, string> = { ...session.headers(), accept: method === "POST" ? "application/json, text/event-stream" : "text/event-stream" };
      if (method === "POST") headers["content-type"] = "application/json";
      if (lastEventId !== undefined) headers["last-event-id"] = lastEventId;
      const request = transport.request(session.url, { method, headers, agent: session.agent });
      current = request;
      request.on("error", (error) => {
        if (settled) return;
        if (method === "GET") return resumeLater(lastEventId, attempt + 1);
        finish(connectionFailed(error));
      });
      request.on("response", (response) => {
        // A response given up or let go (resumed, or lingering to its end) may still fail: its
        // errors are taken here so none goes unhandled; the readers below add their own.
        response.on("error", () => {});
        if (settled) return void response.resume();
        const status = response.statusCode ?? 0;
        if (status === 404 && method === "POST") session.notFound();
        if (status < 200 || status > 299) {
          // The refusal's text is said as the SDK's transport says it; only so much of it is kept.
          const chunks: Buffer[] = [];
          let kept = 0;
          response.on("data", (chunk: Buffer) => {
            if (kept >= REFUSAL_TEXT_BYTES) return;
            chunks.push(chunk.subarray(0, REFUSAL_TEXT_BYTES - kept));
            kept += chunk.length;
          });
          response.on("end", () => {
            if (method === "GET") return resumeLater(lastEventId, attempt + 1);
            finish(new StreamableHTTPError(status, `Error POSTing to endpoint: ${Buffer.concat(chunks).toString("utf8")}`));
          });
          return;
        }
        const type = (response.headers["content-type"] ?? "").split(";")[0]!.trim().toLowerCase();
        if (type === "text/event-stream") return readStream(response, lastEventId);
        if (method === "POST" && type === "application/json") return readJson(response);
        response.resume();
        if (method === "GET") return resumeLater(lastEventId, attempt + 1);
        finish(status === 202 ? new McpError(ErrorCode.InternalError, "the container's MCP server accepted the call (HTTP 202) without answering it") : new StreamableHTTPError(-1, `Unexpected content type: ${response.headers["content-type"]}`));
      });
      request.end(method === "POST" ? call.body : undefined);
    };

    const bound = answerBound(session.maxMessageBytes);
    const tooLarge = () => new McpError(ErrorCode.InternalError, `the container's answer is more than ${bound} bytes, larger than the message limit of ${session.maxMessageBytes}`);
    const readJson = (response: http.IncomingMessage) => {
      const chunks: Buffer[] = [];
      let read = 0;
      response.on("data", (chunk: Buffer) => {
        read += chunk.length;
        if (read > bound) return finish(tooLarge());
        chunks.push(chunk);
      });
      response.on("error", (error) => finish(connectionFailed(error)));
      response.on("end", () => {
        if (settled) return;
        let data: unknown;
        try {
          data = JSON.parse(Buffer.concat(chunks).toString("utf8"));
        } catch (error) {
          return finish(error);
        }
        for (const each of Array.isArray(data) ? data : [data]) if (message(each)) return;
        finish(new McpError(ErrorCode.InternalError, "the container's MCP server answered the call's POST without its answer"));
      });
    };

    const readStream = (response: http.IncomingMessage, lastEventId: string | undefined) => {
      const parser = new SseParser(bound);
      parser.lastEventId = lastEventId;
      answering = response;
      response.setEncoding("utf8");
      response.on("data", (text: string) => {
        if (settled) return;
        const events = parser.push(text);
        if (parser.retry !== undefined) session.retryMs = parser.retry;
        for (const event of events) {
          if (!("data" in event)) return finish(tooLarge());
          if (event.data === "" || (event.event !== undefined && event.event !== "" && event.event !== "message")) continue;
          let value: unknown;
          try {
            value = JSON.parse(event.data);
          } catch {
            // The SDK's transport reports such an event and reads on.
            continue;
          }
          if (message(value)) return;
        }
      });
      const ended = () => {
        if (answering === response) answering = undefined;
        if (settled) return;
        // Closed before the answer: resumable once the server has given an event id (a priming event,
        // or the one resumed from); a stream that reached the server resets the count of failed
        // resumptions, as the SDK's does.
        if (parser.lastEventId !== undefined) return resumeLater(parser.lastEventId, 0);
        finish(new McpError(ErrorCode.InternalError, "the container's MCP server closed the call's SSE stream before answering, with no event id to resume it from"));
      };
      response.on("end", ended);
      response.on("error", ended);
      response.on("aborted", ended);
    };

    const resumeLater = (lastEventId: string | undefined, attempt: number) => {
      if (settled) return;
      if (attempt >= call.retries) {
        session.unresumable();
        // The session's end settles the call (with the failure's reason); this is in case it has not.
        return finish(new McpError(ErrorCode.ConnectionClosed, "Connection closed"));
      }
      timer = setTimeout(() => send("GET", lastEventId, attempt), call.delay(attempt, session.retryMs));
    };

    send("POST", undefined, 0);
  });
}

/** How long the rest of an answered SSE stream may take to end before its connection is cut. */
const LINGER_MS = 5_000;

function lingerThenCut(response: http.IncomingMessage): void {
  if (response.complete || response.destroyed) return;
  const cut = setTimeout(() => response.destroy(), LINGER_MS);
  cut.unref();
  response.once("close", () => clearTimeout(cut));
  response.resume();
}
