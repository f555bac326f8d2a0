// Raw providers for the parity test: a `ws` peer that speaks the wire by hand, so it can answer with
// bytes no provider SDK would write (malformed answers). One on `/` (begun, answering proxy-opened
// channels), one on the paths transport (holding `/requests`, opening answer paths).
import { decodeServerFrame, decodeToolsBeginResponse, encodeClientFrame, encodeContainerProxyRequest, type ServerFrame } from "@diverge/codec";
import { WebSocket } from "ws";

/** An ask the raw provider received: which exchange (the begin-scope tag or the `/requests` kind), and how to answer it. */
export interface RawAsk {
  /** The begin-scope channel tag (multiplexed) or the `/requests` kind (paths). */
  readonly tag: number;
  /** Sends `messages` as the answer, then ends it (a clean finish or close), or cuts it (`abrupt`). */
  answer(messages: Uint8Array[], ending?: "clean" | "abrupt"): Promise<void>;
}

export interface RawProvider {
  /** Every ask received so far, in order. */
  readonly asks: RawAsk[];
  /** The next ask with `tag` not yet taken; fails after `ms`. */
  next(tag: number, ms?: number): Promise<RawAsk>;
  /** Whether the connection (`/`, or `/requests`) is still open. */
  readonly open: boolean;
  close(): Promise<void>;
}

export interface RawMultiplexedProvider extends RawProvider {
  /** Opens a provider channel on the begin scope with `payload` (tag and body); resolves with its responses at its finish. */
  request(payload: Uint8Array): Promise<Uint8Array[]>;
}

/** Waits for the socket to open; rejects on an error before. */
function opened(socket: WebSocket): Promise<void> {
  return new Promise((resolve, reject) => {
    socket.once("open", resolve);
    socket.once("error", reject);
  });
}

function closing(socket: WebSocket): Promise<void> {
  return new Promise((resolve) => {
    if (socket.readyState === WebSocket.CLOSED) return resolve();
    socket.once("close", () => resolve());
  });
}

function book(): { asks: RawAsk[]; push(ask: RawAsk): void; next(tag: number, ms?: number): Promise<RawAsk> } {
  const asks: RawAsk[] = [];
  const taken = new Set<RawAsk>();
  let wake: (() => void) | undefined;
  return {
    asks,
    push(ask) {
      asks.push(ask);
      wake?.();
    },
    async next(tag, ms = 60_000) {
      const deadline = Date.now() + ms;
      for (;;) {
        const found = asks.find((ask) => ask.tag === tag && !taken.has(ask));
        if (found) {
          taken.add(found);
          return found;
        }
        const left = deadline - Date.now();
        if (left <= 0) throw new Error(`no ask with tag ${tag} within ${ms} ms; got ${asks.map((ask) => ask.tag).join(", ")}`);
        await new Promise<void>((resolve) => {
          const timer = setTimeout(resolve, left);
          wake = () => {
            clearTimeout(timer);
            resolve();
          };
        });
      }
    },
  };
}

/** A provider on `/` that begins the container and answers proxy-opened channels by hand. */
export async function rawMultiplexedProvider(port: number): Promise<RawMultiplexedProvider> {
  const socket = new WebSocket(`ws://127.0.0.1:${port}/`);
  socket.on("error", () => {});
  const asks = book();
  let begun: ((frame: ServerFrame) => void) | undefined;
  const mine = new Map<number, { responses: Uint8Array[]; finished: (responses: Uint8Array[]) => void }>();
  let nextChannel = 0;
  socket.on("message", (data: Buffer, isBinary: boolean) => {
    if (!isBinary) return;
    const frame = decodeServerFrame(new Uint8Array(data));
    if (frame.variant === "Response" && frame.scope === 1) return begun?.(frame);
    if (frame.variant === "ChannelResponse" && frame.scope === 1) return void mine.get(frame.channel)?.responses.push(frame.payload);
    if (frame.variant === "ChannelResponseFinish" && frame.scope === 1) {
      const channel = mine.get(frame.channel);
      mine.delete(frame.channel);
      return channel?.finished(channel.responses);
    }
    if (frame.variant !== "ChannelRequest" || frame.scope !== 1) return;
    const channel = frame.channel;
    asks.push({
      tag: frame.payload[0]!,
      async answer(messages, ending = "clean") {
        for (const payload of messages) socket.send(encodeClientFrame({ variant: "ChannelResponse", scope: 1, channel, payload }));
        if (ending === "clean") socket.send(encodeClientFrame({ variant: "ChannelResponseFinish", scope: 1, channel }));
        else socket.terminate();
      },
    });
  });
  await opened(socket);
  const response = new Promise<ServerFrame>((resolve) => (begun = resolve));
  socket.send(encodeClientFrame({ variant: "Request", scope: 1, channel: 0, payload: encodeContainerProxyRequest({ variant: "ToolsBegin", begin: { arguments: { greeting: "Hello" } } }) }));
  const answer = (await response) as { payload: Uint8Array };
  const decoded = decodeToolsBeginResponse(answer.payload);
  if (decoded.variant !== "Begun") throw new Error(`the begin was not answered Begun: ${JSON.stringify(decoded)}`);
  return {
    asks: asks.asks,
    next: asks.next,
    request(payload) {
      const channel = nextChannel++;
      return new Promise((resolve) => {
        mine.set(channel, { responses: [], finished: resolve });
        socket.send(encodeClientFrame({ variant: "ChannelRequest", scope: 1, channel, payload }));
      });
    },
    get open() {
      return socket.readyState === WebSocket.OPEN;
    },
    async close() {
      socket.close();
      await closing(socket);
    },
  };
}

/** The answer path of each `/requests` kind the parity test answers by hand. */
const ANSWER_PATHS: Record<number, string> = { 0: "/mcp/list-tools", 1: "/mcp/list-resources", 2: "/mcp/call-tool", 3: "/mcp/read-resource", 5: "/vault/get", 6: "/vault/set" };

/** A provider on the paths transport that holds `/requests` and answers on answer paths by hand. */
export async function rawPathsProvider(port: number): Promise<RawProvider> {
  const socket = new WebSocket(`ws://127.0.0.1:${port}/requests`);
  socket.on("error", () => {});
  const asks = book();
  const paths = new Set<WebSocket>();
  socket.on("message", (data: Buffer, isBinary: boolean) => {
    if (!isBinary || data.length < 5) return;
    const channel = data.readUInt32BE(0);
    const kind = data[4]!;
    asks.push({
      tag: kind,
      async answer(messages, ending = "clean") {
        const path = ANSWER_PATHS[kind];
        if (!path) throw new Error(`no answer path for kind ${kind}`);
        const answer = new WebSocket(`ws://127.0.0.1:${port}${path}/${channel}`);
        answer.on("error", () => {});
        paths.add(answer);
        answer.once("close", () => paths.delete(answer));
        await opened(answer);
        for (const message of messages) answer.send(message);
        if (ending === "clean") answer.close();
        else answer.terminate();
        await closing(answer);
      },
    });
  });
  await opened(socket);
  return {
    asks: asks.asks,
    next: asks.next,
    get open() {
      return socket.readyState === WebSocket.OPEN;
    },
    async close() {
      for (const path of paths) path.terminate();
      socket.close();
      await closing(socket);
    },
  };
}
