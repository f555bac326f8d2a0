// The exchange layer, generated from the spec's exchanges, channels and opened paths:
// - in the codec, next to the frames: one descriptor per exchange (kind, answer path, answer frame's
//   decoder and encoder, message pattern, fate rules, the begin-scope channel that carries it), one
//   per begin-scope channel and one per path the provider opens;
// - for @diverge/server: `ProxyAsks`, one typed method per exchange the proxy asks, bound onto the
//   hand-written generic engine (`packages/server/src/exchanges/engine.ts`), `ProxyStandingAsks`,
//   one method per standing stream the proxy keeps (`exchanges/standing.ts`), the routing of every
//   provider-opened begin-scope channel to its handler, and `ProviderPathHandlers`, one handler per
//   path the provider opens (`/tool/*`), bound for the generic path engine (`exchanges/paths.ts`);
// - for @diverge/client: `ProviderHandlers`, one member per exchange the provider answers, the
//   dispatch from an ask (on `/requests` or a proxy-opened channel) to its handler and from its
//   result to the answer frames, `ProviderAsks`, one typed method per channel the provider opens, and
//   `ProviderPathAsks`, one typed method per path the provider opens.
// An exchange whose answer frame is still pending, or whose answer is raw bytes, gets its descriptor
// but no typed method or handler: its behaviour is hand-written (postgres) or comes later (FUSE).
import { DISCRIMINANT, type IrChannel, type IrChannelTable, type IrExchange, type IrFrame, type IrOpenedPath, type IrRevision } from "../ir.js";
import { decodeName, encodeName, frameModule, importPath, lit } from "../names.js";
import { banner, type GeneratedFile } from "./project.js";

const STREAMS = new Set(["perNotification", "perItem"]);

/** `McpListTools` → `mcpListTools`; `tools-begin/channels` → `toolsBeginChannels`. */
function lowerCamel(name: string): string {
  const pascal = name
    .split(/[^A-Za-z0-9]+/)
    .filter(Boolean)
    .map((p) => p[0]!.toUpperCase() + p.slice(1))
    .join("");
  return pascal[0]!.toLowerCase() + pascal.slice(1);
}
const pascal = (name: string) => {
  const c = lowerCamel(name);
  return c[0]!.toUpperCase() + c.slice(1);
};

/** Paths the provider opens with a typed surface: a declared answer frame, and a request frame when it sends one. */
const typedPath = (p: IrOpenedPath) => p.answer.frameId !== undefined && (p.request.messages === "none" || (p.request.messages === "one" && p.request.frameId !== undefined));

/** Exchanges with a typed surface: a declared answer frame. */
const typed = (x: { readonly answerFrameId: string | undefined }) => x.answerFrameId !== undefined;

function doc(lines: readonly string[], indent = ""): string[] {
  if (lines.length === 1) return [`${indent}/** ${lines[0]} */`];
  return [`${indent}/**`, ...lines.map((l) => `${indent} * ${l}`), `${indent} */`];
}

