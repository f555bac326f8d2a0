// fuse::mount from the provider's side: the provider asks the proxy to mount a FUSE filesystem at a
// path in the container, and answers every ask the proxy relays (one channel each on the mount
// scope) with typed handlers, by default serving a directory of this machine.
import { decodeFuseAck, encodeContainerProxyRequest } from "@diverge/codec";
import type { Responder } from "@diverge/multiplexer";
import { directoryHandlers, joinedAnswer, serveAskParts, type FuseHandlers } from "@diverge/multiplexer/fuse";
import { FilesystemError } from "../filesystem/errors.js";
import type { FilesystemHost } from "../filesystem/multiplexed.js";

export interface MountOptions {
  /** One regular file, or a directory tree. Default "directory". */
  readonly kind?: "file" | "directory";
  /** Every change is refused (the program sees EROFS). Default false. */
  readonly readonly?: boolean;
}

/** A mount the proxy made and serves; its asks are answered for as long as the connection lives. */
export interface ProviderMount {
  /** The mount point in the container, as components from its root. */
  readonly path: readonly string[];
  readonly kind: "file" | "directory";
  /** Asks answered so far. */
  readonly asks: number;
  /** Stops answering: every later ask fails in the container with EIO. The proxy keeps the mount until the connection ends. */
  stop(): void;
}

const READ_ONLY = { kind: "readOnly" } as const;

/** `handlers` with every change refused as read-only (EROFS). */
export function readOnlyHandlers(handlers: FuseHandlers): FuseHandlers {
  const refuse = async () => READ_ONLY;
  return { ...handlers, write: refuse, remove: refuse, rename: refuse, mkdir: refuse, truncate: refuse, setattr: refuse };
}

export function mountOn(host: FilesystemHost, path: readonly string[], target: FuseHandlers | string, options: MountOptions = {}): Promise<ProviderMount> {
  const what = "fuse::mount";
  const kind = options.kind ?? "directory";
  const readonly = options.readonly ?? false;
  const handlers = typeof target === "string" ? directoryHandlers(target, { readonly }) : readonly ? readOnlyHandlers(target) : target;
  return new Promise<ProviderMount>((resolve, reject) => {
    if (host.frames.mux.ended) return reject(new FilesystemError({ variant: "Lost", what }));
    let stopped = false;
    let asks = 0;
    let unroute = () => {};
    const mount: ProviderMount = {
      path: [...path],
      kind,
      get asks() {
        return asks;
      },
      stop: () => {
        stopped = true;
      },
    };
    const { scope } = host.frames.mux.openScope(encodeContainerProxyRequest({ variant: "FuseMount", request: { path: [...path], kind } }), {
      response: (payload) => {
        let ack;
        try {
          ack = decodeFuseAck(payload);
        } catch (problem) {
          return reject(new FilesystemError({ variant: "Unreadable", what, reason: (problem as Error).message }));
        }
        if (ack.variant === "Ok") resolve(mount);
        else reject(new FilesystemError({ variant: "Failed", what, error: ack.variant === "Refused" ? ack.message : "read-only" }));
      },
      // The scope ends only after a refusal (or for a request the proxy could not read).
      finish: (served) => {
        unroute();
        if (!served) reject(new FilesystemError({ variant: "NotServed", what }));
      },
      lost: () => {
        unroute();
        reject(new FilesystemError({ variant: "Lost", what }));
      },
    });
    // Asks may come before the `[00]`: the kernel can ask as soon as the mount serves.
    unroute = host.routeScopeChannels(scope, (responder: Responder, payload: Uint8Array) => {
      if (stopped) return responder.finish();
      asks++;
      serveAskParts(handlers, payload).then(
        (answer) => {
          // A read's data goes into the frame once, behind its answer's head, not joined first.
          if (answer.body && responder.respondParts) responder.respondParts(answer.head, answer.body);
          else responder.respond(joinedAnswer(answer));
          responder.finish();
        },
        // An ask that does not decode, or a handler that fails: not served (EIO in the container).
        () => responder.finish(),
      );
    });
  });
}
