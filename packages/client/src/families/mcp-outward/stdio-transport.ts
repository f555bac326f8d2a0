// The MCP SDK's stdio client transport, but with the server in a process group of its own: the SDK's
// transport signals only the process it spawned, so a server started through a shell (`sh -c`, an
// npx wrapper) leaves its children running and holding the pipes when the relay closes or the
// provider stops. Here closing ends stdin, gives the server a moment to leave by itself, then ends
// its whole group (SIGTERM, SIGKILL after a grace) — within about a second, whatever the children do.
import type { ChildProcess } from "node:child_process";
import { getDefaultEnvironment } from "@modelcontextprotocol/sdk/client/stdio.js";
import { ReadBuffer, serializeMessage } from "@modelcontextprotocol/sdk/shared/stdio.js";
import type { Transport } from "@modelcontextprotocol/sdk/shared/transport.js";
import type { JSONRPCMessage } from "@modelcontextprotocol/sdk/types.js";
import { endGroup, spawnInGroup } from "../../process-group.js";

export interface StdioServer {
  readonly command: string;
  readonly args?: readonly string[];
  readonly env?: Record<string, string>;
  readonly cwd?: string;
}

/** How long a closing server has to exit on its own after stdin ends, then after SIGTERM. */
const EXIT_GRACE_MS = 400;

export class GroupStdioTransport implements Transport {
  onclose?: () => void;
  onerror?: (error: Error) => void;
  onmessage?: (message: JSONRPCMessage) => void;
  #child: ChildProcess | undefined;
  #exited: Promise<void> | undefined;
  readonly #buffer = new ReadBuffer();
  #closed = false;

  constructor(private readonly server: StdioServer) {}

  start(): Promise<void> {
    if (this.#child) throw new Error("GroupStdioTransport already started");
    const child = spawnInGroup(this.server.command, this.server.args ?? [], {
      env: { ...getDefaultEnvironment(), ...this.server.env },
      cwd: this.server.cwd,
      stdio: ["pipe", "pipe", "inherit"],
    });
    this.#child = child;
    this.#exited = new Promise((resolve) => child.once("exit", () => resolve()).once("error", () => resolve()));
    return new Promise((resolve, reject) => {
      child.once("error", (error) => {
        reject(error);
        this.onerror?.(error);
      });
      child.once("spawn", () => resolve());
      // The server leaving is the end of the transport, even while a child it left holds stdout open:
      // that child goes with its group.
      child.once("exit", () => {
        void endGroup(child, EXIT_GRACE_MS);
        this.#end();
      });
      child.stdin!.on("error", (error) => this.onerror?.(error));
      child.stdout!.on("error", (error) => this.onerror?.(error));
      child.stdout!.on("data", (chunk: Buffer) => {
        this.#buffer.append(chunk);
        for (;;) {
          let message: JSONRPCMessage | null;
          try {
            message = this.#buffer.readMessage();
          } catch (error) {
            this.onerror?.(error as Error);
            continue;
          }
          if (message === null) break;
          this.onmessage?.(message);
        }
      });
    });
  }

  send(message: JSONRPCMessage): Promise<void> {
    const stdin = this.#child?.stdin;
    if (!stdin || this.#closed) return Promise.reject(new Error("Not connected"));
    return new Promise((resolve) => (stdin.write(serializeMessage(message)) ? resolve() : stdin.once("drain", resolve)));
  }

  async close(): Promise<void> {
    const child = this.#child;
    if (!child || this.#closed) return;
    try {
      child.stdin!.end();
    } catch {
      // Already gone.
    }
    const timeout = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms).unref());
    await Promise.race([this.#exited, timeout(EXIT_GRACE_MS)]);
    // Whatever the server left in its group (or the server itself, if it did not leave) ends now.
    await endGroup(child, EXIT_GRACE_MS);
    child.stdout!.destroy();
    this.#end();
  }

  #end(): void {
    if (this.#closed) return;
    this.#closed = true;
    this.#buffer.clear();
    this.onclose?.();
  }
}
