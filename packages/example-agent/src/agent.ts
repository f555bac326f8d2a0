// The example agent program: the HTTP server an agent container's program runs beside the proxy
// (agents.md §8), with no model. `POST /register` takes the run's arguments and answers the tools it
// declares; `POST /run` runs a scripted loop over its messages and streams its chunks as
// `text/event-stream`; `POST /enqueue` holds a message until the loop takes it at a seam (or it is
// withdrawn, or the loop ends first); `POST /dequeue` withdraws held messages by key. The loop calls the
// provider's tools through the proxy's program-facing MCP endpoint with the MCP SDK's client.
//
// Beside the contract, `/example/*` lets a test watch and steer the loop (held messages, pauses), and
// misbehaviour modes make it answer the ways a broken program would.
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo, Socket } from "node:net";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import type { CallToolResult, ContentBlock } from "@modelcontextprotocol/sdk/types.js";
import { userPart, type AgenticLoopChunk } from "./chunks.js";
import { deltas, fragments, readMessage, Refusal, type Message, type Step } from "./script.js";

/** The folder holding this package's `DIVERGE.md`: a container root for tests and the demo. */
export const exampleAgentRoot = join(dirname(fileURLToPath(import.meta.url)), "..");

/** The proxy's program-facing MCP endpoint when nothing else is said: its default program port, 14980. */
export const DEFAULT_MCP_URL = "http://127.0.0.1:14980/mcp";

/** The JSON Schema of the arguments `/register` takes (also in DIVERGE.md's front matter). */
export const ARGUMENTS_SCHEMA = {
  type: "object",
  properties: {
    name: { type: "string", description: "What the agent calls itself in its reasoning. Default example-agent." },
    greeting: { type: "string", description: "When present, the agent declares the tool greeter (the example tool container) registered with this greeting." },
    misbehave: { type: "array", items: { type: "string" }, description: "Misbehaviour modes for this registration (see the package README)." },
  },
} as const;

/** Every misbehaviour mode but `exit-after:N`. */
export const MISBEHAVIOURS = [
  "register-5xx",
  "register-not-json",
  "register-bad-tools",
  "register-hang",
  "schema-5xx",
  "schema-not-json",
  "run-5xx",
  "run-not-sse",
  "run-hang",
  "garbage-sse",
  "unknown-chunk",
  "die-mid-stream",
  "enqueue-5xx",
  "enqueue-missed",
  "fate-garbage",
  "fate-not-json",
  "dequeue-5xx",
  "dequeue-garbage",
  "dequeue-not-json",
] as const;
export type Misbehaviour = (typeof MISBEHAVIOURS)[number] | `exit-after:${number}`;

interface Modes {
  readonly set: ReadonlySet<string>;
  readonly exitAfter: number | undefined;
}

/** Reads a list of modes (an array, or one string of comma-separated modes); throws on one it does not know. */
export function parseMisbehaviour(value: string | readonly string[] | undefined): Modes {
  const list = value === undefined ? [] : typeof value === "string" ? value.split(",") : value;
  const set = new Set<string>();
  let exitAfter: number | undefined;
  for (const raw of list) {
    const mode = raw.trim();
    if (mode === "") continue;
    const exit = /^exit-after:([0-9]+)$/.exec(mode);
    if (exit) {
      exitAfter = Number(exit[1]);
      if (!Number.isSafeInteger(exitAfter) || exitAfter < 1) throw new Error(`exit-after needs a count of 1 or more, not ${exit[1]}`);
      continue;
    }
    if (!(MISBEHAVIOURS as readonly string[]).includes(mode)) throw new Error(`unknown misbehaviour ${JSON.stringify(mode)}`);
    set.add(mode);
  }
  return { set, exitAfter };
}

/** The program's port as agents.md §8 reads `PORT`: a decimal 1–65535 with no surrounding whitespace, otherwise 8080. */
export function portFromEnv(value: string | undefined): number {
  if (value === undefined || !/^[0-9]+$/.test(value)) return 8080;
  const port = Number(value);
  return port >= 1 && port <= 65535 ? port : 8080;
}

