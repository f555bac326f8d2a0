// An agent container served as an Agent2Agent agent (`diverge connect --serve-agent`), with the
// official SDK (@a2a-js/sdk, A2A 0.3: JSON-RPC `message/send`, `message/stream`, `tasks/cancel`, …)
// on a plain node:http server: the agent card at /.well-known/agent-card.json (from DIVERGE.md's
// front matter and the tools the program declared), JSON-RPC at /. Beyond the spec: any A2A client
// talks to the container with no Diverge code.
//
// Each A2A message is one enqueue, under the task's id as its key; the task's states follow the fate:
//   submitted  the message is enqueued, its fate not known yet
//   working    delivered: a loop took it (its output is the task's until another message lands)
//   input-required  the loop ended (settled) after it was delivered: the agent waits for the next
//              message, and one sent with this task's id continues the task (another enqueue under
//              its key); A2A keeps terminal states final, and an agent container's conversation is not
//              over when a loop ends
//   failed     the loop ended with a fatal notification, or the proxy could not be asked
//   rejected   the program refused the message (the enqueue's Refused, the program's words)
//   canceled   tasks/cancel: a dequeue of the task's key (withdrawn before a loop took it); a task
//              already delivered is canceled for A2A too, but its loop goes on (nothing interrupts one)
// Text deltas are appended to the task's "response" artifact, reasoning to its "reasoning" artifact,
// images and audio are file parts; a tool call and its result are one status message each.
import { logEvent, type LogEvent, type Say } from "@diverge/multiplexer/log";
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { randomUUID } from "node:crypto";
import type { AgentCard, Message, Part, Task, TaskArtifactUpdateEvent, TaskState, TaskStatusUpdateEvent } from "@a2a-js/sdk";
import type { AgentExecutor, ExecutionEventBus, JsonRpcTransportHandler, RequestContext } from "@a2a-js/sdk/server";
import type { AgenticLoopChunk, ContentBlock } from "@diverge/codec";
import { guardRefusal, type HostGuard } from "@diverge/multiplexer";
import { answerJsonRpcError, BodyTooLarge, readBodyWithin } from "../../http-serving.js";
import type { ContainerInfo } from "../info/front-matter.js";
import { ContainerError } from "../../multiplexed/errors.js";
import type { DeclaredTool } from "../../multiplexed/container.js";
import type { Agent } from "./agent.js";

export const AGENT_CARD_PATH = "/.well-known/agent-card.json";

export interface ServeAgentOptions {
  readonly host?: string;
  /** 0 (the default) picks a free port. */
  readonly port?: number;
  /** The container's DIVERGE.md (else asked with `agent.info()`). */
  readonly info?: ContainerInfo;
  /** Quiet time after which a loop is taken as ended where the transport does not mark it (see `Agent.settled`). */
  readonly idleMs?: number;
  /** One line per task event. */
  readonly log?: Say;
  /** Host names and Origins accepted besides the loopback ones (DNS-rebinding protection, as --serve-tools). */
  readonly guard?: HostGuard;
  /** The largest request body read, in bytes (413 past it). Default twice the agent's `maxMessageBytes`. */
  readonly maxBodyBytes?: number;
  /**
   * Bytes of a `message/stream` a client may leave unread (the response's buffer and its socket's);
   * an event that comes while more wait ends the stream with an error event. Default 4 MiB.
   */
  readonly streamBufferBytes?: number;
}

/** The default of {@link ServeAgentOptions.streamBufferBytes}. */
export const DEFAULT_A2A_STREAM_BUFFER_BYTES = 4 * 1024 * 1024;

export interface ServingAgent {
  /** Where the JSON-RPC endpoint is (the card's `url`). */
  readonly url: string;
  /** The agent card served at /.well-known/agent-card.json. */
  readonly card: AgentCard;
  /** Bytes written to the open `message/stream` responses that their clients have not taken yet. */
  readonly streamBytesWaiting: number;
  /** The most `streamBytesWaiting` of one stream has been, at an event's write. */
  readonly peakStreamBytesWaiting: number;
  close(): Promise<void>;
}