function patternText(p: { readonly messages: string; readonly last?: string }): string {
  switch (p.messages) {
    case "one":
      return "exactly one message, then a clean close";
    case "oneWhenHeld":
      return "exactly one message, sent when it holds however long that takes";
    case "raw":
      return "raw bytes both ways";
    default:
      return `a stream of messages${p.last ? `, \`${p.last}\` last when sent` : ""}`;
  }
}

export function emitExchanges(ir: IrRevision, compilerVersion: string, newest: boolean): GeneratedFile[] {
  const out: GeneratedFile[] = [emitCodecExchanges(ir, compilerVersion)];
  // The typed surfaces of the packages follow the newest revision, as the codec's root does.
  if (newest) out.push(emitServerSurface(ir, compilerVersion), emitClientSurface(ir, compilerVersion));
  return out;
}

// --- the codec's descriptors ------------------------------------------------------------------

function emitCodecExchanges(ir: IrRevision, compilerVersion: string): GeneratedFile {
  const rev = ir.revision;
  const here = `${rev}/exchanges.ts`;
  const frameById = new Map(ir.frames.map((f) => [f.id, f]));
  const imports = new Map<string, Set<string>>();
  const use = (frame: IrFrame, ...names: string[]) => {
    const from = importPath(here, `${rev}/${frameModule(frame)}`);
    if (!imports.has(from)) imports.set(from, new Set());
    for (const n of names) imports.get(from)!.add(n);
  };
  const answerCodec = (frameId: string | undefined): string => {
    if (!frameId) return "undefined";
    const f = frameById.get(frameId)!;
    use(f, decodeName(f), encodeName(f));
    return `{ frame: ${lit(f.id)}, decode: ${decodeName(f)}, encode: ${encodeName(f)} }`;
  };
  const answerType = (frameId: string | undefined): string => {
    if (!frameId) return "never";
    const f = frameById.get(frameId)!;
    use(f, `type ${f.name}`);
    return f.name;
  };

  const askFrames = [...new Set(ir.exchanges.map((x) => x.askFrameId))].map((id) => frameById.get(id)!);
  const lines: string[] = [];
  lines.push(
    `// The exchanges of revision ${rev}: which kind is answered on which path, with which frames, in`,
    `// which pattern, and what happens to an exchange that is not answered. Generic engines read these.`,
  );
  lines.push("");
  lines.push(`/** How the messages that answer an exchange come. */`);
  lines.push(`export type ExchangePattern = "one" | "oneWhenHeld" | "perNotification" | "perItem" | "raw";`);
  lines.push("");
  lines.push(...doc(["An answer frame's codec, as an engine needs it."]));
  lines.push(`export interface AnswerCodec<A> {`);
  lines.push(`  /** The frame's spec id. */`);
  lines.push(`  readonly frame: string;`);
  lines.push(`  readonly decode: (bytes: Uint8Array, options?: DecodeOptions) => A;`);
  lines.push(`  readonly encode: (value: A) => Uint8Array;`);
  lines.push(`}`);
  lines.push("");
  lines.push(...doc(["One exchange an ask frame starts: the ask's kind, its answer path, its answer and its fate rules."]));
  lines.push(`export interface ExchangeDescriptor<K extends string = string, A = any> {`);
  lines.push(`  /** The exchange's spec id. */`);
  lines.push(`  readonly id: string;`);
  lines.push(`  /** The kind byte of the ask. */`);
  lines.push(`  readonly kind: number;`);
  lines.push(`  /** The ask variant's name, as the ask's \`variant\` spells it. */`);
  lines.push(`  readonly kindName: K;`);
  lines.push(`  /** The answer path with \`{channel}\` in it, e.g. \`/vault/get/{channel}\`. */`);
  lines.push(`  readonly path: string;`);
  lines.push(`  /** The answer path up to the channel, e.g. \`/vault/get/\`. */`);
  lines.push(`  readonly pathPrefix: string;`);
  lines.push(`  readonly pattern: ExchangePattern;`);
  lines.push(`  /** For a stream: the answer variant that, when sent, is the last message. */`);
  lines.push(`  readonly last: string | undefined;`);
  lines.push(`  /** An exchange whose path ended abruptly, or whose ask was lost with its connection. */`);
  lines.push(`  readonly unanswered: "askedAgain" | "neverAskedAgain";`);
  lines.push(`  /** An exchange whose path closed cleanly with no message. */`);
  lines.push(`  readonly notServed: "askedAgain" | "neverAskedAgain";`);
  lines.push(`  /**`);
  lines.push(`   * The ask's field whose bytes run to the end of the frame (its last), when it has one: the ask is`);
  lines.push(`   * then the same bytes as its encoding with that field empty followed by the field's bytes, so an`);
  lines.push(`   * engine may send a large one after the rest without joining them.`);
  lines.push(`   */`);
  lines.push(`  readonly askTail: string | undefined;`);
  lines.push(`  /** The answer frame; undefined for raw bytes and for a frame the spec does not declare yet. */`);
  lines.push(`  readonly answer: AnswerCodec<A> | undefined;`);
  lines.push(`  /** The begin-scope channel that carries the same exchange, when there is one. */`);
  lines.push(`  readonly channel: { readonly opener: "provider" | "proxy"; readonly tag: number; readonly variant: string } | undefined;`);
  lines.push(`  /**`);
  lines.push(`   * A stream the proxy keeps for its life rather than asks per request: first asked once the proxy has`);
  lines.push(`   * made its first exchange of one of \`after\` (kind names), asked again when its path ends (\`ended\`).`);
  lines.push(`   * Undefined for an exchange asked per request.`);
  lines.push(`   */`);
  lines.push(`  readonly standing: { readonly after: readonly string[]; readonly ended: "nextConnection" } | undefined;`);
  lines.push(`}`);
  lines.push("");

  for (const ask of askFrames) {
    const xs = ir.exchanges.filter((x) => x.askFrameId === ask.id).sort((a, b) => a.kind - b.kind);
    const table = `${ask.name}Exchanges`;
    use(ask, `type ${ask.name}`);
    lines.push(...doc([`The ${ask.name} variant named \`K\`, without its channel and kind: what an ask of that kind carries.`]));
    lines.push(`export type ${ask.name}Body<K extends ${ask.name}["${DISCRIMINANT}"]> = Omit<Extract<${ask.name}, { ${DISCRIMINANT}: K }>, "channel" | "${DISCRIMINANT}">;`);
    lines.push("");
    lines.push(...doc([`Every exchange a ${ask.title} starts, by kind name.`]));
    lines.push(`export interface ${table} {`);
    for (const x of xs) {
      lines.push(...doc([`Kind ${x.kind}, ${x.ask}: answered on \`${x.path}\` with ${patternText(x)}.`], "  "));
      lines.push(`  readonly ${x.variantName}: ExchangeDescriptor<${lit(x.variantName)}, ${answerType(x.answerFrameId)}>;`);
    }
    lines.push(`}`);
    lines.push("");
    lines.push(`export const ${lowerCamel(table)}: ${table} = {`);
    for (const x of xs) {
      const prefix = x.path.slice(0, x.path.indexOf("{channel}"));
      const channel = x.channel ? `{ opener: ${lit(x.channel.opener)}, tag: ${x.channel.tag}, variant: ${lit(x.channel.variantName)} }` : "undefined";
      lines.push(`  ${x.variantName}: {`);
      lines.push(`    id: ${lit(x.id)},`);
      lines.push(`    kind: ${x.kind},`);
      lines.push(`    kindName: ${lit(x.variantName)},`);
      lines.push(`    path: ${lit(x.path)},`);
      lines.push(`    pathPrefix: ${lit(prefix)},`);
      lines.push(`    pattern: ${lit(x.messages)},`);
      lines.push(`    last: ${x.last ? lit(x.last) : "undefined"},`);
      lines.push(`    unanswered: ${lit(x.unanswered)},`);
      lines.push(`    notServed: ${lit(x.notServed)},`);
      const tail = restBytesField(ask, x.kind);
      lines.push(`    askTail: ${tail ? lit(tail) : "undefined"},`);
      lines.push(`    answer: ${answerCodec(x.answerFrameId)},`);
      lines.push(`    channel: ${channel},`);
      const after = (x.standing?.afterIds ?? []).map((id) => lit(ir.exchanges.find((e) => e.id === id)!.variantName));
      lines.push(`    standing: ${x.standing ? `{ after: [${after.join(", ")}], ended: ${lit(x.standing.ended)} }` : "undefined"},`);
      lines.push(`  },`);
    }
    lines.push(`};`);
    lines.push("");
    lines.push(...doc([`The exchanges of {@link ${lowerCamel(table)}}, indexed by kind byte.`]));
    lines.push(`export const ${lowerCamel(table)}ByKind: ReadonlyMap<number, ExchangeDescriptor> = new Map(Object.values(${lowerCamel(table)}).map((x: ExchangeDescriptor) => [x.kind, x]));`);
    lines.push("");
  }

  lines.push(...doc(["One channel of a scope: who opens it, with which request variant, and how it is answered."]));
  lines.push(`export interface ChannelDescriptor<V extends string = string, A = any> {`);
  lines.push(`  readonly opener: "provider" | "proxy";`);
  lines.push(`  readonly tag: number;`);
  lines.push(`  readonly variant: V;`);
  lines.push(`  readonly pattern: ExchangePattern;`);
  lines.push(`  readonly last: string | undefined;`);
  lines.push(`  /** What a finish with no response before it means. */`);
  lines.push(`  readonly bareFinish: "notServed" | "declined" | "unknownConnection";`);
  lines.push(`  /** The kind name of the \`/requests\` exchange this channel carries, when it carries one. */`);
  lines.push(`  readonly exchange: string | undefined;`);
  lines.push(`  readonly answer: AnswerCodec<A> | undefined;`);
  lines.push(`}`);
  lines.push("");
  for (const t of ir.channelTables) {
    for (const entry of t.tables) {
      const frame = frameById.get(entry.frameId)!;
      const table = `${pascal(t.id)}${entry.opener === "provider" ? "Provider" : "Proxy"}Opened`;
      lines.push(...doc([`The channels the ${entry.opener} opens on ${t.title}, by request variant.`]));
      lines.push(`export interface ${table} {`);
      for (const c of entry.channels) {
        lines.push(`  readonly ${c.variantName}: ChannelDescriptor<${lit(c.variantName)}, ${answerType(c.answer.frameId)}>;`);
      }
      lines.push(`}`);
      lines.push(`export const ${lowerCamel(table)}: ${table} = {`);
      for (const c of entry.channels) {
        const x = c.exchangeId ? ir.exchanges.find((e) => e.id === c.exchangeId) : undefined;
        lines.push(
          `  ${c.variantName}: { opener: ${lit(entry.opener)}, tag: ${c.tag}, variant: ${lit(c.variantName)}, pattern: ${lit(c.answer.messages)}, last: ${c.answer.last ? lit(c.answer.last) : "undefined"}, bareFinish: ${lit(c.bareFinish)}, exchange: ${x ? lit(x.variantName) : "undefined"}, answer: ${answerCodec(c.answer.frameId)} },`,
        );
      }
      lines.push(`};`);
      lines.push("");
      void frame;
    }
  }

  lines.push(...doc(["One path the provider opens itself: what it sends, what the proxy answers, who closes it."]));
  lines.push(`export interface OpenedPathDescriptor<R = any, A = any> {`);
  lines.push(`  readonly id: string;`);
  lines.push(`  readonly path: string;`);
  lines.push(`  readonly request: { readonly messages: "none" | "one" | "oneThenPieces"; readonly codec: AnswerCodec<R> | undefined };`);
  lines.push(`  readonly pattern: ExchangePattern;`);
  lines.push(`  readonly last: string | undefined;`);
  lines.push(`  readonly answer: AnswerCodec<A> | undefined;`);
  lines.push(`  readonly closedBy: "provider" | "proxy";`);
  lines.push(`}`);
  lines.push("");
  if (ir.openedPaths.length > 0) {
    lines.push(...doc(["Every path the provider opens, by name."]));
    lines.push(`export interface OpenedPaths {`);
    for (const p of ir.openedPaths) lines.push(`  readonly ${pascal(p.id)}: OpenedPathDescriptor<${answerType(p.request.frameId)}, ${answerType(p.answer.frameId)}>;`);
    lines.push(`}`);
    lines.push(`export const openedPaths: OpenedPaths = {`);
    for (const p of ir.openedPaths) {
      lines.push(
        `  ${pascal(p.id)}: { id: ${lit(p.id)}, path: ${lit(p.path)}, request: { messages: ${lit(p.request.messages)}, codec: ${answerCodec(p.request.frameId)} }, pattern: ${lit(p.answer.messages)}, last: ${p.answer.last ? lit(p.answer.last) : "undefined"}, answer: ${answerCodec(p.answer.frameId)}, closedBy: ${lit(p.closedBy)} },`,
      );
    }
    lines.push(`};`);
    lines.push("");
  }

  const head = banner(ir, compilerVersion);
  const importLines = [...imports.entries()]
    .sort(([a], [b]) => a.localeCompare(b))
    .map(([from, names]) => {
      const sorted = [...names].sort((a, b) => a.replace(/^type /, "").localeCompare(b.replace(/^type /, "")));
      return `import { ${sorted.join(", ")} } from ${lit(from)};`;
    });
  importLines.push(`import type { DecodeOptions } from ${lit(importPath(`gen/${here}`, "runtime/index.ts"))};`);
  return { path: `packages/codec/src/gen/${rev}/exchanges.ts`, text: [head, ...importLines, "", ...lines].join("\n").trimEnd() + "\n" };
}

