// One discriminant for every union of @diverge/codec: a consumer switches on `.variant` whatever the
// spec calls the member (frames' `type`, the filetree's and /requests asks' `kind`, a scope
// request's `endpoint`, FUSE's `ask`, `ack` and `answer`). Each @ts-expect-error proves an old name
// is gone from the types (an unused directive is an error); the program prints what it decoded.
import {
  decodeClientFrame,
  decodeContainerProxyRequest,
  decodeFiletreeFrame,
  decodeFuseAck,
  decodeFuseAsk,
  decodeFuseReadAnswer,
  decodeRequestsAsk,
  encodeClientFrame,
  encodeContainerProxyRequest,
  encodeFiletreeFrame,
  encodeFuseAck,
  encodeFuseAsk,
  encodeFuseReadAnswer,
  encodeRequestsAsk,
  type ClientFrame,
  type FiletreeNode,
  type FuseAck,
  type FuseAsk,
} from "@diverge/codec";

const seen: string[] = [];

const frame = decodeClientFrame(encodeClientFrame({ variant: "Request", scope: 1, channel: 0, payload: new Uint8Array([7]) }));
switch (frame.variant) {
  case "Request":
    seen.push(`frame ${frame.variant} scope ${frame.scope} payload ${frame.payload.length}`);
    break;
  default:
    seen.push(`frame ${frame.variant}`);
}
// @ts-expect-error frames name their variant in `variant`, not the spec's `type`
void frame.type;
// @ts-expect-error nor is `type` a member a frame can be written with
export const oldFrame: ClientFrame = { type: "Request", scope: 1, channel: 0, payload: new Uint8Array() };

const ask = decodeRequestsAsk(encodeRequestsAsk({ variant: "VaultGet", channel: 3, key: "db" }));
if (ask.variant === "VaultGet") seen.push(`requests ask ${ask.variant} ${ask.key} on channel ${ask.channel}`);
// @ts-expect-error a /requests ask names its variant in `variant`, not the spec's `kind`
void ask.kind;

const scope = decodeContainerProxyRequest(encodeContainerProxyRequest({ variant: "FilesystemTree", request: {} }));
seen.push(`scope request ${scope.variant}`);
// @ts-expect-error a scope request names its variant in `variant`, not the spec's `endpoint`
void scope.endpoint;

const fuseAsk: FuseAsk = decodeFuseAsk(encodeFuseAsk({ variant: "Read", path: "a.txt", offset: 5n, length: 16 }));
switch (fuseAsk.variant) {
  case "Read":
    seen.push(`fuse ask ${fuseAsk.variant} ${fuseAsk.path} at ${fuseAsk.offset}`);
    break;
  default:
    seen.push(`fuse ask ${fuseAsk.variant}`);
}
// @ts-expect-error a FUSE ask names its variant in `variant`, not the spec's `ask`
void fuseAsk.ask;

const ack: FuseAck = decodeFuseAck(encodeFuseAck({ variant: "Refused", message: "no" }));
seen.push(`fuse ack ${ack.variant}${ack.variant === "Refused" ? ` ${ack.message}` : ""}`);
// @ts-expect-error a FUSE ack names its variant in `variant`, not the spec's `ack`
export const oldAck: FuseAck = { ack: "Ok" };

const read = decodeFuseReadAnswer(encodeFuseReadAnswer({ variant: "Data", data: new Uint8Array([1, 2]) }));
if (read.variant === "Data") seen.push(`fuse read answer ${read.variant} ${read.data.length} bytes`);
// @ts-expect-error a FUSE answer names its variant in `variant`, not the spec's `answer`
void read.answer;

const file: FiletreeNode = { variant: "File", name: "a", size: 5n, created_at: null, modified_at: null };
const tree = decodeFiletreeFrame(encodeFiletreeFrame({ variant: "Snapshot", children: [file] }));
if (tree.variant === "Snapshot") for (const node of tree.children) seen.push(`filetree ${tree.variant} ${node.variant} ${node.name}`);
// @ts-expect-error the filetree names its variant in `variant`, not the spec's `kind`
void tree.kind;

console.log(JSON.stringify(seen));
