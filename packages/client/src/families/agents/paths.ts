// An agent container on the paths transport (`/agent/*`, paths.md §10 with agents.md §9's
// corrections): every path a straight relay to the program, whose queue it is. The paths generation's
// semantics hold: `/agent/register` once, `/agent/run` opens a loop and streams it (its end is the
// loop's end), `/agent/enqueue` hands a message to the loop in flight and answers its fate when known
// (four fates, `missed` among them), `/agent/dequeue` withdraws the program's whole queue (no key).
// The Agent here does the little the proxy's driver does on the multiplexed transport: a message
// starts a loop when none runs, joins the loop in flight otherwise, and one that missed its loop
// starts the next.
//
// The bodies are the paths generation's (`{"agent"}`, `{"prompt"}`) with the A4d members beside them
// (`arguments`; `key` and `content`; `messages`), so that a program written to either contract reads
// what it needs (each ignores members it does not know); the proxy relays them verbatim.
import { checkAgenticLoopChunk, encodeAgentPromptRequest, type AgenticLoopChunk, type ContentBlock } from "@diverge/codec";
import { DEFAULT_MAX_MESSAGE_BYTES } from "../../limits.js";
import { bindProviderPathAsks, type ProviderPathAsks } from "../../gen/exchanges.js";
import { pathAskEngine, type PathAskEngineOptions, type PathOutcome, type PathStream } from "../../exchanges/paths.js";
import type { AgenticLoopAnswer } from "@diverge/codec";
import { ContainerError } from "../../multiplexed/errors.js";
import type { RequestOptions } from "../../waiting.js";
import { typedInfo, type ContainerInfo } from "../info/front-matter.js";
import { ChunkHub, contentOf, type Agent, type AgentBeginRequest, type AgentEvent, type ChunksOptions, type EnqueueFate, type EnqueueOptions, type SettledOptions } from "./agent.js";

interface Waiting {
  readonly key: string;
  readonly content: ContentBlock[];
  resolve(fate: EnqueueFate): void;
  reject(error: unknown): void;
  settled: boolean;
}

/** What a path's outcome other than an answer is, as the Agent's errors say it. */
function failure(what: string, outcome: Exclude<PathOutcome<unknown>, { type: "answered" }>, url: string): ContainerError {
  switch (outcome.type) {
    case "notServed":
      return new ContainerError({ variant: "NotServed", what });
    case "lost":
      return new ContainerError({ variant: "Lost", what });
    case "refused":
      return new ContainerError({ variant: "Unreachable", what, url, status: outcome.status, reason: outcome.reason });
    case "unreadable":
      return new ContainerError({ variant: "Unreadable", what, reason: outcome.reason });
  }
}

/** The text of a message's blocks, for the paths generation's `prompt`. */
function promptOf(messages: readonly { readonly content: readonly ContentBlock[] }[]): string {
  return messages
    .flatMap((message) => message.content)
    .map((block) => (block.type === "text" ? block.text : `[${block.type}]`))
    .join("\n");
}

/** The body of `/agent/run` that carries `entries` (the paths generation's prompt, the A4d messages). */
function runBody(entries: readonly { readonly key: string; readonly content: ContentBlock[] }[]) {
  return { prompt: promptOf(entries), messages: entries.map((entry) => ({ key: entry.key, content: entry.content })) };
}

/** The body of `/agent/enqueue` that carries one message. */
function enqueueBody(entry: { readonly key: string; readonly content: ContentBlock[] }) {
  return { prompt: promptOf([entry]), key: entry.key, content: entry.content };
}

export interface PathsAgentOptions extends PathAskEngineOptions, RequestOptions {
  /** The proxy's message limit (its --max-message-bytes); a path's message over it is not sent. Default 16 MiB. */
  readonly maxMessageBytes?: number;
}

/**
 * Registers the agent on the proxy at `url` (`/agent/register` with the arguments) and resolves with
 * the Agent over `/agent/*`. Rejects with ContainerError `Refused` (the program's words), or
 * `NotServed`/`Lost`/`Unreachable`/`Unreadable`.
 */
export async function beginPathsAgent(url: string | URL, request: AgentBeginRequest, options: PathsAgentOptions = {}): Promise<PathsAgent> {
  const asks = bindProviderPathAsks(pathAskEngine(url, options));
  const what = "/agent/register";
  const args = request.arguments ?? null;
  const outcome = await asks.agentRegister({ request: { agent: args, arguments: args } }, { signal: options.signal });
  if (outcome.type !== "answered") throw failure(what, outcome, String(url));
  if (outcome.answer.variant === "Error") throw new ContainerError({ variant: "Refused", what, error: outcome.answer.error });
  return new PathsAgent(asks, String(url), options.maxMessageBytes ?? DEFAULT_MAX_MESSAGE_BYTES);
}

