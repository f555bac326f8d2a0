// /filesystem/tree, /filesystem/read and /filesystem/write from the provider's side of the paths
// transport: one WebSocket per opening, the request its first message; closing the socket stops a
// tree and abandons a write.
import { decodeReadAnswer, decodeTreeMessage, decodeWriteAnswer, encodeFilesystemPathsRequest, type FiletreeFrame } from "@diverge/codec";
import { openSocket, defaultWebSocket, type OpenFailure, type OpenSocket, type WebSocketConstructor } from "../../paths/socket.js";
import { endpointUrl, proxyBase } from "../../url.js";
import { FilesystemError } from "./errors.js";
import type { TransferOptions, TreeOptions, TreeStream } from "./multiplexed.js";
import { byteStream, piecesOf, PushQueue, type WriteSource } from "./queue.js";

export interface FilesystemPathsOptions {
  /** The WebSocket implementation (WHATWG API). Default `ws`. */
  readonly WebSocket?: WebSocketConstructor;
}

/** The container's filesystem through a proxy's paths transport: each call is one independent opening. */
export interface FilesystemPaths {
  tree(options?: TreeOptions): TreeStream;
  read(path: readonly string[], options?: TransferOptions): ReadableStream<Uint8Array>;
  write(path: readonly string[], content: WriteSource, options?: TransferOptions): Promise<void>;
}

const LOW_WATER = 4 * 1024 * 1024;

export function filesystemPaths(proxy: string | URL, options: FilesystemPathsOptions = {}): FilesystemPaths {
  const base = proxyBase(proxy);
  const Impl = options.WebSocket ?? defaultWebSocket;
  const dial = async (endpoint: string, what: string, request: Record<string, unknown>): Promise<OpenSocket> => {
    const url = endpointUrl(base, endpoint);
    let socket: OpenSocket;
    try {
      socket = await openSocket(Impl, url);
    } catch (failure) {
      const f = failure as OpenFailure;
      throw new FilesystemError({ variant: "Unreachable", what, url, status: f.status, reason: f.message });
    }
    socket.send(encodeFilesystemPathsRequest({ request }));
    return socket;
  };
  return {
    tree(treeOptions = {}) {
      const what = "/filesystem/tree";
      const limit = treeOptions.maxQueued ?? 10_000;
      let socket: OpenSocket | undefined;
      let stopped = false;
      const stop = () => {
        if (stopped) return;
        stopped = true;
        treeOptions.signal?.removeEventListener("abort", stop);
        // The stop is closing the socket.
        socket?.close();
        queue.end();
      };
      const queue = new PushQueue<FiletreeFrame>(limit, () => new FilesystemError({ variant: "Overflow", what, limit }), stop);
      if (treeOptions.signal?.aborted) stop();
      else treeOptions.signal?.addEventListener("abort", stop, { once: true });
      dial("/filesystem/tree", what, { ignore: treeOptions.ignore ?? [] }).then(
        (opened) => {
          socket = opened;
          if (stopped) return opened.close();
          let any = false;
          opened.onMessage((bytes) => {
            any = true;
            let message;
            try {
              message = decodeTreeMessage(bytes);
            } catch (problem) {
              queue.fail(new FilesystemError({ variant: "Unreadable", what, reason: (problem as Error).message }));
              return opened.close();
            }
            if (message.variant === "Frame") queue.push(message.frame);
            else queue.fail(new FilesystemError({ variant: "Failed", what, error: message.message }));
          });
          void opened.ended.then((ending) => {
            if (stopped) return;
            if (!ending.clean) queue.fail(new FilesystemError({ variant: "Lost", what }));
            else if (!any) queue.fail(new FilesystemError({ variant: "NotServed", what }));
            else queue.end();
          });
        },
        (problem: unknown) => queue.fail(problem),
      );
      return { stop, [Symbol.asyncIterator]: () => queue[Symbol.asyncIterator]() };
    },

    read(path, readOptions = {}) {
      const what = "/filesystem/read";
      let socket: OpenSocket | undefined;
      let given = false;
      return byteStream(
        (sink) => {
          const onAbort = () => {
            given = true;
            socket?.close();
            sink.fail(readOptions.signal!.reason);
          };
          if (readOptions.signal?.aborted) return onAbort();
          readOptions.signal?.addEventListener("abort", onAbort, { once: true });
          dial("/filesystem/read", what, { path: [...path] }).then(
            (opened) => {
              socket = opened;
              if (given) return opened.close();
              let any = false;
              let failed = false;
              opened.onMessage((bytes) => {
                any = true;
                let answer;
                try {
                  answer = decodeReadAnswer(bytes);
                } catch (problem) {
                  failed = true;
                  opened.close();
                  return sink.fail(new FilesystemError({ variant: "Unreadable", what, reason: (problem as Error).message }));
                }
                if (answer.variant === "Piece") sink.piece(answer.piece);
                else {
                  failed = true;
                  sink.fail(new FilesystemError({ variant: "Failed", what, error: answer.message }));
                }
              });
              void opened.ended.then((ending) => {
                readOptions.signal?.removeEventListener("abort", onAbort);
                if (failed || given) return;
                if (!ending.clean) sink.fail(new FilesystemError({ variant: "Lost", what }));
                else if (!any) sink.fail(new FilesystemError({ variant: "NotServed", what }));
                else sink.end();
              });
            },
            (problem: unknown) => sink.fail(problem),
          );
        },
        () => {
          given = true;
          socket?.close();
        },
        // A reader slower than the wire stops reading this read's socket.
        {
          pause: () => socket?.pauseIncoming() ?? (() => {}),
        },
      );
    },

    async write(path, content, writeOptions = {}) {
      const what = "/filesystem/write";
      writeOptions.signal?.throwIfAborted();
      const socket = await dial("/filesystem/write", what, { path: [...path] });
      let answer: Uint8Array | undefined;
      socket.onMessage((bytes) => {
        answer ??= bytes;
      });
      const onAbort = () => socket.close();
      writeOptions.signal?.addEventListener("abort", onAbort, { once: true });
      try {
        try {
          for await (const piece of piecesOf(content)) {
            if (!socket.isOpen) break;
            writeOptions.signal?.throwIfAborted();
            // A piece is never empty: an empty message ends the content.
            if (piece.length === 0) continue;
            socket.send(piece);
            while (socket.bufferedAmount > LOW_WATER && socket.isOpen) await new Promise((resolve) => setTimeout(resolve, 5));
          }
        } catch (problem) {
          // The content failed: closing before the empty message abandons the write.
          socket.close();
          await socket.ended;
          if (writeOptions.signal?.aborted) throw problem;
          // As the multiplexed transport says it: the proxy abandoned the write for the content's error.
          throw new FilesystemError({ variant: "Failed", what, error: `content: ${problem instanceof Error ? problem.message : String(problem)}` });
        }
        if (socket.isOpen) socket.send(new Uint8Array(0));
        const ending = await socket.ended;
        writeOptions.signal?.throwIfAborted();
        if (!answer) throw new FilesystemError({ variant: ending.clean ? "NotServed" : "Lost", what });
        let decoded;
        try {
          decoded = decodeWriteAnswer(answer);
        } catch (problem) {
          throw new FilesystemError({ variant: "Unreadable", what, reason: (problem as Error).message });
        }
        if (decoded.variant === "Failure") throw new FilesystemError({ variant: "Failed", what, error: decoded.message });
      } finally {
        writeOptions.signal?.removeEventListener("abort", onAbort);
      }
    },
  };
}
