// What the provider's own HTTP servers (`--serve-tools`, `--serve-agent`) share besides the Host/Origin
// check (`guardRefusal` of @diverge/multiplexer, as the proxy's program port): a request body read
// within a bound, and JSON-RPC refusals.
import type { IncomingMessage, ServerResponse } from "node:http";

/**
 * Whether a `Content-Type` header's media type is `application/json`: the part before any parameters,
 * trimmed, case-insensitive (`application/json; charset=utf-8` is; `text/plain; a=application/json`
 * is not), as newer MCP SDKs check it. Written here because the oldest SDK our range allows (1.25.0)
 * has no such export; a comma after the media type (joined duplicate headers) makes it ambiguous, so
 * not JSON.
 */
export function isJsonContentType(header: string | undefined): boolean {
  if (header === undefined) return false;
  if (header === "application/json") return true;
  const semicolon = header.indexOf(";");
  const essence = (semicolon < 0 ? header : header.slice(0, semicolon)).trim().toLowerCase();
  if (essence !== "application/json") return false;
  return semicolon < 0 || !header.slice(semicolon).includes(",");
}

/** A request body over the server's limit: nothing past the limit is read. */
export class BodyTooLarge extends Error {
  override readonly name = "BodyTooLarge";
  constructor(
    readonly limit: number,
    /** The body's declared length when its Content-Length said it, else what had come when reading stopped. */
    readonly bytes: number,
  ) {
    super(`the request body is over the limit of ${limit} bytes (${bytes} bytes ${bytes > limit ? "and more " : ""}sent)`);
  }
}

/**
 * The whole body, as long as it is at most `limit` bytes. A Content-Length over the limit rejects at
 * once, unread; a body that passes it while arriving rejects there and is read no further (answer
 * with `connection: close`, see {@link answerJsonRpcError}, so the rest is never taken in).
 */
export function readBodyWithin(request: IncomingMessage, limit: number): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const declared = Number(request.headers["content-length"]);
    if (Number.isFinite(declared) && declared > limit) {
      request.pause();
      return reject(new BodyTooLarge(limit, declared));
    }
    const chunks: Buffer[] = [];
    let size = 0;
    const onData = (chunk: Buffer) => {
      size += chunk.length;
      if (size <= limit) return void chunks.push(chunk);
      stop();
      chunks.length = 0;
      request.pause();
      reject(new BodyTooLarge(limit, size));
    };
    const onEnd = () => {
      stop();
      resolve(Buffer.concat(chunks));
    };
    const onError = (error: Error) => {
      stop();
      reject(error);
    };
    const stop = () => {
      request.off("data", onData);
      request.off("end", onEnd);
      request.off("error", onError);
    };
    request.on("data", onData);
    request.on("end", onEnd);
    request.on("error", onError);
  });
}

/**
 * A JSON-RPC error response (`id` null unless known). `close`: the connection ends after it (a body
 * left unread, or a refusal, is not read on to find the next request).
 */
export function answerJsonRpcError(response: ServerResponse, status: number, code: number, message: string, options: { id?: unknown; close?: boolean } = {}): void {
  if (response.headersSent) return void response.end();
  const body = JSON.stringify({ jsonrpc: "2.0", id: options.id ?? null, error: { code, message } });
  const headers: Record<string, string | number> = { "content-type": "application/json", "content-length": Buffer.byteLength(body) };
  if (options.close) headers.connection = "close";
  response.writeHead(status, headers).end(body);
}
