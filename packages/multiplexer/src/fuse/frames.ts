// The FUSE handlers as frames: each handler call of a mount is one FUSE ask (the generated
// `FuseAsk`), answered with the generated answer frame of its kind. `askThrough` is the proxy's side
// (a call becomes ask bytes; the answer bytes become the call's result, and an answer that does not
// decode fails the call: EIO); `serveAsk` is the provider's (ask bytes in, answer bytes out).
import {
  decodeFuseAck,
  decodeFuseAsk,
  decodeFuseListAnswer,
  decodeFuseReadAnswer,
  decodeFuseStatAnswer,
  encodeFuseAck,
  encodeFuseAsk,
  encodeFuseListAnswer,
  encodeFuseReadAnswer,
  encodeFuseStatAnswer,
  type FuseAck,
  type FuseAsk,
} from "@diverge/codec";
import type { FuseAckResult, FuseAttrs, FuseHandlers, FuseTime } from "./handlers.js";

const SET = { mode: 0x01, uid: 0x02, gid: 0x04, atime: 0x08, mtime: 0x10 } as const;
const ZERO: FuseTime = { secs: 0n, nanos: 0 };

/** One ask's bytes out, its answer's bytes back; rejects when the ask was not served or the connection ended. */
export type SendAsk = (ask: Uint8Array) => Promise<Uint8Array>;

const ackResult = (a: FuseAck): FuseAckResult => (a.variant === "Ok" ? { kind: "ok" } : a.variant === "ReadOnly" ? { kind: "readOnly" } : { kind: "error", message: a.message });

/** Handlers that send every call as a FUSE ask and read its answer. */
export function askThrough(send: SendAsk): FuseHandlers {
  const ack = async (ask: FuseAsk) => ackResult(decodeFuseAck(await send(encodeFuseAsk(ask))));
  return {
    async read(path, offset, length) {
      const a = decodeFuseReadAnswer(await send(encodeFuseAsk({ variant: "Read", path, offset, length })));
      return a.variant === "Data" ? { kind: "data", bytes: a.data } : a.variant === "Missing" ? { kind: "missing" } : { kind: "error", message: a.message };
    },
    write: (path, offset, data) => ack({ variant: "Write", path, offset, data }),
    async list(path) {
      const a = decodeFuseListAnswer(await send(encodeFuseAsk({ variant: "List", path })));
      if (a.variant === "Entries") return { kind: "entries", entries: a.entries.map((e) => ({ name: e.name, kind: e.kind === 1 ? "directory" : "file" })) };
      return a.variant === "Missing" ? { kind: "missing" } : { kind: "error", message: a.message };
    },
    remove: (path) => ack({ variant: "Remove", path }),
    rename: (from, to) => ack({ variant: "Rename", from, to }),
    mkdir: (path) => ack({ variant: "Mkdir", path }),
    async stat(path) {
      const a = decodeFuseStatAnswer(await send(encodeFuseAsk({ variant: "Stat", path })));
      if (a.variant === "Missing") return { kind: "missing" };
      if (a.variant === "Failed") return { kind: "error", message: a.message };
      return {
        kind: "stat",
        stat: {
          kind: a.file_kind === 1 ? "directory" : "file",
          size: a.size,
          mode: a.mode,
          uid: a.uid,
          gid: a.gid,
          atime: { secs: a.atime_secs, nanos: a.atime_nanos },
          mtime: { secs: a.mtime_secs, nanos: a.mtime_nanos },
          ctime: { secs: a.ctime_secs, nanos: a.ctime_nanos },
        },
      };
    },
    truncate: (path, size) => ack({ variant: "Truncate", size, path }),
    setattr: (path, attrs) => ack(setattrAsk(path, attrs)),
  };
}

function setattrAsk(path: string, attrs: FuseAttrs): FuseAsk {
  let set = 0;
  for (const key of Object.keys(SET) as (keyof typeof SET)[]) if (attrs[key] !== undefined) set |= SET[key];
  const atime = attrs.atime ?? ZERO;
  const mtime = attrs.mtime ?? ZERO;
  return { variant: "Setattr", set, mode: attrs.mode ?? 0, uid: attrs.uid ?? 0, gid: attrs.gid ?? 0, atime_secs: atime.secs, atime_nanos: atime.nanos, mtime_secs: mtime.secs, mtime_nanos: mtime.nanos, path };
}

const ackFrame = (r: FuseAckResult) => encodeFuseAck(r.kind === "ok" ? { variant: "Ok" } : r.kind === "readOnly" ? { variant: "ReadOnly" } : { variant: "Refused", message: r.message });

