// A consumer's TypeScript: checked with `tsc --noEmit` under moduleResolution nodenext and under
// bundler. Each @ts-expect-error proves a type is real: an `any` from a missing .d.ts would make
// the directive unused, which tsc reports as an error.
import {
  DecodeError,
  EncodeError,
  decodeClientFrame,
  decodePostgresRequest,
  encodeClientFrame,
  encodePostgresRequest,
  fromHex,
  revisions,
  toHex,
  type ClientFrame,
  type DecodeOptions,
  type PostgresRequest,
} from "@diverge/codec";
import { decodeToolsBeginResponse, type ToolDeclaration, type ToolDeclarations } from "@diverge/codec";
import * as revision230 from "@diverge/codec/2.3.0";
import { checkMcp, mcpTypeNames } from "@diverge/codec/mcp";
import { readU32, type TypeCheck } from "@diverge/codec/runtime";
import { answer, registry, type FrameEntry } from "@diverge/conformance";
import { loadSpecDir, type LoadedSpec } from "@diverge/spec-compiler";
import { PROXY_PORT, startProxy, type RunningProxy } from "@diverge/server";
import { LiveTree, relayToMcp, type TreePath } from "@diverge/client";
import { connectProxy, ContainerError, openContainer, type ContainerInfo, type DeclaredTool, type MultiplexedConnection, type PathsConnection, type ProxyHandlers } from "@diverge/client";

const request: PostgresRequest = decodePostgresRequest(fromHex("00000102"));
const id: number = request.connection_id;
const bytes: Uint8Array = encodePostgresRequest({ connection_id: id });
// @ts-expect-error connection_id is a number, not a string
encodePostgresRequest({ connection_id: "258" });

const frame: ClientFrame = { variant: "Request", scope: 1, channel: 0, payload: new Uint8Array() };
const roundTrip: ClientFrame = decodeClientFrame(encodeClientFrame(frame));
if (roundTrip.variant === "Request") {
  const payload: Uint8Array = roundTrip.payload;
  void payload;
}
// @ts-expect-error "NoSuchKind" is not a variant of ClientFrame
const wrong: ClientFrame = { variant: "NoSuchKind", scope: 1, channel: 0, payload: new Uint8Array() };

const check: TypeCheck = checkMcp;
const options: DecodeOptions = { check };
const same: typeof decodePostgresRequest = revision230.decodePostgresRequest;
const latest: "2.3.0" = revisions[revisions.length - 1]!;
const first: string | undefined = mcpTypeNames[0];

try {
  decodePostgresRequest(new Uint8Array(3), options);
} catch (error) {
  if (error instanceof DecodeError) {
    const variant: string = error.variant;
    void variant;
  }
  if (error instanceof EncodeError) throw error;
}

const reply = answer(JSON.stringify({ revision: "2.3.0", frame: "postgres/request", decode: toHex(bytes) }));
const entry: FrameEntry | undefined = registry["2.3.0"]?.["postgres/request"];
const loader: (dir: string, root?: string) => LoadedSpec = loadSpecDir;
const word: number = readU32(bytes, 0);

const handlers: ProxyHandlers = {
  listTools: () => ({ variant: "Result", result: { tools: [{ name: "add", inputSchema: { type: "object" } }] } }),
};
export async function loopback(): Promise<unknown> {
  const proxy: RunningProxy = await startProxy({ port: 0, programPort: 0, pgPort: 0, secretsGate: false });
  const connection: PathsConnection = connectProxy(`ws://127.0.0.1:${proxy.port}`, handlers);
  await connection.whenConnected();
  const tools = await proxy.mcp.listTools();
  await connection.close();
  await proxy.close();
  return tools;
}
export async function begin(url: string): Promise<readonly string[]> {
  const container: MultiplexedConnection = await openContainer(url, { timeoutMs: 1000, onEvent: (event) => void event.type });
  const declared: DeclaredTool[] = await container.beginTools({ arguments: null }, { timeoutMs: 1000 });
  const info: ContainerInfo | undefined = await container.info({ signal: AbortSignal.timeout(1000) });
  // @ts-expect-error the front matter's title is a string
  const title: number | undefined = info?.frontMatter.title;
  try {
    await container.mcp.listTools(undefined, { timeoutMs: 1000 });
  } catch (error) {
    if (error instanceof ContainerError && error.detail.variant === "TimedOut") void error.detail.waitingFor;
  }
  const closed: Promise<void> = container.close();
  await closed;
  void title;
  return [...declared.map((tool) => tool.name), ...(info?.frontMatter.secrets ?? [])];
}
// @ts-expect-error a port is a number
void startProxy({ port: "14979" });

// Issue 26 §3: the tools of a Begun are typed (the spec's ToolDeclarations), not unknown.
const begunAnswer = decodeToolsBeginResponse(fromHex("005b5d"));
if (begunAnswer.variant === "Begun") {
  const firstTool: ToolDeclaration | undefined = begunAnswer.tools[0];
  const toolName: string | undefined = firstTool?.name;
  const toolMemory: number | null | undefined = firstTool?.memory;
  // @ts-expect-error a tool's name is a string
  const wrongName: number | undefined = begunAnswer.tools[0]?.name;
  void [toolName, toolMemory, wrongName];
}
const typedTools: ToolDeclarations = [{ name: "greet", memory: 1024, image: { name: "a/b", digest: "sha256:00" } }];
// @ts-expect-error every tool has its name
const namelessTools: ToolDeclarations = [{ memory: 1024 }];
void [typedTools, namelessTools];

// Issue 26 §3: one path type; the text paths() gives is what get() takes, as are its components.
const liveTree = new LiveTree();
const treePaths: TreePath[] = liveTree.paths();
void treePaths.map((path) => liveTree.get(path)?.name);
void liveTree.get(["src", "main.rs"]);
// @ts-expect-error a path is text or its components, not a number
void liveTree.get(3);

// Issue 26 §2: one handler shape, the relay's, for both transports.
export async function bothShapes(url: string): Promise<void> {
  const relay = relayToMcp({ url: "http://127.0.0.1:3000/mcp" });
  await (await openContainer(url, { handlers: relay })).close();
  await connectProxy(url, relay).close();
}
const defaultPort: number = PROXY_PORT;

export const used = [wrong, same, latest, first, reply, entry, loader, word, defaultPort];
