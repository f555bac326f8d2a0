// Raw frames over a real WebSocket to a real proxy, for the multiplexed tests.
import { decodeServerFrame, encodeClientFrame, fromHex, type ClientFrame, type ServerFrame } from "@diverge/codec";
import { WebSocket } from "ws";

export interface RawConnection {
  readonly socket: WebSocket;
  readonly frames: ServerFrame[];
  send(frame: ClientFrame | string): void;
  /** The next frame not yet taken that matches; fails after `ms`. */
  next(match?: (frame: ServerFrame) => boolean, ms?: number): Promise<ServerFrame>;
  /** Resolves true when no matching frame arrives within `ms`. */
  none(match: (frame: ServerFrame) => boolean, ms?: number): Promise<boolean>;
  closed: Promise<number>;
}

export async function rawConnect(port: number): Promise<RawConnection> {
  const socket = new WebSocket(`ws://127.0.0.1:${port}/`);
  const frames: ServerFrame[] = [];
  const taken = new Set<ServerFrame>();
  const waiters: (() => void)[] = [];
  socket.on("message", (data: Buffer, isBinary: boolean) => {
    if (!isBinary) return;
    frames.push(decodeServerFrame(new Uint8Array(data)));
    for (const wake of waiters.splice(0)) wake();
  });
  const closed = new Promise<number>((resolve) => socket.on("close", (code) => resolve(code)));
  await new Promise<void>((resolve, reject) => {
    socket.once("open", resolve);
    socket.once("error", reject);
  });
  const find = (match: (frame: ServerFrame) => boolean) => frames.find((frame) => !taken.has(frame) && match(frame));
  return {
    socket,
    frames,
    closed,
    send(frame) {
      socket.send(typeof frame === "string" ? fromHex(frame.replace(/ /g, "")) : encodeClientFrame(frame));
    },
    async next(match = () => true, ms = 60_000) {
      const deadline = Date.now() + ms;
      for (;;) {
        const found = find(match);
        if (found) {
          taken.add(found);
          return found;
        }
        const left = deadline - Date.now();
        if (left <= 0) throw new Error(`no matching frame within ${ms} ms; got ${JSON.stringify(frames.map((f) => [f.variant, f.scope, f.channel]))}`);
        await new Promise<void>((resolve) => {
          const timer = setTimeout(resolve, left);
          waiters.push(() => {
            clearTimeout(timer);
            resolve();
          });
        });
      }
    },
    async none(match, ms = 300) {
      await new Promise((resolve) => setTimeout(resolve, ms));
      return find(match) === undefined;
    },
  };
}

/** Matches the frames the proxy sends on a provider channel. */
export const onChannel = (scope: number, channel: number) => (frame: ServerFrame) =>
  (frame.variant === "ChannelResponse" || frame.variant === "ChannelResponseFinish") && frame.scope === scope && frame.channel === channel;

export const onScope = (scope: number) => (frame: ServerFrame) => (frame.variant === "Response" || frame.variant === "ResponseFinish") && frame.scope === scope;

export const text = (value: string) => new TextEncoder().encode(value);
export const json = (value: unknown) => text(JSON.stringify(value));
export const concat = (...parts: Uint8Array[]) => {
  const out = new Uint8Array(parts.reduce((sum, part) => sum + part.length, 0));
  let at = 0;
  for (const part of parts) {
    out.set(part, at);
    at += part.length;
  }
  return out;
};
export const payloadText = (frame: ServerFrame) => ("payload" in frame ? new TextDecoder().decode(frame.payload.subarray(1)) : "");

/** Whether an upgrade of `/` is refused, and with which status. */
export async function upgradeStatus(port: number): Promise<number> {
  const socket = new WebSocket(`ws://127.0.0.1:${port}/`);
  return new Promise((resolve, reject) => {
    socket.once("unexpected-response", (_request, response) => {
      resolve(response.statusCode ?? 0);
      socket.terminate();
    });
    socket.once("open", () => {
      socket.close();
      resolve(101);
    });
    socket.once("error", (error) => {
      if (!String(error.message).includes("Unexpected server response")) reject(error);
    });
  });
}