export interface ExampleAgentOptions {
  /** Port of the program's HTTP server. Default 0 (a free one). */
  readonly port?: number;
  readonly host?: string;
  /** The proxy's program-facing MCP endpoint (a function when known later). Default `$DIVERGE_MCP_URL`, else {@link DEFAULT_MCP_URL}. */
  readonly mcpUrl?: string | URL | (() => string | URL);
  /** Secret names `/secrets` needs in a feed. Default `["API_KEY"]` (as DIVERGE.md declares). */
  readonly requiredSecrets?: readonly string[];
  /** Misbehaviour modes for the program's whole life (a register's `misbehave` adds to them). */
  readonly misbehave?: string | readonly string[];
  /**
   * What `exit-after:N` does once the Nth event is written: `"restart"` (default) drops every
   * connection and all state and listens again on the same port, as a supervised program that crashed
   * would; a function is called instead (the CLI exits the process).
   */
  readonly onExit?: "restart" | (() => void);
  readonly log?: (line: string) => void;
}

export interface ExampleAgent {
  readonly port: number;
  readonly url: string;
  /** The arguments `/register` took, once it has (`undefined` before). */
  readonly registered: unknown;
  /** Whether `/secrets` has taken a complete feed. */
  readonly fed: boolean;
  /** Whether a loop is running. */
  readonly running: boolean;
  /** Keys of the messages `/enqueue` holds, in arrival order. */
  readonly held: readonly string[];
  /** Labels of the pauses the loop waits at. */
  readonly paused: readonly string[];
  /** Loops started since the program (re)started. */
  readonly runs: number;
  /** Server-sent events written since the program (re)started. */
  readonly events: number;
  /** How many times `exit-after:N` restarted it. */
  readonly restarts: number;
  /** Every HTTP request the program was asked, in order, as `METHOD /path` (`restart` marks a restart). */
  readonly calls: readonly string[];
  /** Requests a `*-hang` mode holds unanswered right now. */
  readonly hanging: number;
  /** Resolves once `predicate(agent)` holds (checked now and after every change of state). */
  until(predicate: (agent: ExampleAgent) => boolean): Promise<void>;
  /** Resolves once no loop runs. */
  whenIdle(): Promise<void>;
  /** Resolves once at least `count` messages are held. */
  whenHeld(count?: number): Promise<void>;
  /** Resolves once the loop waits at a pause (with that label, when given). */
  whenPaused(label?: string): Promise<void>;
  /** Resolves once the program has restarted `count` times in all. */
  whenRestarted(count?: number): Promise<void>;
  /** Lets the loop go on from the pauses with that label (every pause when none); answers how many. */
  release(label?: string): number;
  /** Replaces the life-long misbehaviour modes. */
  misbehave(modes: string | readonly string[]): void;
  close(): Promise<void>;
}

/** A held `/enqueue`: answered exactly once. */
interface Held {
  readonly message: Message;
  readonly answer: (fate: "delivered" | "dequeued" | "missed") => void;
}

interface Pause {
  readonly label: string;
  readonly resume: () => void;
}

interface Registration {
  readonly arguments: unknown;
  readonly name: string;
  readonly modes: Modes;
}

/** Everything a restart forgets. */
interface Life {
  registration: Registration | undefined;
  secrets: Record<string, string> | undefined;
  run: Run | undefined;
  readonly held: Held[];
  readonly pauses: Pause[];
  runs: number;
  events: number;
  exiting: boolean;
}

interface Run {
  readonly index: number;
  readonly response: ServerResponse;
  readonly abort: AbortController;
  readonly work: Message[];
  calls: number;
  ended: boolean;
  /** The stream was broken on purpose (die-mid-stream): it is not ended cleanly. */
  broken: boolean;
  mcp: Client | undefined;
}

/** Thrown inside a loop to end it: the stream is over (ended, aborted, or the program is exiting). */
class LoopOver extends Error {}

const newLife = (): Life => ({ registration: undefined, secrets: undefined, run: undefined, held: [], pauses: [], runs: 0, events: 0, exiting: false });

