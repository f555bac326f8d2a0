// The proxy's one MCP client to the container's own MCP server, shared by the begin scope's MCP
// channels and the paths transport's `/tool/*`. The MCP SDK's client is loaded on first use (the
// proxy loads nothing heavy at start); until then nothing is dialled.
import type { Say } from "@diverge/multiplexer/log";
import type { ServerNotification } from "@modelcontextprotocol/sdk/types.js";
import type { ErrorData, ExchangeOptions, InwardExchange, InwardListener, InwardMcp, McpOutcome } from "./inward-mcp.js";

export class SharedInwardMcp {
  private made: InwardMcp | undefined;
  private making: Promise<InwardMcp> | undefined;
  private closed = false;

  constructor(
    private readonly url: URL,
    private readonly log: Say,
    /** The proxy's message limit (answers far past it are not read). */
    private readonly maxMessageBytes?: number,
  ) {}

  private client(): Promise<InwardMcp> {
    return (this.making ??= import("./inward-mcp.js").then(({ InwardMcp }) => {
      this.made = new InwardMcp(this.url, this.log, this.maxMessageBytes);
      if (this.closed) void this.made.close();
      return this.made;
    }));
  }

  /** Relays one exchange (see InwardMcp.exchange). */
  async exchange(exchange: InwardExchange, origin?: object, options?: ExchangeOptions): Promise<McpOutcome> {
    return (await this.client()).exchange(exchange, origin, options);
  }

  /** Subscribes to the server's notifications (see InwardMcp.subscribe). */
  async subscribe(listener: InwardListener | ((notification: ServerNotification) => void)): Promise<{ readonly error: ErrorData } | { readonly unsubscribe: () => void }> {
    return (await this.client()).subscribe(listener);
  }

  /** Sessions made so far with the container's server. */
  get sessionsMade(): number {
    return this.made?.sessionsMade ?? 0;
  }

  /** Notification subscriptions open now. */
  get subscriptions(): number {
    return this.made?.subscriptions ?? 0;
  }

  async close(): Promise<void> {
    this.closed = true;
    if (this.making) await (await this.making).close();
  }
}
