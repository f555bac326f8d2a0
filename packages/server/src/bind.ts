// The proxy's three ports, bound before the code that serves them has loaded: the provider-facing
// listener, the program's loopback listener and the postgres listener. What arrives before the
// proxy's parts are attached waits (requests and upgrades unanswered, database connections unread)
// and is let through, in order, by `release()`. Only Node's own modules and the listener are loaded
// here, so `diverge-proxy` can say it is listening before it loads anything else.
import { createServer, type Server, type Socket } from "node:net";
import { DEFAULT_MAX_MESSAGE_BYTES, RouteListener } from "./listener.js";

export const PROXY_PORT = 14979;
export const DEFAULT_PROGRAM_PORT = 14980;
export const DEFAULT_PG_PORT = 14981;

export interface BindOptions {
  readonly host?: string;
  readonly port?: number;
  readonly programPort?: number;
  readonly pgPort?: number;
  readonly maxMessageBytes?: number;
  readonly allowedHosts?: readonly string[];
  readonly allowedOrigins?: readonly string[];
  readonly allowedProviderOrigins?: readonly string[];
}

export interface ResolvedBindOptions {
  readonly host: string;
  readonly port: number;
  readonly programPort: number;
  readonly pgPort: number;
  readonly maxMessageBytes: number;
  readonly allowedHosts: readonly string[];
  readonly allowedOrigins: readonly string[];
  readonly allowedProviderOrigins: readonly string[];
}

/** The defaults of the options binding needs (the proxy's `resolveOptions` uses these too). */
export function resolveBindOptions(options: BindOptions): ResolvedBindOptions {
  return {
    host: options.host ?? "127.0.0.1",
    port: options.port ?? PROXY_PORT,
    programPort: options.programPort ?? DEFAULT_PROGRAM_PORT,
    pgPort: options.pgPort ?? DEFAULT_PG_PORT,
    maxMessageBytes: options.maxMessageBytes ?? DEFAULT_MAX_MESSAGE_BYTES,
    allowedHosts: [...(options.allowedHosts ?? [])],
    allowedOrigins: [...(options.allowedOrigins ?? [])],
    allowedProviderOrigins: [...(options.allowedProviderOrigins ?? [])],
  };
}

export interface BoundPorts {
  readonly provider: RouteListener;
  /** Loopback; every request and upgrade must name a loopback host (or an allowed one) and come from no Origin or an allowed one. */
  readonly program: RouteListener;
  readonly pg: Server;
  /** Lets through what waited, in arrival order; from then on everything is served as it comes. */
  release(): void;
  /** Closes all three (for a start that failed after binding). */
  close(): Promise<void>;
}

/** Binds the three ports, holding what arrives until `release()`; a port that cannot be bound closes the others. */
export async function bindPorts(options: BindOptions): Promise<BoundPorts> {
  const resolved = resolveBindOptions(options);
  // The provider reaches this port by whatever address leads to the container (its IP, a DNS name, a
  // mapped port): its Host is not checked. A browser always sends an Origin with a WebSocket
  // handshake and no provider client does, so a page elsewhere (a cross-site WebSocket, no CORS to
  // stop it) is refused: an Origin must be loopback or allowed (--allow-provider-origin).
  const provider = new RouteListener({ host: resolved.host, port: resolved.port, maxMessageBytes: resolved.maxMessageBytes, guard: { hosts: ["*"], origins: resolved.allowedProviderOrigins }, held: true });
  // MCP's rule for Streamable HTTP servers, applied to every path of the loopback listener.
  const program = new RouteListener({
    host: "127.0.0.1",
    port: resolved.programPort,
    maxMessageBytes: resolved.maxMessageBytes,
    // A vault key of 65,535 bytes, percent-encoded, is up to 192 KiB of URL: the program's heads may be that long.
    maxHeaderBytes: 256 * 1024,
    guard: { hosts: resolved.allowedHosts, origins: resolved.allowedOrigins },
    held: true,
  });
  const pg = createServer();
  const waiting: Socket[] = [];
  const hold = (socket: Socket) => {
    socket.on("error", () => socket.destroy());
    socket.pause();
    waiting.push(socket);
  };
  // Until the postgres part takes the listener over, an error of its own (EMFILE on accept) is not thrown.
  const quiet = () => {};
  pg.on("connection", hold);
  const close = async () => {
    for (const socket of waiting.splice(0)) socket.destroy();
    await Promise.allSettled([provider.close(), program.close(), new Promise<void>((resolve) => (pg.listening ? pg.close(() => resolve()) : resolve()))]);
  };
  try {
    await provider.listen();
    await program.listen();
    await new Promise<void>((resolve, reject) => {
      pg.once("error", reject);
      pg.listen(resolved.pgPort, "127.0.0.1", () => {
        pg.off("error", reject);
        pg.on("error", quiet);
        resolve();
      });
    });
  } catch (problem) {
    await close();
    throw problem;
  }
  return {
    provider,
    program,
    pg,
    release() {
      pg.off("connection", hold);
      pg.off("error", quiet);
      for (const socket of waiting.splice(0)) if (!socket.destroyed) pg.emit("connection", socket);
      provider.release();
      program.release();
    },
    close,
  };
}