export async function startExampleAgent(options: ExampleAgentOptions = {}): Promise<ExampleAgent> {
  const host = options.host ?? "127.0.0.1";
  const requiredSecrets = options.requiredSecrets ?? ["API_KEY"];
  const log = options.log ?? (() => {});
  let lifeModes = parseMisbehaviour(options.misbehave);
  let life = newLife();
  let restarts = 0;
  let closed = false;
  const calls: string[] = [];
  const sockets = new Set<Socket>();
  const waiters = new Set<() => boolean>();
  const changed = () => {
    for (const check of [...waiters]) if (check()) waiters.delete(check);
  };
  const until = (predicate: () => boolean, signal?: AbortSignal): Promise<void> =>
    new Promise((resolve, reject) => {
      const check = () => {
        if (!predicate()) return false;
        resolve();
        return true;
      };
      if (check()) return;
      if (signal?.aborted) return reject(new LoopOver("aborted"));
      waiters.add(check);
      signal?.addEventListener("abort", () => {
        waiters.delete(check);
        reject(new LoopOver("aborted"));
      });
    });

  const modes = (l: Life): Modes => {
    const extra = l.registration?.modes;
    if (!extra) return lifeModes;
    return { set: new Set([...lifeModes.set, ...extra.set]), exitAfter: lifeModes.exitAfter ?? extra.exitAfter };
  };
  const has = (l: Life, mode: string) => modes(l).set.has(mode);

  const mcpUrl = (): URL => {
    const given = typeof options.mcpUrl === "function" ? options.mcpUrl() : options.mcpUrl;
    return new URL(given ?? process.env.DIVERGE_MCP_URL ?? DEFAULT_MCP_URL);
  };

  // ---- the exit of exit-after:N ----------------------------------------------------------------------

  /** Called once the Nth event has been flushed; `l.exiting` is already set. */
  const exit = (l: Life) => {
    log(`exiting after ${l.events} events (exit-after)`);
    if (typeof options.onExit === "function") {
      options.onExit();
      changed();
      return;
    }
    void restart(l);
  };

  // ---- the loop ------------------------------------------------------------------------------------

  const write = async (l: Life, run: Run, text: string): Promise<void> => {
    if (run.ended || run.abort.signal.aborted || l.exiting) throw new LoopOver("the stream is over");
    const exitAfter = modes(l).exitAfter;
    l.events += 1;
    if (exitAfter !== undefined && l.events >= exitAfter) {
      // Like a process that dies: nothing more is written or answered, the stream is not ended.
      l.exiting = true;
      run.response.write(text, () => exit(l));
      throw new LoopOver("exiting");
    }
    if (run.response.write(text)) return;
    await new Promise<void>((resolve) => {
      const done = () => {
        run.response.off("drain", done);
        run.response.off("close", done);
        resolve();
      };
      run.response.on("drain", done);
      run.response.on("close", done);
    });
  };
  const emit = (l: Life, run: Run, chunk: AgenticLoopChunk) => write(l, run, `data: ${JSON.stringify(chunk)}\n\n`);

  /** Answers a held message's fate (the fate modes apply) and forgets it. */
  const hold = (l: Life, message: Message, response: ServerResponse): void => {
    let answered = false;
    const entry: Held = {
      message,
      answer: (fate) => {
        if (answered) return;
        answered = true;
        const at = l.held.indexOf(entry);
        if (at >= 0) l.held.splice(at, 1);
        log(`fate of ${message.key}: ${fate}`);
        sendFate(l, response, fate);
        changed();
      },
    };
    l.held.push(entry);
    response.on("close", () => {
      // The caller gave up: the message was never taken.
      if (answered) return;
      answered = true;
      const at = l.held.indexOf(entry);
      if (at >= 0) l.held.splice(at, 1);
      changed();
    });
    changed();
  };

  const sendFate = (l: Life, response: ServerResponse, fate: string) => {
    if (response.destroyed) return;
    if (has(l, "fate-not-json")) return sendText(response, 200, `${fate}, more or less`);
    if (has(l, "fate-garbage")) return sendJson(response, 200, { type: "arrived", fate });
    sendJson(response, 200, { type: fate });
  };

  /**
   * A seam: the loop takes every held message, in arrival order. Each lands as its user parts, then
   * its `/enqueue` answers delivered; one the stream ended before it landed misses the loop.
   */
  const seam = async (l: Life, run: Run) => {
    const taken = l.held.splice(0);
    if (taken.length > 0) changed();
    for (const [at, entry] of taken.entries()) {
      try {
        for (const block of entry.message.content) await emit(l, run, userPart(entry.message.key, block));
      } catch (error) {
        if (!l.exiting) for (const missed of taken.slice(at)) missed.answer("missed");
        throw error;
      }
      entry.answer("delivered");
      run.work.push(entry.message);
    }
  };

  const client = async (run: Run): Promise<Client> => {
    if (run.mcp) return run.mcp;
    const mcp = new Client({ name: "example-agent", version: "2.3.0" });
    await mcp.connect(new StreamableHTTPClientTransport(mcpUrl()));
    run.mcp = mcp;
    return mcp;
  };
  // No timeouts on the protocol's side: the longest the SDK's timer allows, and the loop's signal.
  const noTimeout = (run: Run) => ({ signal: run.abort.signal, timeout: 2_147_483_647 });

  const callTool = async (run: Run, name: string, args: Record<string, unknown>): Promise<CallToolResult> => {
    try {
      const mcp = await client(run);
      return (await mcp.callTool({ name, arguments: args }, undefined, noTimeout(run))) as CallToolResult;
    } catch (error) {
      if (run.abort.signal.aborted) throw new LoopOver("aborted");
      return { content: [{ type: "text", text: `the tool call failed: ${(error as Error).message}` }], isError: true };
    }
  };

  const turn = async (l: Life, run: Run, message: Message, name: string) => {
    let completion = 0;
    const say = async (type: "assistant_reasoning" | "assistant_text_content" | "assistant_refusal", text: string, parent?: string) => {
      for (const delta of deltas(text)) {
        await emit(l, run, parent === undefined ? { type, text: delta } : { type, parent_tool_call_id: parent, text: delta });
        completion += 1;
      }
    };
    const steps = message.steps.length;
    await say("assistant_reasoning", `${name} reads the message under ${JSON.stringify(message.key)}: ${steps} step${steps === 1 ? "" : "s"}.`);
    if (has(l, "die-mid-stream")) {
      log("die-mid-stream: breaking the stream");
      // What was written goes out, then the connection ends with the chunked body unfinished.
      run.broken = true;
      run.response.socket?.end();
      throw new LoopOver("died");
    }
    for (const step of message.steps) await perform(l, run, step, say, () => (completion += 1));
    const prompt = promptTokens(message.content);
    await emit(l, run, { type: "usage", completion_tokens: completion, prompt_tokens: prompt, total_tokens: completion + prompt });
    await seam(l, run);
  };

  const perform = async (
    l: Life,
    run: Run,
    step: Step,
    say: (type: "assistant_reasoning" | "assistant_text_content" | "assistant_refusal", text: string, parent?: string) => Promise<void>,
    count: () => void,
  ) => {
    switch (step.kind) {
      case "say":
        return say("assistant_text_content", `You said: ${step.text}`);
      case "describe":
        return say("assistant_text_content", step.text);
      case "tool": {
        run.calls += 1;
        const id = `call_${run.index}_${run.calls}`;
        for (const fragment of fragments(JSON.stringify(step.arguments))) {
          await emit(l, run, { type: "assistant_tool_call", id, name: step.name, arguments: fragment });
          count();
        }
        const result = await callTool(run, step.name, step.arguments);
        await emit(l, run, {
          type: "tool_response",
          id,
          content: result.content ?? [],
          ...(result.structuredContent !== undefined ? { structuredContent: result.structuredContent } : {}),
          ...(result.isError !== undefined ? { isError: result.isError } : {}),
          ...(result._meta !== undefined ? { _meta: result._meta } : {}),
        });
        await say("assistant_text_content", `${step.name} ${result.isError ? "failed" : "answered"}: ${textOf(result.content ?? [])}`);
        return seam(l, run);
      }
      case "spawn": {
        // A sub-agent of its own (no MCP): its chunks carry the spawning call's id.
        run.calls += 1;
        const id = `call_${run.index}_${run.calls}`;
        for (const fragment of fragments(JSON.stringify({ task: step.task }))) {
          await emit(l, run, { type: "assistant_tool_call", id, name: "subagent", arguments: fragment });
          count();
        }
        await say("assistant_reasoning", `The sub-agent works on ${step.task}.`, id);
        await say("assistant_text_content", `Done: ${step.task}.`, id);
        await emit(l, run, { type: "tool_response", id, content: [{ type: "text", text: `Done: ${step.task}.` }] });
        return seam(l, run);
      }
      case "tools": {
        let text: string;
        try {
          const listed = await (await client(run)).listTools(undefined, noTimeout(run));
          text = `The provider's tools: ${listed.tools.map((tool) => tool.name).join(", ") || "none"}.`;
        } catch (error) {
          if (run.abort.signal.aborted) throw new LoopOver("aborted");
          text = `The tools could not be listed: ${(error as Error).message}`;
        }
        return say("assistant_text_content", text);
      }
      case "pause": {
        await emit(l, run, { type: "notification", is_fatal: false, message: { paused: step.label } });
        let resumed = false;
        const pause: Pause = {
          label: step.label,
          resume: () => {
            resumed = true;
            changed();
          },
        };
        l.pauses.push(pause);
        changed();
        try {
          await until(() => resumed, run.abort.signal);
        } finally {
          l.pauses.splice(l.pauses.indexOf(pause), 1);
        }
        return;
      }
      case "sleep":
        await new Promise<void>((resolve, reject) => {
          const timer = setTimeout(resolve, step.ms);
          run.abort.signal.addEventListener("abort", () => {
            clearTimeout(timer);
            reject(new LoopOver("aborted"));
          });
        });
        return;
      case "burst":
        // As fast as the stream takes them (only the socket's backpressure waits): for benchmarks.
        for (let n = 0; n < step.count; n++) {
          await emit(l, run, { type: "assistant_text_content", text: `${n} ` });
          count();
        }
        return;
      case "seam":
        return seam(l, run);
      case "notify":
        return emit(l, run, { type: "notification", is_fatal: false, message: step.text });
      case "refusal":
        return say("assistant_refusal", step.text);
      case "image":
        count();
        return emit(l, run, { type: "assistant_image_content", data: PIXEL_PNG, mimeType: "image/png" });
      case "audio":
        count();
        return emit(l, run, { type: "assistant_audio_content", data: SILENCE_WAV, mimeType: "audio/wav" });
      case "fatal":
        await emit(l, run, { type: "notification", is_fatal: true, message: step.text });
        throw new LoopOver("fatal");
      case "stop":
        throw new LoopOver("stop");
    }
  };

  const loop = async (l: Life, run: Run, messages: readonly Message[]) => {
    const name = l.registration?.name ?? "example-agent";
    try {
      for (const message of messages) for (const block of message.content) await emit(l, run, userPart(message.key, block));
      if (has(l, "garbage-sse") || has(l, "unknown-chunk")) {
        const garbage = has(l, "garbage-sse") ? GARBAGE_EVENTS : UNKNOWN_CHUNK_EVENTS;
        for (const event of garbage) await write(l, run, event);
        return;
      }
      run.work.push(...messages);
      for (let message = run.work.shift(); message !== undefined; message = run.work.shift()) await turn(l, run, message, name);
    } catch (error) {
      if (!(error instanceof LoopOver)) {
        log(`the loop failed: ${(error as Error).stack ?? String(error)}`);
        // A failure after output is a fatal notification, then the stream ends (never an error).
        await emit(l, run, { type: "notification", is_fatal: true, message: `the example agent failed: ${(error as Error).message}` }).catch(() => {});
      }
    } finally {
      finish(l, run);
    }
  };

  /** The loop is over: every message still held missed it, and the stream ends. */
  const finish = (l: Life, run: Run) => {
    if (run.ended) return;
    run.ended = true;
    if (l.run === run) l.run = undefined;
    if (!l.exiting) {
      for (const entry of l.held.slice()) entry.answer("missed");
      if (!run.response.destroyed && !run.broken) run.response.end();
    }
    const mcp = run.mcp;
    run.mcp = undefined;
    void mcp?.close().catch(() => {});
    log(`loop ${run.index} over`);
    changed();
  };

  // ---- the routes ----------------------------------------------------------------------------------

  let hanging = 0;
  /** Answers nothing until the caller gives up. */
  const hang = (response: ServerResponse): void => {
    hanging += 1;
    changed();
    response.on("close", () => {
      hanging -= 1;
      changed();
    });
  };

  const register = async (l: Life, request: IncomingMessage, response: ServerResponse) => {
    const body = await readJson(request);
    if (!isObject(body)) return sendJson(response, 400, { kind: "bad-request", error: "the body is not a JSON object" });
    if (l.registration) return sendJson(response, 409, { kind: "registered" });
    const args = body.arguments ?? null;
    let registration: Registration;
    try {
      registration = readArguments(args);
    } catch (error) {
      return sendJson(response, 422, { kind: "arguments", error: (error as Error).message });
    }
    const set = new Set([...lifeModes.set, ...registration.modes.set]);
    if (set.has("register-hang")) return hang(response);
    if (set.has("register-5xx")) return sendText(response, 500, "the example agent failed to register (register-5xx)");
    if (set.has("register-not-json")) return sendText(response, 200, "registered, sort of");
    if (set.has("register-bad-tools")) return sendJson(response, 200, { tools: { greeter: true } });
    l.registration = registration;
    changed();
    const greeting = isObject(args) && typeof args.greeting === "string" ? args.greeting : undefined;
    sendJson(response, 200, { tools: greeting === undefined ? [] : [greeterTool(greeting)] });
  };

  const schema = (l: Life, response: ServerResponse) => {
    if (has(l, "schema-5xx")) return sendText(response, 500, "the example agent has no schema today (schema-5xx)");
    if (has(l, "schema-not-json")) return sendText(response, 200, "type: object");
    sendJson(response, 200, ARGUMENTS_SCHEMA);
  };

  const secrets = async (l: Life, request: IncomingMessage, response: ServerResponse) => {
    const values = await readJson(request);
    if (!isObject(values)) return sendJson(response, 400, { error: "the feed is not a JSON object" });
    const missing = requiredSecrets.filter((name) => typeof values[name] !== "string" || values[name] === "");
    // The refusal names what is missing, never a value.
    if (missing.length > 0) return sendJson(response, 422, { error: "missing secrets", missing });
    l.secrets = values as Record<string, string>;
    changed();
    sendJson(response, 200, { fed: true });
  };

  const run = async (l: Life, request: IncomingMessage, response: ServerResponse) => {
    const body = await readJson(request);
    if (!isObject(body) || !Array.isArray(body.messages)) return sendJson(response, 400, { kind: "bad-request", error: 'the body is not {"messages": […]}' });
    if (!l.registration) return sendJson(response, 409, { kind: "unregistered" });
    if (l.run) return sendJson(response, 409, { kind: "running", error: "a loop is already running" });
    if (body.messages.length === 0) return sendJson(response, 400, { kind: "bad-request", error: "no message to run on" });
    let messages: Message[];
    try {
      messages = body.messages.map((message, at) => readMessage(message, `message ${at}`));
    } catch (error) {
      return refuse(response, error);
    }
    if (has(l, "run-hang")) return hang(response);
    if (has(l, "run-5xx")) return sendText(response, 500, "the example agent could not start a loop (run-5xx)");
    if (has(l, "run-not-sse")) return sendJson(response, 200, { started: true });
    l.runs += 1;
    const current: Run = { index: l.runs, response, abort: new AbortController(), work: [], calls: 0, ended: false, broken: false, mcp: undefined };
    l.run = current;
    response.on("close", () => {
      if (!current.ended) {
        log(`loop ${current.index}: the caller left`);
        current.abort.abort();
        finish(l, current);
      }
    });
    response.writeHead(200, { "content-type": "text/event-stream", "cache-control": "no-cache" });
    response.flushHeaders();
    log(`loop ${current.index} on ${messages.map((message) => message.key).join(", ")}`);
    changed();
    await loop(l, current, messages);
  };

  const enqueue = async (l: Life, request: IncomingMessage, response: ServerResponse) => {
    const body = await readJson(request);
    let message: Message;
    try {
      message = readMessage(body);
    } catch (error) {
      return refuse(response, error);
    }
    if (has(l, "enqueue-5xx")) return sendText(response, 503, "the example agent cannot take messages now (enqueue-5xx)");
    if (has(l, "enqueue-missed") || !l.run) return sendFate(l, response, "missed");
    hold(l, message, response);
  };

  const dequeue = async (l: Life, request: IncomingMessage, response: ServerResponse) => {
    const body = await readJson(request);
    // `{}` is the paths generation's dequeue (`/agent/dequeue` relays it): every held message.
    const all = isObject(body) && Object.keys(body).length === 0;
    if (!all && (!isObject(body) || typeof body.key !== "string")) return sendJson(response, 400, { kind: "bad-request", error: 'the body is not {"key": string} (or {}: every held message)' });
    if (has(l, "dequeue-5xx")) return sendText(response, 500, "the example agent lost track of its messages (dequeue-5xx)");
    const withdrawn = l.held.filter((entry) => all || entry.message.key === (body as { key: string }).key);
    for (const entry of withdrawn) entry.answer("dequeued");
    const outcome = withdrawn.length > 0 ? "dequeued" : "empty";
    if (has(l, "dequeue-not-json")) return sendText(response, 200, `${outcome}!`);
    if (has(l, "dequeue-garbage")) return sendJson(response, 200, { type: "perhaps", outcome });
    sendJson(response, 200, { type: outcome });
  };

  const state = (l: Life) => ({
    registered: l.registration !== undefined,
    arguments: l.registration?.arguments,
    fed: l.secrets !== undefined,
    running: l.run !== undefined,
    held: l.held.map((entry) => entry.message.key),
    paused: l.pauses.map((pause) => pause.label),
    runs: l.runs,
    events: l.events,
    restarts,
    hanging,
  });

  const release = (label?: string): number => {
    const chosen = life.pauses.filter((pause) => label === undefined || pause.label === label);
    for (const pause of chosen) pause.resume();
    return chosen.length;
  };

  /** `/example/*`: watch and steer the loop from a test (the proxy never calls these). */
  const control = async (path: string, request: IncomingMessage, response: ServerResponse) => {
    const url = new URL(request.url ?? "/", "http://program");
    const gone = new AbortController();
    response.on("close", () => gone.abort());
    const wait = async (predicate: () => boolean) => {
      try {
        await until(predicate, gone.signal);
      } catch {
        return false;
      }
      return true;
    };
    if (path === "/example/state" && request.method === "GET") return sendJson(response, 200, state(life));
    if (path === "/example/held" && request.method === "GET") {
      const count = Number(url.searchParams.get("count") ?? "1");
      if (await wait(() => life.held.length >= count)) sendJson(response, 200, state(life));
      return;
    }
    if (path === "/example/paused" && request.method === "GET") {
      const label = url.searchParams.get("label");
      if (await wait(() => life.pauses.some((pause) => label === null || pause.label === label))) sendJson(response, 200, state(life));
      return;
    }
    if (path === "/example/release" && request.method === "POST") {
      const body = await readJson(request);
      const label = isObject(body) && typeof body.label === "string" ? body.label : undefined;
      return sendJson(response, 200, { released: release(label) });
    }
    response.writeHead(404).end();
  };

  const http: Server = createServer((request, response) => {
    const path = new URL(request.url ?? "/", "http://program").pathname;
    const l = life;
    calls.push(`${request.method} ${path}`);
    const route = async () => {
      if (path === "/register" && request.method === "POST") return register(l, request, response);
      if (path === "/schema" && request.method === "GET") return schema(l, response);
      if (path === "/secrets" && request.method === "POST") return secrets(l, request, response);
      if (path === "/run" && request.method === "POST") return run(l, request, response);
      if (path === "/enqueue" && request.method === "POST") return enqueue(l, request, response);
      if (path === "/dequeue" && request.method === "POST") return dequeue(l, request, response);
      if (path.startsWith("/example/")) return control(path, request, response);
      const known = ["/register", "/schema", "/secrets", "/run", "/enqueue", "/dequeue"].includes(path);
      response.writeHead(known ? 405 : 404).end();
    };
    route().catch((error: unknown) => {
      if (!response.headersSent) sendJson(response, 400, { kind: "bad-request", error: (error as Error).message });
      else response.end();
    });
  });
  http.on("connection", (socket: Socket) => {
    sockets.add(socket);
    socket.on("close", () => sockets.delete(socket));
  });

  const listen = (port: number) =>
    new Promise<void>((resolve, reject) => {
      const failed = (error: Error) => reject(error);
      http.once("error", failed);
      http.listen(port, host, () => {
        http.off("error", failed);
        resolve();
      });
    });
  await listen(options.port ?? 0);
  const port = (http.address() as AddressInfo).port;

  const shut = async () => {
    const stopped = new Promise<void>((resolve) => http.close(() => resolve()));
    for (const socket of sockets) socket.destroy();
    http.closeAllConnections();
    await stopped;
  };

  async function restart(old: Life): Promise<void> {
    old.run?.abort.abort();
    await shut();
    if (closed) return;
    life = newLife();
    restarts += 1;
    calls.push("restart");
    await listen(port);
    log(`restarted on port ${port}`);
    changed();
  }

  const agent: ExampleAgent = {
    port,
    url: `http://${host.includes(":") ? `[${host}]` : host}:${port}`,
    get registered() {
      return life.registration?.arguments;
    },
    get fed() {
      return life.secrets !== undefined;
    },
    get running() {
      return life.run !== undefined;
    },
    get held() {
      return life.held.map((entry) => entry.message.key);
    },
    get paused() {
      return life.pauses.map((pause) => pause.label);
    },
    get runs() {
      return life.runs;
    },
    get events() {
      return life.events;
    },
    get restarts() {
      return restarts;
    },
    get hanging() {
      return hanging;
    },
    calls,
    until: (predicate) => until(() => predicate(agent)),
    whenIdle: () => until(() => life.run === undefined),
    whenHeld: (count = 1) => until(() => life.held.length >= count),
    whenPaused: (label?: string) => until(() => life.pauses.some((pause) => label === undefined || pause.label === label)),
    whenRestarted: (count = 1) => until(() => restarts >= count),
    release,
    misbehave(value) {
      lifeModes = parseMisbehaviour(value);
    },
    async close() {
      closed = true;
      life.run?.abort.abort();
      if (http.listening) await shut();
    },
  };
  return agent;
}

