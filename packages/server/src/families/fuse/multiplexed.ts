// fuse::mount on the multiplexed connection (fs-fuse.md §3–§4): the provider asks for a mount; the
// proxy mounts a real kernel FUSE filesystem inside its root and turns every operation the kernel
// asks into one channel on the mount scope carrying the FUSE ask. The scope answered `[00]` is never
// finished; the mounts go when the connection (or the proxy) ends, leaving no stale mount.
import { logEvent, type Say } from "@diverge/multiplexer/log";
import { encodeFuseAck } from "@diverge/codec";
import { MultiplexerError, type FrameSocket, type Responder } from "@diverge/multiplexer";
import { askThrough } from "@diverge/multiplexer/fuse";
import { checkPath } from "../filesystem/path-checks.js";
import type { FuseMount } from "./mount.js";
import { mountMembers, NOT_A_MOUNT_PATH } from "./place.js";
import { releaseGonePathsMount } from "./paths.js";
import type { ConnectionServices, ScopeRoutes } from "../../multiplexed/family.js";

export interface FuseScopeOptions {
  readonly frames: FrameSocket;
  /** The proxy's root, resolved. */
  readonly root: () => Promise<string>;
  readonly log: Say;
}

export class FuseScopes {
  private readonly mounts = new Set<FuseMount>();
  private ended = false;

  constructor(private readonly options: FuseScopeOptions) {}

  async mount(responder: Responder, request: Record<string, unknown>): Promise<void> {
    const members = mountMembers(request);
    if (!members) return responder.finish();
    const refuse = (reason: string) => {
      this.options.log(...logEvent(`fuse::mount on scope ${responder.scope} refused: {reason}`, { reason }));
      responder.respond(encodeFuseAck({ variant: "Refused", message: reason }));
      responder.finish();
    };
    const components = checkPath(members.path);
    if (!components) return refuse(NOT_A_MOUNT_PATH);
    const root = await this.options.root();
    const { mountFuse, MountError } = await import("./mount.js");
    // A paths mount held there whose provider is gone is replaced (unmounted first); a live one refuses.
    await releaseGonePathsMount(root, components);
    const scope = responder.scope;
    const frames = this.options.frames;
    // Each kernel operation: one channel on the scope, its ask the payload, its one answer the result.
    const handlers = askThrough(
      (ask) =>
        new Promise<Uint8Array>((resolve, reject) => {
          let answer: Uint8Array | undefined;
          try {
            frames.mux.openChannel(scope, ask, {
              response: (payload) => {
                answer ??= payload.slice();
              },
              // A bare finish: not served, the operation fails (EIO) and is never asked again.
              finish: () => (answer ? resolve(answer) : reject(new Error("the provider did not serve the ask"))),
              lost: () => reject(new Error("the connection ended")),
            });
          } catch (problem) {
            reject(problem instanceof MultiplexerError ? new Error("the connection ended") : problem);
          }
        }),
    );
    let mounted: FuseMount;
    try {
      mounted = await mountFuse({ root, path: components, kind: members.kind, handlers });
    } catch (problem) {
      if (problem instanceof MountError) return refuse(problem.message);
      throw problem;
    }
    if (this.ended || responder.finished) {
      await mounted.close();
      return;
    }
    this.mounts.add(mounted);
    this.options.log(...logEvent(`mounted ${members.kind} {path} for scope ${scope}`, { path: `/${components.join("/")}` }));
    // `[00]`, and never a finish: the scope is the mount.
    responder.respond(encodeFuseAck({ variant: "Ok" }));
  }

  /** Unmounts everything (the connection or the proxy ended); resolves when every mount is gone. */
  async closeAll(): Promise<void> {
    this.ended = true;
    const mounts = [...this.mounts];
    this.mounts.clear();
    await Promise.allSettled(mounts.map((m) => m.close()));
  }
}

/** The family's scope on one connection, and the end of its mounts when the connection ends. */
export function fuseScopes(services: ConnectionServices, root: () => Promise<string>) {
  const fuse = new FuseScopes({ frames: services.frames, root, log: services.options.log });
  const routes: Pick<ScopeRoutes, "FuseMount"> = {
    FuseMount: (request, responder) => fuse.mount(responder, request.request),
  };
  return { routes, closeAll: () => fuse.closeAll() };
}