/** An agent container over the paths transport's `/agent/*`. */
export class PathsAgent implements Agent {
  readonly transport = "paths" as const;
  /** The paths generation's register answers no tools. */
  readonly tools = [] as const;
  private readonly hub = new ChunkHub();
  /** Messages that missed their loop (or came while a run was starting), for the next loop. */
  private readonly waiting: Waiting[] = [];
  /** Messages handed to the loop in flight, their fate pending (`/agent/enqueue` open). */
  private readonly handed = new Set<Waiting>();
  /** Keys of messages taken and not landed yet, in order, for a paths-generation `user` chunk. */
  private readonly landing: string[] = [];
  private run: PathStream<AgenticLoopAnswer> | undefined;
  private closed = false;

  constructor(
    private readonly asks: ProviderPathAsks,
    private readonly url: string,
    readonly maxMessageBytes: number = DEFAULT_MAX_MESSAGE_BYTES,
  ) {
    this.hub.marksLoopEnd = true;
  }

  /** The larger of the two messages that may carry it: `/agent/enqueue`'s (a loop runs) and `/agent/run`'s (none does). */
  enqueueBytes(key: string, content: string | readonly ContentBlock[]): number {
    const entry = { key, content: contentOf(content) };
    return Math.max(encodeAgentPromptRequest({ request: enqueueBody(entry) }).length, encodeAgentPromptRequest({ request: runBody([entry]) }).length);
  }

  enqueue(key: string, content: string | readonly ContentBlock[], options?: EnqueueOptions): Promise<EnqueueFate> {
    if (this.closed) return Promise.reject(new ContainerError({ variant: "Lost", what: "enqueue" }));
    const signal = options?.signal;
    if (signal?.aborted) return Promise.reject(new ContainerError({ variant: "Aborted", what: "enqueue", waitingFor: `the fate of the message under "${key}"`, reason: signal.reason }));
    // The proxy closes a path whose message is over its limit: such a message is refused here, alone.
    const bytes = this.enqueueBytes(key, content);
    if (bytes > this.maxMessageBytes) return Promise.reject(new ContainerError({ variant: "TooLarge", what: "enqueue", bytes, limit: this.maxMessageBytes }));
    return new Promise<EnqueueFate>((resolve, reject) => {
      const onAbort = () => entry.reject(new ContainerError({ variant: "Aborted", what: "enqueue", waitingFor: `the fate of the message under "${key}"`, reason: signal!.reason }));
      const done = () => {
        if (entry.settled) return false;
        entry.settled = true;
        signal?.removeEventListener("abort", onAbort);
        this.hub.pendingFates--;
        this.hub.changed();
        return true;
      };
      const entry: Waiting = {
        key,
        content: contentOf(content),
        settled: false,
        resolve: (fate) => done() && resolve(fate),
        reject: (error) => done() && reject(error),
      };
      signal?.addEventListener("abort", onAbort, { once: true });
      this.hub.pendingFates++;
      this.hub.changed();
      if (this.run) this.hand(entry);
      else this.startRun([entry]);
    });
  }

  /**
   * Withdraws the messages under `key`: those waiting here for the next loop, and, when one under it
   * is with the loop in flight, the program's whole queue (`/agent/dequeue` has no key: the others
   * withdrawn with it answer `dequeued` too). True when one or more were withdrawn.
   */
  async dequeue(key: string, options?: RequestOptions): Promise<boolean> {
    let withdrew = false;
    for (const entry of [...this.waiting]) {
      if (entry.key !== key) continue;
      this.waiting.splice(this.waiting.indexOf(entry), 1);
      entry.resolve("dequeued");
      withdrew = true;
    }
    if (![...this.handed].some((entry) => entry.key === key)) return withdrew;
    const outcome = await this.asks.agentDequeue({ signal: options?.signal });
    if (outcome.type !== "answered") throw failure("/agent/dequeue", outcome, this.url);
    if (outcome.answer.variant === "Error") throw new ContainerError({ variant: "Refused", what: "/agent/dequeue", error: outcome.answer.error });
    return withdrew || outcome.answer.variant === "Withdrew";
  }

  chunks(options?: ChunksOptions): AsyncIterable<AgenticLoopChunk> {
    return this.hub.chunks(options);
  }

  settled(options?: SettledOptions): Promise<void> {
    return this.hub.settled(options);
  }

  /** The program's `GET /schema` (`/agent/schema`) as the front matter's `arguments`; the paths transport carries no DIVERGE.md. */
  async info(options?: RequestOptions): Promise<ContainerInfo | undefined> {
    const outcome = await this.asks.agentSchema({ signal: options?.signal });
    if (outcome.type !== "answered") throw failure("/agent/schema", outcome, this.url);
    if (outcome.answer.variant !== "Schema") return undefined;
    return typedInfo({ frontMatter: { arguments: outcome.answer.schema }, body: "" });
  }