// ---- helpers -----------------------------------------------------------------------------------------

function readArguments(args: unknown): Registration {
  if (args !== null && !isObject(args)) throw new Error("the arguments must be an object (or null)");
  const given = args ?? {};
  if (given.name !== undefined && typeof given.name !== "string") throw new Error("name must be a string");
  if (given.greeting !== undefined && typeof given.greeting !== "string") throw new Error("greeting must be a string");
  if (given.misbehave !== undefined && (!Array.isArray(given.misbehave) || !given.misbehave.every((mode) => typeof mode === "string"))) {
    throw new Error("misbehave must be an array of strings");
  }
  const modes = parseMisbehaviour(given.misbehave as string[] | undefined);
  return { arguments: args, name: (given.name as string | undefined) ?? "example-agent", modes };
}

/** The tool container the agent declares when registered with a greeting (the example container's image). */
function greeterTool(greeting: string) {
  return {
    name: "greeter",
    image: { name: "diverge/example-greeter", digest: "sha256:0000000000000000000000000000000000000000000000000000000000000000" },
    memory: 268435456,
    disk: 67108864,
    arguments: { greeting },
    instructions: `Call greet with a name; it answers "${greeting}, <name>!".`,
  };
}

function promptTokens(content: readonly ContentBlock[]): number {
  let count = 0;
  for (const block of content) count += block.type === "text" ? (block.text.match(/\S+/g) ?? []).length : 1;
  return count;
}