// --- @diverge/server -------------------------------------------------------------------------

function emitServerSurface(ir: IrRevision, compilerVersion: string): GeneratedFile {
  const frameById = new Map(ir.frames.map((f) => [f.id, f]));
  const askFrames = [...new Set(ir.exchanges.map((x) => x.askFrameId))].map((id) => frameById.get(id)!);
  const codecNames = new Set<string>();
  const lines: string[] = [];
  lines.push(`// The proxy's typed surface of revision ${ir.revision}: one method per exchange the proxy asks, bound`);
  lines.push(`// onto the generic engine, and the routing of every channel the provider opens on the begin scope.`);
  lines.push("");
  for (const ask of askFrames) {
    const table = `${ask.name}Exchanges`;
    codecNames.add(lowerCamel(table));
    codecNames.add(`type ${ask.name}Body`);
    const xs = ir.exchanges.filter((x) => x.askFrameId === ask.id && typed(x)).sort((a, b) => a.kind - b.kind);
    const skipped = ir.exchanges.filter((x) => x.askFrameId === ask.id && !typed(x));
    lines.push(
      ...doc([
        `One typed method per exchange the proxy asks with a ${ask.title}. Each resolves with the decoded answer or`,
        `says how the exchange ended instead (see the engine's outcomes); a stream yields every answer message.`,
        ...(skipped.length > 0 ? [`Not here (raw bytes, or an answer frame not declared yet): ${skipped.map((x) => `kind ${x.kind} ${x.variantName}`).join(", ")}.`] : []),
      ]),
    );
    lines.push(`export interface ProxyAsks {`);
    for (const x of xs) {
      const answer = frameById.get(x.answerFrameId!)!;
      codecNames.add(`type ${answer.name}`);
      const stream = STREAMS.has(x.messages);
      lines.push(...doc([`Kind ${x.kind}, ${x.ask}: answered on \`${x.path}\` with ${patternText(x)}; ${x.unanswered === "askedAgain" ? "asked again when unanswered" : "never asked again"}.`], "  "));
      lines.push(`  ${lowerCamel(x.variantName)}(ask: ${ask.name}Body<${lit(x.variantName)}>, options?: AskOptions): ${stream ? `AskStream<${answer.name}>` : `Promise<AskOutcome<${answer.name}>>`};`);
    }
    lines.push(`}`);
    lines.push("");
    lines.push(...doc(["Binds every method of {@link ProxyAsks} to `engine`."]));
    lines.push(`export function bindProxyAsks(engine: AskEngine): ProxyAsks {`);
    lines.push(`  const x = ${lowerCamel(table)};`);
    lines.push(`  return {`);
    for (const x of xs) {
      const stream = STREAMS.has(x.messages);
      lines.push(`    ${lowerCamel(x.variantName)}: (ask, options) => engine.${stream ? "stream" : "one"}(x.${x.variantName}, ask, options),`);
    }
    lines.push(`  };`);
    lines.push(`}`);
    lines.push("");
    // Standing streams: kept by the proxy for its life, on the same ask frame's connection.
    const standing = xs.filter((x) => x.standing);
    lines.push(
      ...doc([
        `One method per standing stream of the ${ask.title}: a stream the proxy keeps for its life, first asked once`,
        `the proxy has made its first exchange of the kinds its descriptor names, asked again as its fate rules say.`,
        `Each call starts keeping one such stream; its answers and what happens to it reach \`sink\`.`,
      ]),
    );
    lines.push(`export interface ProxyStandingAsks {`);
    for (const x of standing) {
      const answer = frameById.get(x.answerFrameId!)!;
      const after = x.standing!.afterIds.map((id) => ir.exchanges.find((e) => e.id === id)!.kind);
      const kinds = after.length === 1 ? `kind ${after[0]}` : `kinds ${after.slice(0, -1).join(", ")} or ${after[after.length - 1]}`;
      lines.push(
        ...doc(
          [
            `Kind ${x.kind}, ${x.ask}: asked after the proxy's first exchange of ${kinds}; when its path ends it is asked again on the next`,
            `connection (at once after an abrupt end before \`${x.last ?? "its last message"}\`; never after a clean close with no message).`,
          ],
          "  ",
        ),
      );
      lines.push(`  ${lowerCamel(x.variantName)}(ask: ${ask.name}Body<${lit(x.variantName)}>, sink: StandingSink<${answer.name}>): void;`);
    }
    lines.push(`}`);
    lines.push("");
    lines.push(...doc(["Binds every method of {@link ProxyStandingAsks} to `engine`."]));
    lines.push(`export function bindProxyStandingAsks(${standing.length > 0 ? "engine" : "_engine"}: StandingAskEngine): ProxyStandingAsks {`);
    if (standing.length > 0) lines.push(`  const x = ${lowerCamel(table)};`);
    lines.push(`  return {`);
    for (const x of standing) lines.push(`    ${lowerCamel(x.variantName)}: (ask, sink) => engine.standing(x.${x.variantName}, ask, sink),`);
    lines.push(`  };`);
    lines.push(`}`);
    lines.push("");
  }
  // Routing of provider-opened channels.
  for (const t of ir.channelTables) {
    const entry = t.tables.find((e) => e.opener === "provider");
    if (!entry) continue;
    const frame = frameById.get(entry.frameId)!;
    const prop = DISCRIMINANT;
    codecNames.add(`type ${frame.name}`);
    const routes = `${pascal(t.id)}ProviderRoutes`;
    lines.push(...doc([`A handler for every channel the provider opens on ${t.title}: \`C\` is the engine's channel.`]));
    lines.push(`export interface ${routes}<C> {`);
    for (const c of entry.channels) {
      lines.push(...doc([`Tag ${c.tag}: answered with ${patternText(c.answer)}; a bare finish means ${c.bareFinish}.`], "  "));
      lines.push(`  ${lowerCamel(c.variantName)}(request: Extract<${frame.name}, { ${prop}: ${lit(c.variantName)} }>, channel: C): void;`);
    }
    lines.push(`}`);
    lines.push("");
    lines.push(...doc([`Hands a decoded channel request to its handler in \`routes\`.`]));
    lines.push(`export function route${pascal(t.id)}ProviderChannel<C>(request: ${frame.name}, routes: ${routes}<C>, channel: C): void {`);
    lines.push(`  switch (request.${prop}) {`);
    for (const c of entry.channels) {
      lines.push(`    case ${lit(c.variantName)}:`);
      lines.push(`      return routes.${lowerCamel(c.variantName)}(request, channel);`);
    }
    lines.push(`  }`);
    lines.push(`}`);
    lines.push("");
  }
  // Paths the provider opens: one handler each, bound for the generic path engine.
  const paths = ir.openedPaths.filter(typedPath);
  if (paths.length > 0) {
    codecNames.add("openedPaths");
    const skipped = ir.openedPaths.filter((p) => !typedPath(p));
    lines.push(
      ...doc([
        "One member per path the provider opens that the proxy answers. A path with no member is refused (404) before",
        "the upgrade. A handler is given the decoded request (or why it did not decode) and resolves with the answer",
        "frame's value; a stream handler yields one answer frame's value per message.",
        ...(skipped.length > 0 ? [`Not here (raw bytes, or a frame not declared yet): ${skipped.map((p) => p.path).join(", ")}.`] : []),
      ]),
    );
    lines.push(`export interface ProviderPathHandlers {`);
    for (const p of paths) {
      const answer = frameById.get(p.answer.frameId!)!;
      codecNames.add(`type ${answer.name}`);
      const stream = STREAMS.has(p.answer.messages);
      const request = p.request.messages === "one" ? frameById.get(p.request.frameId!)! : undefined;
      if (request) codecNames.add(`type ${request.name}`);
      const params = request ? `request: PathRequest<${request.name}>, context: PathContext` : `context: PathContext`;
      lines.push(...doc([`\`${p.path}\`: ${request ? "one request message" : "no request message"}; answered with ${patternText(p.answer)}; closed by the ${p.closedBy}.`], "  "));
      lines.push(`  readonly ${lowerCamel(p.id)}?: (${params}) => ${stream ? `AsyncIterable<${answer.name}>` : `Promise<${answer.name}>`};`);
    }
    lines.push(`}`);
    lines.push("");
    lines.push(...doc(["The paths `handlers` answers, each with its descriptor, for the generic path engine."]));
    lines.push(`export function bindProviderPaths(handlers: ProviderPathHandlers): BoundPath[] {`);
    lines.push(`  const p = openedPaths;`);
    lines.push(`  const bound: BoundPath[] = [];`);
    for (const p of paths) {
      const name = lowerCamel(p.id);
      const stream = STREAMS.has(p.answer.messages);
      const withRequest = p.request.messages === "one";
      const member = !withRequest ? `(_request, context) => handler(context)` : `handler as BoundPath[${lit(stream ? "stream" : "one")}]`;
      lines.push(`  const ${name} = handlers.${name};`);
      lines.push(`  if (${name}) {`);
      lines.push(`    const handler = ${name};`);
      lines.push(`    bound.push({ descriptor: p.${pascal(p.id)}, ${stream ? "stream" : "one"}: ${member} });`);
      lines.push(`  }`);
    }
    lines.push(`  return bound;`);
    lines.push(`}`);
    lines.push("");
  }
  const head = banner(ir, compilerVersion);
  const importLines = [
    ...codecImports(codecNames),
    `import type { AskEngine, AskOptions, AskOutcome, AskStream } from "../exchanges/engine.js";`,
    `import type { StandingAskEngine, StandingSink } from "../exchanges/standing.js";`,
    ...(paths.length > 0 ? [`import type { BoundPath, PathContext, PathRequest } from "../exchanges/paths.js";`] : []),
  ];
  return { path: "packages/server/src/gen/exchanges.ts", text: [head, ...importLines, "", ...lines].join("\n").trimEnd() + "\n" };
}