  /** No path carries a secrets feed on the paths transport: rejects with `NotServed` (run the proxy with --no-secrets-gate, or feed them on `/`). */
  async feedSecrets(_values: Record<string, string>, _options?: RequestOptions): Promise<void> {
    throw new ContainerError({ variant: "NotServed", what: "secrets (the paths transport has no secrets feed)" });
  }

  onEvent(listener: (event: AgentEvent) => void): () => void {
    return this.hub.onEvent(listener);
  }

  ended(): Promise<void> {
    return this.hub.ended();
  }

  /** Stops: the loop's stream is closed, every pending fate rejects with `Lost`, and the chunk stream ends. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    this.run?.close();
    for (const entry of [...this.waiting.splice(0), ...this.handed]) entry.reject(new ContainerError({ variant: "Lost", what: "enqueue" }));
    this.hub.end();
  }

  /** Hands a message to the loop in flight; a miss keeps it for the next loop. */
  private hand(entry: Waiting): void {
    this.handed.add(entry);
    void this.asks.agentEnqueue({ request: enqueueBody(entry) }).then((outcome) => {
      this.handed.delete(entry);
      if (entry.settled) return;
      if (outcome.type !== "answered") return entry.reject(failure("/agent/enqueue", outcome, this.url));
      switch (outcome.answer.variant) {
        case "Delivered":
          this.landing.push(entry.key);
          return entry.resolve("delivered");
        case "Dequeued":
          return entry.resolve("dequeued");
        case "Error":
          return entry.reject(new ContainerError({ variant: "Refused", what: "enqueue", error: outcome.answer.error }));
        case "Missed":
          this.waiting.push(entry);
          if (!this.run) this.startRun(this.waiting.splice(0));
          return;
      }
    });
  }

  /** Opens `/agent/run` on `batch`; relays its chunks; its end starts the next loop on what waits. */
  private startRun(batch: Waiting[]): void {
    if (this.closed) return;
    const pending = batch.filter((entry) => !entry.settled);
    if (pending.length === 0) return;
    // Each message fits alone (enqueue checked it); a batch that would not fit takes what does, the rest waits for the next loop.
    let taken = 1;
    while (taken < pending.length && encodeAgentPromptRequest({ request: runBody(pending.slice(0, taken + 1)) }).length <= this.maxMessageBytes) taken++;
    const live = pending.slice(0, taken);
    this.waiting.unshift(...pending.slice(taken));
    const body = runBody(live);
    const run = this.asks.agentRun({ request: body });
    this.run = run;
    this.hub.loopRunning = true;
    this.hub.changed();
    void (async () => {
      let first = true;
      for await (const message of run) {
        if (first) {
          first = false;
          if (message.variant === "Error") {
            for (const entry of live) entry.reject(new ContainerError({ variant: "Refused", what: "enqueue", error: message.error }));
            continue;
          }
          this.landing.push(...live.map((entry) => entry.key));
          for (const entry of live) entry.resolve("delivered");
        }
        if (message.variant === "Error") this.hub.emit({ type: "loopFailed", error: message.error });
        else this.relay(message.chunk);
      }
      const ending = await run.ended;
      if (first) {
        const error = ending.type === "done" ? new ContainerError({ variant: "NotServed", what: "/agent/run" }) : failure("/agent/run", ending, this.url);
        for (const entry of live) entry.reject(error);
      }
      this.run = undefined;
      this.landing.length = 0;
      this.hub.loopRunning = false;
      this.hub.changed();
      if (this.waiting.length > 0) this.startRun(this.waiting.splice(0));
    })();
  }

  /** One chunk of the stream: a typed chunk as it is; a paths-generation `user` chunk as its parts under the key that landed. */
  private relay(chunk: Record<string, unknown>): void {
    if (checkAgenticLoopChunk(chunk) === undefined) return this.hub.push(chunk as unknown as AgenticLoopChunk);
    if (chunk.type === "user" && Array.isArray(chunk.content)) {
      const key = this.landing.shift() ?? "";
      for (const block of chunk.content as ContentBlock[]) {
        const type = { text: "user_text_content", image: "user_image_content", audio: "user_audio_content", resource: "user_resource", resource_link: "user_resource_link" }[block.type as string];
        const part = type && { ...block, type, key };
        if (part && checkAgenticLoopChunk(part) === undefined) this.hub.push(part as unknown as AgenticLoopChunk);
      }
      return;
    }
    this.hub.emit({ type: "unreadableChunk", reason: checkAgenticLoopChunk(chunk) ?? "not a chunk" });
  }
}