/** A read answer's bytes up to its data: the answer encoded with no data (the data runs to the end of the frame). */
const READ_DATA_HEAD = encodeFuseReadAnswer({ variant: "Data", data: new Uint8Array(0) });

/** An answer's bytes as `head` then `body`, unjoined: a read's data follows its head as the handler gave it. */
export interface AnswerParts {
  readonly head: Uint8Array;
  readonly body?: Uint8Array;
}

/** The provider's side: one ask's bytes served by `handlers`, the answer's bytes returned. Throws the codec's error for bytes that are not an ask. */
export async function serveAsk(handlers: FuseHandlers, bytes: Uint8Array): Promise<Uint8Array> {
  return joinedAnswer(await serveAskParts(handlers, bytes));
}

/** The answer's bytes, its parts joined. */
export function joinedAnswer({ head, body }: AnswerParts): Uint8Array {
  if (!body) return head;
  const out = new Uint8Array(head.length + body.length);
  out.set(head);
  out.set(body, head.length);
  return out;
}

/**
 * `serveAsk` with the answer left in parts, for a sender that writes parts into its own frame
 * (`Responder.respondParts`): a read's data is then copied once, into the frame, not first into an
 * answer. Throws the codec's error for bytes that are not an ask.
 */
export async function serveAskParts(handlers: FuseHandlers, bytes: Uint8Array): Promise<AnswerParts> {
  const ask = decodeFuseAsk(bytes);
  if (ask.variant === "Read") {
    const r = await handlers.read(ask.path, ask.offset, ask.length);
    if (r.kind === "data") return { head: READ_DATA_HEAD, body: r.bytes };
    return { head: encodeFuseReadAnswer(r.kind === "missing" ? { variant: "Missing" } : { variant: "Failed", message: r.message }) };
  }
  return { head: await serveOther(handlers, ask) };
}

/** Every ask but a read: its answer's bytes. */
async function serveOther(handlers: FuseHandlers, ask: Exclude<FuseAsk, { variant: "Read" }>): Promise<Uint8Array> {
  switch (ask.variant) {
    case "Write":
      return ackFrame(await handlers.write(ask.path, ask.offset, ask.data));
    case "List": {
      const r = await handlers.list(ask.path);
      if (r.kind === "entries") return encodeFuseListAnswer({ variant: "Entries", entries: r.entries.map((e) => ({ kind: e.kind === "directory" ? 1 : 0, name: e.name })) });
      return encodeFuseListAnswer(r.kind === "missing" ? { variant: "Missing" } : { variant: "Failed", message: r.message });
    }
    case "Remove":
      return ackFrame(await handlers.remove(ask.path));
    case "Rename":
      return ackFrame(await handlers.rename(ask.from, ask.to));
    case "Mkdir":
      return ackFrame(await handlers.mkdir(ask.path));
    case "Stat": {
      const r = await handlers.stat(ask.path);
      if (r.kind !== "stat") return encodeFuseStatAnswer(r.kind === "missing" ? { variant: "Missing" } : { variant: "Failed", message: r.message });
      const s = r.stat;
      return encodeFuseStatAnswer({
        variant: "Stat",
        file_kind: s.kind === "directory" ? 1 : 0,
        size: s.size,
        mode: s.mode,
        uid: s.uid,
        gid: s.gid,
        atime_secs: s.atime.secs,
        atime_nanos: s.atime.nanos,
        mtime_secs: s.mtime.secs,
        mtime_nanos: s.mtime.nanos,
        ctime_secs: s.ctime.secs,
        ctime_nanos: s.ctime.nanos,
      });
    }
    case "Truncate":
      return ackFrame(await handlers.truncate(ask.path, ask.size));
    case "Setattr": {
      // A field whose bit is clear is ignored.
      const attrs: { -readonly [K in keyof FuseAttrs]: FuseAttrs[K] } = {};
      if (ask.set & SET.mode) attrs.mode = ask.mode;
      if (ask.set & SET.uid) attrs.uid = ask.uid;
      if (ask.set & SET.gid) attrs.gid = ask.gid;
      if (ask.set & SET.atime) attrs.atime = { secs: ask.atime_secs, nanos: ask.atime_nanos };
      if (ask.set & SET.mtime) attrs.mtime = { secs: ask.mtime_secs, nanos: ask.mtime_nanos };
      return ackFrame(await handlers.setattr(ask.path, attrs));
    }
  }
}