// --- @diverge/client -------------------------------------------------------------------------

function emitClientSurface(ir: IrRevision, compilerVersion: string): GeneratedFile {
  const frameById = new Map(ir.frames.map((f) => [f.id, f]));
  const askFrames = [...new Set(ir.exchanges.map((x) => x.askFrameId))].map((id) => frameById.get(id)!);
  const codecNames = new Set<string>();
  const lines: string[] = [];
  lines.push(`// The provider's typed surface of revision ${ir.revision}: a handler per exchange the provider answers,`);
  lines.push(`// the dispatch of an ask (on \`/requests\` or a channel the proxy opens) to it, and a typed method per`);
  lines.push(`// channel the provider opens on the begin scope.`);
  lines.push("");
  const handled = ir.exchanges.filter(typed).sort((a, b) => a.kind - b.kind);
  lines.push(
    ...doc([
      "One member per exchange the provider answers. A missing member, or one that resolves with `undefined`",
      "(a stream that yields nothing), declines: the answer path (or channel) closes with no message, which the",
      "proxy reads as not served. A one-message handler resolves with the answer frame's value; a stream handler",
      "yields one answer frame's value per message.",
    ]),
  );
  lines.push(`export interface ProviderHandlers {`);
  for (const x of handled) {
    const ask = frameById.get(x.askFrameId)!;
    const answer = frameById.get(x.answerFrameId!)!;
    codecNames.add(`type ${ask.name}Body`);
    codecNames.add(`type ${answer.name}`);
    const stream = STREAMS.has(x.messages);
    lines.push(...doc([`Kind ${x.kind}, ${x.ask}: ${patternText(x)}.`], "  "));
    lines.push(`  readonly ${lowerCamel(x.variantName)}?: (ask: ${ask.name}Body<${lit(x.variantName)}>, context: AnswerContext) => ${stream ? `AsyncIterable<${answer.name}>` : `Promise<${answer.name} | undefined> | ${answer.name} | undefined`};`);
  }
  lines.push(`}`);
  lines.push("");
  lines.push(...doc(["An ask on its way to its handler: the exchange it starts and how to produce its answer messages."]));
  lines.push(`export interface DispatchedAsk {`);
  lines.push(`  readonly exchange: ExchangeDescriptor;`);
  lines.push(`  /** The answer messages, encoded; none (or no handler) declines. */`);
  lines.push(`  answer(context: AnswerContext): AsyncIterable<Uint8Array>;`);
  lines.push(`}`);
  lines.push("");
  for (const ask of askFrames) {
    const table = lowerCamel(`${ask.name}Exchanges`);
    codecNames.add(table);
    codecNames.add(`type ${ask.name}`);
    codecNames.add(`type ExchangeDescriptor`);
    const prop = DISCRIMINANT;
    lines.push(...doc([`The exchange a ${ask.title} starts and its answer, from \`handlers\`. Undefined when no handler answers it (raw bytes, or an answer frame not declared yet).`]));
    lines.push(`export function dispatch${ask.name}(ask: ${ask.name}, handlers: ProviderHandlers): DispatchedAsk | undefined {`);
    lines.push(`  switch (ask.${prop}) {`);
    for (const x of handled.filter((e) => e.askFrameId === ask.id)) {
      const name = lowerCamel(x.variantName);
      const stream = STREAMS.has(x.messages);
      lines.push(`    case ${lit(x.variantName)}: {`);
      lines.push(`      const { channel: _channel, ${prop}: _kind, ...body } = ask;`);
      lines.push(`      const exchange = ${table}.${x.variantName};`);
      lines.push(`      const handler = handlers.${name};`);
      lines.push(`      return { exchange, answer: (context) => ${stream ? "streamOf" : "oneOf"}(exchange.answer!.encode, handler && ((cx) => handler(body, cx)), context) };`);
      lines.push(`    }`);
    }
    lines.push(`    default:`);
    lines.push(`      return undefined;`);
    lines.push(`  }`);
    lines.push(`}`);
    lines.push("");
  }
  // Proxy-opened channels carrying exchanges: the same handlers answer them.
  for (const t of ir.channelTables) {
    const entry = t.tables.find((e) => e.opener === "proxy");
    if (!entry) continue;
    const frame = frameById.get(entry.frameId)!;
    const prop = DISCRIMINANT;
    codecNames.add(`type ${frame.name}`);
    lines.push(...doc([`The answer to a channel the proxy opens on ${t.title}, from the handler of the exchange it carries. Undefined for a channel no handler answers here (the connection halves, raw bytes).`]));
    lines.push(`export function dispatch${pascal(t.id)}ProxyChannel(request: ${frame.name}, handlers: ProviderHandlers): DispatchedAsk | undefined {`);
    lines.push(`  switch (request.${prop}) {`);
    for (const c of entry.channels) {
      const x = c.exchangeId ? ir.exchanges.find((e) => e.id === c.exchangeId) : undefined;
      if (!x || !typed(x)) continue;
      const ask = frameById.get(x.askFrameId)!;
      const table = lowerCamel(`${ask.name}Exchanges`);
      const stream = STREAMS.has(x.messages);
      lines.push(`    case ${lit(c.variantName)}: {`);
      lines.push(`      const { ${prop}: _variant, ...body } = request;`);
      lines.push(`      const exchange = ${table}.${x.variantName};`);
      lines.push(`      const handler = handlers.${lowerCamel(x.variantName)};`);
      lines.push(`      return { exchange, answer: (context) => ${stream ? "streamOf" : "oneOf"}(exchange.answer!.encode, handler && ((cx) => handler(body, cx)), context) };`);
      lines.push(`    }`);
    }
    lines.push(`    default:`);
    lines.push(`      return undefined;`);
    lines.push(`  }`);
    lines.push(`}`);
    lines.push("");
  }
  // Provider-opened channels: one typed ask each.
  for (const t of ir.channelTables) {
    const entry = t.tables.find((e) => e.opener === "provider");
    if (!entry) continue;
    const frame = frameById.get(entry.frameId)!;
    const prop = DISCRIMINANT;
    const descriptors = lowerCamel(`${pascal(t.id)}ProviderOpened`);
    codecNames.add(descriptors);
    codecNames.add(`type ${frame.name}`);
    const chans = entry.channels.filter((c: IrChannel) => c.answer.frameId !== undefined);
    const skipped = entry.channels.filter((c: IrChannel) => c.answer.frameId === undefined);
    lines.push(
      ...doc([
        `One typed method per channel the provider opens on ${t.title}, bound onto a channel engine.`,
        ...(skipped.length > 0 ? [`Not here (raw bytes, hand-written): ${skipped.map((c) => c.variantName).join(", ")}.`] : []),
      ]),
    );
    lines.push(`export interface ${t.providerAsks} {`);
    for (const c of chans) {
      const answer = frameById.get(c.answer.frameId!)!;
      codecNames.add(`type ${answer.name}`);
      const stream = STREAMS.has(c.answer.messages);
      lines.push(...doc([`Tag ${c.tag}: ${patternText(c.answer)}; a bare finish means ${c.bareFinish}.`], "  "));
      lines.push(`  ${lowerCamel(c.variantName)}(request: Omit<Extract<${frame.name}, { ${prop}: ${lit(c.variantName)} }>, ${lit(prop)}>): ${stream ? `ChannelStream<${answer.name}>` : `Promise<ChannelOutcome<${answer.name}>>`};`);
    }
    lines.push(`}`);
    lines.push("");
    lines.push(...doc([`Binds every method of {@link ${t.providerAsks}} to \`engine\`.`]));
    lines.push(`export function bind${t.providerAsks}(engine: ChannelAskEngine<${frame.name}>): ${t.providerAsks} {`);
    lines.push(`  const c = ${descriptors};`);
    lines.push(`  return {`);
    for (const c of chans) {
      const stream = STREAMS.has(c.answer.messages);
      lines.push(`    ${lowerCamel(c.variantName)}: (request) => engine.${stream ? "stream" : "one"}(c.${c.variantName}, { ${prop}: ${lit(c.variantName)}, ...request }),`);
    }
    lines.push(`  };`);
    lines.push(`}`);
    lines.push("");
  }
  // Paths the provider opens: one typed ask each, bound onto a path engine.
  const paths = ir.openedPaths.filter(typedPath);
  if (paths.length > 0) {
    codecNames.add("openedPaths");
    lines.push(...doc(["One typed method per path the provider opens, bound onto a path engine (each opening is one exchange)."]));
    lines.push(`export interface ProviderPathAsks {`);
    for (const p of paths) {
      const answer = frameById.get(p.answer.frameId!)!;
      codecNames.add(`type ${answer.name}`);
      const stream = STREAMS.has(p.answer.messages);
      const request = p.request.messages === "one" ? frameById.get(p.request.frameId!)! : undefined;
      if (request) codecNames.add(`type ${request.name}`);
      lines.push(...doc([`\`${p.path}\`: ${patternText(p.answer)}; closed by the ${p.closedBy}.`], "  "));
      lines.push(`  ${lowerCamel(p.id)}(${request ? `request: ${request.name}, ` : ""}options?: PathAskOptions): ${stream ? `PathStream<${answer.name}>` : `Promise<PathOutcome<${answer.name}>>`};`);
    }
    lines.push(`}`);
    lines.push("");
    lines.push(...doc(["Binds every method of {@link ProviderPathAsks} to `engine`."]));
    lines.push(`export function bindProviderPathAsks(engine: PathAskEngine): ProviderPathAsks {`);
    lines.push(`  const p = openedPaths;`);
    lines.push(`  return {`);
    for (const p of paths) {
      const stream = STREAMS.has(p.answer.messages);
      const request = p.request.messages === "one";
      lines.push(`    ${lowerCamel(p.id)}: (${request ? "request, " : ""}options) => engine.${stream ? "stream" : "one"}(p.${pascal(p.id)}, ${request ? "request" : "undefined"}, options),`);
    }
    lines.push(`  };`);
    lines.push(`}`);
    lines.push("");
  }
  const head = banner(ir, compilerVersion);
  const importLines = [
    ...codecImports(codecNames),
    `import { oneOf, streamOf, type AnswerContext, type ChannelAskEngine, type ChannelOutcome, type ChannelStream } from "../exchanges/engine.js";`,
    ...(paths.length > 0 ? [`import type { PathAskEngine, PathAskOptions, PathOutcome, PathStream } from "../exchanges/paths.js";`] : []),
  ];
  return { path: "packages/client/src/gen/exchanges.ts", text: [head, ...importLines, "", ...lines].join("\n").trimEnd() + "\n" };
}

