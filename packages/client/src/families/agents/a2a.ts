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
}

export interface ServingAgent {
  /** Where the JSON-RPC endpoint is (the card's `url`). */
  readonly url: string;
  /** The agent card served at /.well-known/agent-card.json. */
  readonly card: AgentCard;
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
  server.on("request", (request, response) => void answer(request, response, card, transport));
  return {
    url,
    card,
    async close() {
      executor.close();
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

async function answer(request: IncomingMessage, response: ServerResponse, card: AgentCard, transport: JsonRpcTransportHandler): Promise<void> {
  const path = (request.url ?? "/").split("?")[0];
  if (request.method === "GET" && (path === AGENT_CARD_PATH || path === "/.well-known/agent.json")) {
    response.writeHead(200, { "Content-Type": "application/json" });
    response.end(JSON.stringify(card));
    return;
  }
  if (request.method !== "POST" || path !== "/") {
    response.writeHead(404, { "Content-Type": "application/json" });
    response.end(JSON.stringify({ error: "not found" }));
    return;
  }
  const chunks: Buffer[] = [];
  for await (const chunk of request) chunks.push(chunk as Buffer);
  let body: unknown;
  try {
    body = JSON.parse(Buffer.concat(chunks).toString("utf8"));
  } catch {
    response.writeHead(200, { "Content-Type": "application/json" });
    response.end(JSON.stringify({ jsonrpc: "2.0", id: null, error: { code: -32700, message: "Parse error" } }));
    return;
  }
  const result = await transport.handle(body);
  if (typeof (result as AsyncGenerator<unknown>)[Symbol.asyncIterator] === "function") {
    response.writeHead(200, { "Content-Type": "text/event-stream", "Cache-Control": "no-cache", Connection: "keep-alive" });
    try {
      for await (const event of result as AsyncGenerator<unknown>) response.write(`data: ${JSON.stringify(event)}\n\n`);
    } catch (error) {
      const id = (body as { id?: unknown } | null)?.id ?? null;
      response.write(`event: error\ndata: ${JSON.stringify({ jsonrpc: "2.0", id, error: { code: -32603, message: (error as Error).message } })}\n\n`);
    } finally {
      response.end();
    }
    return;
  }
  response.writeHead(200, { "Content-Type": "application/json" });
  response.end(JSON.stringify(result));
}
