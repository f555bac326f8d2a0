// A container's MCP server whose HTTP layer can fail on purpose, for the parity test's inward rows:
// the real example container (an MCP SDK server over Streamable HTTP, with /register and /secrets)
// behind a front that forwards every request, except the next one of an armed method, which it
// refuses, drops mid-call, or answers with bytes that are not an MCP answer.
import { createServer, request as httpRequest, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo, Socket } from "node:net";
import { startExampleContainer, type ExampleContainer } from "@diverge/example-container";

export type Fault =
  /** HTTP 503 before the server sees the request: the call was not served. */
  | "refuse"
  /** The request reaches the server, which acts on it; the connection is cut before its answer. */
  | "drop"
  /** A JSON-RPC answer whose result is not of the method's result type. */
  | "malformedResult"
  /** A body that is not JSON at all. */
  | "notJson";

export interface FaultyContainer {
  /** The front's port: give it to the proxy as the app port. */
  readonly port: number;
  readonly app: ExampleContainer;
  /** The next request for `method` meets `fault`; every other passes through. */
  arm(method: string, fault: Fault): void;
  /** Requests for `method` that reached the real server. */
  reached(method: string): number;
  close(): Promise<void>;
}

export async function startFaultyContainer(): Promise<FaultyContainer> {
  const app = await startExampleContainer();
  const armed = new Map<string, Fault>();
  const reached = new Map<string, number>();
  const sockets = new Set<Socket>();

  const forward = (request: IncomingMessage, body: Buffer, response: ServerResponse | undefined, onAnswer?: (status: number, headers: IncomingMessage["headers"], answer: Buffer) => void) => {
    const upstream = httpRequest({ host: "127.0.0.1", port: app.port, path: request.url, method: request.method, headers: request.headers }, (answer) => {
      if (onAnswer) {
        const chunks: Buffer[] = [];
        answer.on("data", (chunk: Buffer) => chunks.push(chunk));
        answer.on("end", () => onAnswer(answer.statusCode ?? 0, answer.headers, Buffer.concat(chunks)));
        return;
      }
      response!.writeHead(answer.statusCode ?? 502, answer.headers);
      answer.pipe(response!);
      response!.once("close", () => answer.destroy());
    });
    upstream.on("error", () => response?.destroy());
    response?.once("close", () => upstream.destroy());
    upstream.end(body);
  };

  const http: Server = createServer((request, response) => {
    const chunks: Buffer[] = [];
    request.on("data", (chunk: Buffer) => chunks.push(chunk));
    request.on("end", () => {
      const body = Buffer.concat(chunks);
      let message: { method?: string; id?: unknown } | undefined;
      try {
        message = request.method === "POST" && body.length > 0 ? (JSON.parse(body.toString("utf8")) as typeof message) : undefined;
      } catch {
        message = undefined;
      }
      const method = message?.method;
      const fault = method !== undefined ? armed.get(method) : undefined;
      if (method !== undefined && fault !== "refuse") reached.set(method, (reached.get(method) ?? 0) + 1);
      if (!fault) return forward(request, body, response);
      armed.delete(method!);
      switch (fault) {
        case "refuse":
          return void response.writeHead(503, { "content-type": "text/plain" }).end("the server is not taking calls now");
        case "drop":
          // The server acts on the call; its answer never comes back.
          return forward(request, body, undefined, () => response.socket?.destroy());
        case "malformedResult":
          return void response.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify({ jsonrpc: "2.0", id: message!.id, result: { tools: "not a list", content: "not a list", contents: 7 } }));
        case "notJson":
          return void response.writeHead(200, { "content-type": "application/json" }).end("this is not json");
      }
    });
  });
  http.on("connection", (socket: Socket) => {
    sockets.add(socket);
    socket.once("close", () => sockets.delete(socket));
  });
  await new Promise<void>((resolve) => http.listen(0, "127.0.0.1", resolve));
  return {
    port: (http.address() as AddressInfo).port,
    app,
    arm(method, fault) {
      armed.set(method, fault);
    },
    reached(method) {
      return reached.get(method) ?? 0;
    },
    async close() {
      for (const socket of sockets) socket.destroy();
      await new Promise<void>((resolve) => http.close(() => resolve()));
      await app.close();
    },
  };
}