/** The imports of a package's surface: frame types from the codec's root, descriptors from its `exchanges` subpath. */
function codecImports(names: ReadonlySet<string>): string[] {
  const bare = (n: string) => n.replace(/^type /, "");
  const fromExchanges = (n: string) => /Exchanges$|ExchangesByKind$|Body$|Opened$|^ExchangeDescriptor$|^ChannelDescriptor$|^openedPaths$/.test(bare(n));
  const sorted = (list: string[]) => list.sort((a, b) => bare(a).localeCompare(bare(b))).join(", ");
  const root = [...names].filter((n) => !fromExchanges(n));
  const exchanges = [...names].filter(fromExchanges);
  return [...(root.length > 0 ? [`import { ${sorted(root)} } from "@diverge/codec";`] : []), ...(exchanges.length > 0 ? [`import { ${sorted(exchanges)} } from "@diverge/codec/exchanges";`] : [])];
}

export type { IrChannelTable, IrExchange, IrOpenedPath };

/** The name of the last field of `frame`'s variant `tag` when it is bytes running to the end of the frame. */
function restBytesField(frame: IrFrame, tag: number): string | undefined {
  const last = frame.switch?.variants.find((v) => v.tag === tag)?.body.fields.at(-1);
  return last && last.type === "bytes" && last.length === "rest" ? last.name : undefined;
}