/** The agent card of a container: its name and description from DIVERGE.md, a skill for the conversation and one per declared tool. */
export function agentCardOf(info: ContainerInfo | undefined, tools: readonly DeclaredTool[], url: string): AgentCard {
  const front = info?.frontMatter;
  const name = front?.title ?? "Diverge agent container";
  const firstParagraph = info?.body.split(/\n\s*\n/).map((part) => part.replace(/^#.*$/gm, "").trim()).find((part) => part !== "");
  const description = front?.summary ?? firstParagraph ?? "An agent container reached through its Diverge proxy.";
  return {
    name,
    description,
    protocolVersion: "0.3.0",
    version: "2.3.0",
    url,
    preferredTransport: "JSONRPC",
    capabilities: { streaming: true, pushNotifications: false, stateTransitionHistory: false },
    defaultInputModes: ["text/plain", "image/*", "audio/*", "application/json"],
    defaultOutputModes: ["text/plain", "image/*", "audio/*"],
    skills: [
      { id: "conversation", name, description, tags: ["diverge", "agent"] },
      ...tools.map((tool) => ({ id: `tool:${tool.name}`, name: tool.name, description: typeof tool.instructions === "string" ? tool.instructions : `The tool container ${tool.name} the agent declared.`, tags: ["diverge", "tool"] })),
    ],
  };
}

/** A2A parts as MCP content blocks (text; files as images, audio, embedded resources or links; data as JSON text). */
export function blocksOfParts(parts: readonly Part[]): ContentBlock[] {
  return parts.map((part): ContentBlock => {
    if (part.kind === "text") return { type: "text", text: part.text };
    if (part.kind === "data") return { type: "text", text: JSON.stringify(part.data) };
    const file = part.file;
    const mimeType = file.mimeType ?? "application/octet-stream";
    if ("bytes" in file) {
      if (mimeType.startsWith("image/")) return { type: "image", data: file.bytes, mimeType };
      if (mimeType.startsWith("audio/")) return { type: "audio", data: file.bytes, mimeType };
      return { type: "resource", resource: { uri: `file:///${file.name ?? "attachment"}`, mimeType, blob: file.bytes } };
    }
    return { type: "resource_link", uri: file.uri, name: file.name ?? file.uri, ...(file.mimeType ? { mimeType: file.mimeType } : {}) };
  });
}

interface TaskRun {
  readonly taskId: string;
  readonly contextId: string;
  readonly bus: ExecutionEventBus;
  state: TaskState;
  text: string;
  readonly artifacts: Set<string>;
  fatal?: unknown;
  done: boolean;
  readonly abort: AbortController;
}

/** The AgentExecutor that carries A2A tasks onto an Agent's enqueue, chunk stream and dequeue. */
export class ContainerAgentExecutor implements AgentExecutor {
  private readonly runs = new Map<string, TaskRun>();
  /** The task whose message landed last: the loop's output is its. */
  private current: TaskRun | undefined;
  private readonly calls = new Map<string, { name: string; arguments: string }>();
  private readonly stop = new AbortController();

  constructor(
    private readonly agent: Agent,
    private readonly options: { idleMs?: number; log?: Say } = {},
  ) {
    void this.follow();
  }

  async execute(context: RequestContext, bus: ExecutionEventBus): Promise<void> {
    const { taskId, contextId, userMessage } = context;
    const run: TaskRun = { taskId, contextId, bus, state: "submitted", text: "", artifacts: new Set(), done: false, abort: new AbortController() };
    this.runs.set(taskId, run);
    // A follow-up on a task waiting for input keeps that task (its history, its artifacts): only its state moves.
    if (context.task) bus.publish(statusEvent(taskId, contextId, "submitted"));
    else {
      const task: Task = { kind: "task", id: taskId, contextId, status: { state: "submitted", timestamp: new Date().toISOString() }, history: [userMessage] };
      bus.publish(task);
    }
    this.say(...logEvent("task {task}: submitted", { task: taskId }));
    let fate;
    try {
      fate = await this.agent.enqueue(taskId, blocksOfParts(userMessage.parts), { signal: run.abort.signal });
    } catch (error) {
      if (run.done) return;
      const refused = error instanceof ContainerError && error.detail.variant === "Refused";
      return this.finish(run, refused ? "rejected" : "failed", refused ? JSON.stringify((error.detail as { error: unknown }).error) : (error as Error).message);
    }
    if (run.done) return;
    if (fate === "dequeued") return this.finish(run, "canceled", "withdrawn before a loop took it");
    this.working(run);
    // The loop's end as far as the provider can tell; a fatal notification ends it at once.
    await this.agent.settled({ idleMs: this.options.idleMs, signal: run.abort.signal }).catch(() => {});
    if (run.done) return;
    if (run.fatal !== undefined) return this.finish(run, "failed", typeof run.fatal === "string" ? run.fatal : JSON.stringify(run.fatal));
    this.finish(run, "input-required", run.text);
  }

  async cancelTask(taskId: string, bus: ExecutionEventBus): Promise<void> {
    const run = this.runs.get(taskId);
    if (!run || run.done) {
      bus.publish(statusEvent(taskId, run?.contextId ?? "", "canceled", "canceled"));
      bus.finished();
      return;
    }
    try {
      await this.agent.dequeue(taskId);
    } catch (error) {
      this.say(...logEvent("task {task}: dequeue failed: {error}", { task: taskId, error: (error as Error).message }));
    }
    if (run.done) return;
    this.finish(run, "canceled", run.state === "working" ? "canceled (the loop that took it goes on)" : "withdrawn before a loop took it");
  }

  /** Stops following the agent's chunks. */
  close(): void {
    this.stop.abort();
    for (const run of this.runs.values()) run.abort.abort();
  }

  private async follow(): Promise<void> {
    for await (const chunk of this.agent.chunks({ signal: this.stop.signal })) this.route(chunk);
    for (const run of this.runs.values()) if (!run.done) this.finish(run, "failed", "the agent ended");
  }

  private route(chunk: AgenticLoopChunk): void {
    if (chunk.type.startsWith("user_")) {
      const landed = this.runs.get((chunk as { key: string }).key);
      if (landed && !landed.done) {
        this.current = landed;
        this.working(landed);
      }
      return;
    }
    const run = this.current;
    if (!run || run.done) return;
    switch (chunk.type) {
      case "assistant_text_content":
      case "assistant_refusal":
        run.text += chunk.text;
        return this.artifact(run, "response", [{ kind: "text", text: chunk.text }]);
      case "assistant_reasoning":
        return this.artifact(run, "reasoning", [{ kind: "text", text: chunk.text }]);
      case "assistant_image_content":
      case "assistant_audio_content":
        return this.artifact(run, `${chunk.type === "assistant_image_content" ? "image" : "audio"}-${randomUUID()}`, [{ kind: "file", file: { bytes: chunk.data, mimeType: chunk.mimeType } }]);
      case "assistant_tool_call": {
        const call = this.calls.get(chunk.id) ?? { name: chunk.name, arguments: "" };
        call.arguments += chunk.arguments ?? "";
        this.calls.set(chunk.id, call);
        return;
      }
      case "tool_response": {
        const call = this.calls.get(chunk.id);
        this.calls.delete(chunk.id);
        const text = chunk.content.map((block) => (block.type === "text" ? block.text : `[${block.type}]`)).join(" ");
        run.bus.publish(statusEvent(run.taskId, run.contextId, "working", `${call ? `${call.name}(${call.arguments}) → ` : ""}${chunk.isError ? "error: " : ""}${text}`, { toolCallId: chunk.id }));
        return;
      }
      case "notification":
        if (chunk.is_fatal) {
          run.fatal = chunk.message;
          // A fatal notification ends the loop: the task is over now.
          this.finish(run, "failed", typeof chunk.message === "string" ? chunk.message : JSON.stringify(chunk.message));
        }
        return;
      default:
        return;
    }
  }

  private artifact(run: TaskRun, artifactId: string, parts: Part[]): void {
    const append = run.artifacts.has(artifactId);
    run.artifacts.add(artifactId);
    const event: TaskArtifactUpdateEvent = { kind: "artifact-update", taskId: run.taskId, contextId: run.contextId, append, artifact: { artifactId, name: artifactId, parts } };
    run.bus.publish(event);
  }

  private working(run: TaskRun): void {
    if (run.state !== "submitted") return;
    run.state = "working";
    run.bus.publish(statusEvent(run.taskId, run.contextId, "working"));
    this.say(...logEvent("task {task}: working", { task: run.taskId }));
  }

  private finish(run: TaskRun, state: TaskState, text?: string): void {
    if (run.done) return;
    run.done = true;
    run.state = state;
    run.abort.abort();
    if (this.current === run) this.current = undefined;
    const event = statusEvent(run.taskId, run.contextId, state, text);
    run.bus.publish({ ...event, final: true });
    run.bus.finished();
    this.say(...logEvent(`task {task}: ${state}`, { task: run.taskId }));
  }

  private say(line: string, event?: LogEvent): void {
    this.options.log?.(line, event);
  }
}

function statusEvent(taskId: string, contextId: string, state: TaskState, text?: string, metadata?: Record<string, unknown>): TaskStatusUpdateEvent {
  const message: Message | undefined =
    text === undefined ? undefined : { kind: "message", messageId: randomUUID(), role: "agent", taskId, contextId, parts: [{ kind: "text", text }], ...(metadata ? { metadata } : {}) };
  return { kind: "status-update", taskId, contextId, final: false, status: { state, timestamp: new Date().toISOString(), ...(message ? { message } : {}) } };
}

/** Serves `agent` over A2A at http://host:port (JSON-RPC at `/`, the card at /.well-known/agent-card.json). */
export async function serveAgentA2a(agent: Agent, options: ServeAgentOptions = {}): Promise<ServingAgent> {
  const host = options.host ?? "127.0.0.1";
  const info = options.info ?? (await agent.info().catch(() => undefined));
  const server: Server = createServer();
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(options.port ?? 0, host, () => resolve());
  });
  const port = (server.address() as AddressInfo).port;
  const url = `http://${host.includes(":") ? `[${host}]` : host}:${port}/`;
  const card = agentCardOf(info, agent.tools, url);
  const executor = new ContainerAgentExecutor(agent, { idleMs: options.idleMs, log: options.log });
  // The SDK's server is loaded when an agent is served, not with the library.
  const { DefaultRequestHandler, InMemoryTaskStore, JsonRpcTransportHandler } = await import("@a2a-js/sdk/server");
  const requestHandler = new DefaultRequestHandler(card, new InMemoryTaskStore(), executor);
  const transport = new JsonRpcTransportHandler(requestHandler);
  const http: HttpLayer = {
    card,
    transport,
    agent,
    guard: options.guard ?? { hosts: [], origins: [] },
    maxBodyBytes: options.maxBodyBytes ?? 2 * agent.maxMessageBytes,
    streamBufferBytes: options.streamBufferBytes ?? DEFAULT_A2A_STREAM_BUFFER_BYTES,
    streams: new Set(),
    peak: 0,
    log: options.log ?? (() => {}),
  };
  server.on("request", (request, response) => {
    answer(request, response, http).catch((problem: unknown) => answerJsonRpcError(response, 500, -32603, problem instanceof Error ? problem.message : String(problem)));
  });
  server.on("clientError", (_error, socket) => socket.destroy());
  return {
    url,
    card,
    get streamBytesWaiting() {
      let bytes = 0;
      for (const stream of http.streams) bytes += stream.writableLength;
      return bytes;
    },
    get peakStreamBytesWaiting() {
      return http.peak;
    },
    async close() {
      executor.close();
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

/** What the HTTP layer of one served agent holds. */
interface HttpLayer {
  readonly card: AgentCard;
  readonly transport: JsonRpcTransportHandler;
  readonly agent: Agent;
  readonly guard: HostGuard;
  readonly maxBodyBytes: number;
  readonly streamBufferBytes: number;
  /** The `message/stream` responses open now. */
  readonly streams: Set<ServerResponse>;
  peak: number;
  readonly log: (line: string) => void;
}

/** JSON-RPC's Invalid Request: a request this server will not take as it is (its size, its Host). */
const INVALID_REQUEST = -32600;

/** A task id's length (the SDK's are UUIDs): a new task's message is measured under one. */
const NEW_TASK_ID = "00000000-0000-0000-0000-000000000000";

/**
 * Why `body` carries a message the proxy could not take (over its message limit), or undefined. Sent,
 * it would end the provider's whole connection (multiplexed) or its path; refused here, it is refused
 * alone and the bridge goes on. A message the SDK would refuse anyway (malformed parts) is left to it.
 */
function oversizedMessage(body: unknown, agent: Agent): string | undefined {
  const request = body as { method?: unknown; params?: { message?: { taskId?: unknown; parts?: unknown } } } | null;
  if (request?.method !== "message/send" && request?.method !== "message/stream") return undefined;
  const message = request.params?.message;
  if (!Array.isArray(message?.parts)) return undefined;
  let bytes: number;
  try {
    bytes = agent.enqueueBytes(typeof message.taskId === "string" ? message.taskId : NEW_TASK_ID, blocksOfParts(message.parts as Part[]));
  } catch {
    return undefined;
  }
  if (bytes <= agent.maxMessageBytes) return undefined;
  return `the message is ${bytes} bytes as the proxy would receive it, larger than its message limit of ${agent.maxMessageBytes} bytes (--max-message-bytes); it was not sent`;
}

async function answer(request: IncomingMessage, response: ServerResponse, http: HttpLayer): Promise<void> {
  // Before anything is read: a page elsewhere (DNS rebinding) never reaches the agent.
  const refusal = guardRefusal(http.guard, request.headers);
  if (refusal) return answerJsonRpcError(response, 403, INVALID_REQUEST, refusal, { close: true });
  const path = (request.url ?? "/").split("?")[0];
  const isCard = request.method === "GET" && (path === AGENT_CARD_PATH || path === "/.well-known/agent.json");
  if (!isCard && (request.method !== "POST" || path !== "/")) {
    response.writeHead(404, { "Content-Type": "application/json", Connection: "close" });
    response.end(JSON.stringify({ error: "not found" }));
    return;
  }
  // Every body is read within the bound, the card's too (a GET may carry one).
  let bytes: Buffer;
  try {
    bytes = await readBodyWithin(request, http.maxBodyBytes);
  } catch (problem) {
    if (!(problem instanceof BodyTooLarge)) throw problem;
    return answerJsonRpcError(response, 413, INVALID_REQUEST, `${problem.message}: an A2A request to this agent is at most ${http.maxBodyBytes} bytes`, { close: true });
  }
  if (isCard) {
    response.writeHead(200, { "Content-Type": "application/json" });
    response.end(JSON.stringify(http.card));
    return;
  }
  let body: unknown;
  try {
    body = JSON.parse(bytes.toString("utf8"));
  } catch {
    response.writeHead(200, { "Content-Type": "application/json" });
    response.end(JSON.stringify({ jsonrpc: "2.0", id: null, error: { code: -32700, message: "Parse error" } }));
    return;
  }
  const id = (body as { id?: unknown } | null)?.id ?? null;
  const oversized = oversizedMessage(body, http.agent);
  if (oversized) return answerJsonRpcError(response, 200, INVALID_REQUEST, oversized, { id });
  const result = await http.transport.handle(body);
  if (typeof (result as AsyncGenerator<unknown>)[Symbol.asyncIterator] === "function") return stream(response, result as AsyncGenerator<unknown>, id, http);
  response.writeHead(200, { "Content-Type": "application/json" });
  response.end(JSON.stringify(result));
}

/**
 * A `message/stream` as server-sent events, bounded for a client that reads slowly or not at all.
 * The events keep being taken from the SDK (waiting for `drain` instead would only move the pile into
 * the SDK's queue, unbounded); an event that comes while more than `streamBufferBytes` wait unread
 * ends the stream with an error event saying so. At most the bound plus one event is ever held.
 */
async function stream(response: ServerResponse, events: AsyncGenerator<unknown>, id: unknown, http: HttpLayer): Promise<void> {
  response.writeHead(200, { "Content-Type": "text/event-stream", "Cache-Control": "no-cache", Connection: "keep-alive" });
  http.streams.add(response);
  const gone = () => void events.return(undefined).catch(() => {});
  response.once("close", gone);
  const limit = http.streamBufferBytes;
  let ending: string | undefined;
  try {
    for await (const event of events) {
      const waiting = response.writableLength;
      http.peak = Math.max(http.peak, waiting);
      if (waiting > limit) {
        ending = `the A2A client read too slowly: ${waiting} bytes waiting, limit ${limit}`;
        break;
      }
      if (response.destroyed) break;
      response.write(`data: ${JSON.stringify(event)}\n\n`);
      http.peak = Math.max(http.peak, response.writableLength);
    }
  } catch (error) {
    ending = (error as Error).message;
  } finally {
    http.streams.delete(response);
    response.off("close", gone);
    if (ending !== undefined) {
      if (ending.startsWith("the A2A client read too slowly")) http.log(`message/stream ${JSON.stringify(id)} ended: ${ending}`);
      response.write(`event: error\ndata: ${JSON.stringify({ jsonrpc: "2.0", id, error: { code: -32603, message: ending } })}\n\n`);
    }
    response.end();
  }
}