function textOf(content: readonly unknown[]): string {
  const text = content
    .filter((block): block is { type: "text"; text: string } => isObject(block) && block.type === "text" && typeof block.text === "string")
    .map((block) => block.text)
    .join(" ");
  return text.length > 200 ? `${text.slice(0, 200)}…` : text || "(no text)";
}

function refuse(response: ServerResponse, error: unknown): void {
  if (error instanceof Refusal) return sendJson(response, 422, { kind: "refused", error: error.message });
  if (error instanceof TypeError) return sendJson(response, 400, { kind: "bad-request", error: error.message });
  throw error;
}


async function readJson(request: IncomingMessage): Promise<unknown> {
  const chunks: Buffer[] = [];
  for await (const chunk of request) chunks.push(chunk as Buffer);
  const text = Buffer.concat(chunks).toString("utf8");
  if (text === "") return undefined;
  try {
    return JSON.parse(text);
  } catch {
    throw new Error("the body is not JSON");
  }
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

function sendJson(response: ServerResponse, status: number, value: unknown): void {
  response.writeHead(status, { "content-type": "application/json" }).end(JSON.stringify(value));
}

function sendText(response: ServerResponse, status: number, text: string): void {
  response.writeHead(status, { "content-type": "text/plain; charset=utf-8" }).end(text);
}

/** Events whose data is not JSON (garbage-sse). */
const GARBAGE_EVENTS = ["data: this is not JSON\n\n", 'data: {"type":"assistant_text_content","text":\n\n', "data: \n\n"];

/** Events whose data is JSON but not one of the fourteen chunks (unknown-chunk). */
const UNKNOWN_CHUNK_EVENTS = [
  'data: {"type":"no_such_chunk","text":"?"}\n\n',
  "data: [1,2,3]\n\n",
  'data: {"type":"usage","completion_tokens":"many"}\n\n',
  'data: "a string"\n\n',
];

/** A 1×1 PNG. */
const PIXEL_PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==";

/** A WAV of one silent 8-bit sample at 8 kHz. */
const SILENCE_WAV = (() => {
  const wav = Buffer.alloc(45);
  wav.write("RIFF", 0, "ascii");
  wav.writeUInt32LE(37, 4);
  wav.write("WAVEfmt ", 8, "ascii");
  wav.writeUInt32LE(16, 16);
  wav.writeUInt16LE(1, 20);
  wav.writeUInt16LE(1, 22);
  wav.writeUInt32LE(8000, 24);
  wav.writeUInt32LE(8000, 28);
  wav.writeUInt16LE(1, 32);
  wav.writeUInt16LE(8, 34);
  wav.write("data", 36, "ascii");
  wav.writeUInt32LE(1, 40);
  wav.writeUInt8(128, 44);
  return wav.toString("base64");
})();
