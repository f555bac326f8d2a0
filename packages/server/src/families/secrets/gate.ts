// The secrets gate: until the program has taken its secrets (the first `Fed`), the proxy holds every
// MCP exchange, inward and outward, and serves them in order once it opens. A held exchange whose
// asker is gone (its signal) leaves the queue at once: nothing waits for a gate on behalf of nobody.
// Secrets are fed only on the multiplexed transport (tools::begin Secrets); an exchange that cannot
// be fed (the paths transport's `/tool/*` with no provider begun on `/`) is answered at once with
// `gateError()` instead of being held (see mcp-inward/paths.ts).

/** Why a held exchange was given up: the asker's signal fired. */
export class GateAbandoned extends Error {
  override readonly name = "GateAbandoned";
  constructor(readonly reason: unknown) {
    super(typeof reason === "string" ? reason : reason instanceof Error ? reason.message : "the asker gave the exchange up while the secrets gate held it");
  }
}

/** The MCP error (-32603) of an exchange the gate holds and no provider can open: it names the gate and `--no-secrets-gate`. `data.reason` is `"secretsGate"`. */
export function gateError(where: string): { code: number; message: string; data: { reason: "secretsGate" } } {
  return {
    code: -32603,
    message:
      `the proxy's secrets gate holds every MCP exchange until the program has taken its secrets, and ${where} cannot feed them ` +
      "(secrets are fed only on the multiplexed transport, by a provider begun on /, e.g. diverge connect --secret-env NAME); " +
      "start the proxy with --no-secrets-gate if the program declares no secrets",
    data: { reason: "secretsGate" },
  };
}

export class Gate {
  private opened: boolean;
  /** In arrival order (a Set keeps insertion order), each removable when its asker gives up. */
  private readonly waiting = new Set<() => void>();

  private reported = false;

  /** `onFirstHold` is called once, when the first exchange is held (for the proxy's log). */
  constructor(
    open = false,
    private readonly onFirstHold?: () => void,
  ) {
    this.opened = open;
  }

  get isOpen(): boolean {
    return this.opened;
  }

  /** Exchanges held now. */
  get held(): number {
    return this.waiting.size;
  }

  open(): void {
    if (this.opened) return;
    this.opened = true;
    // In arrival order, so held exchanges proceed in the order they were made.
    const resumes = [...this.waiting];
    this.waiting.clear();
    for (const resume of resumes) resume();
  }

  /**
   * Resolves at once when open, else when the gate opens; callers resume in the order they waited.
   * With `signal`, rejects with GateAbandoned when it fires first, and the wait leaves the queue.
   */
  pass(signal?: AbortSignal): Promise<void> {
    if (this.opened) return Promise.resolve();
    if (signal?.aborted) return Promise.reject(new GateAbandoned(signal.reason));
    if (!this.reported) {
      this.reported = true;
      this.onFirstHold?.();
    }
    return new Promise((resolve, reject) => {
      const abandon = () => {
        this.waiting.delete(resume);
        reject(new GateAbandoned(signal!.reason));
      };
      const resume = () => {
        signal?.removeEventListener("abort", abandon);
        resolve();
      };
      this.waiting.add(resume);
      signal?.addEventListener("abort", abandon, { once: true });
    });
  }
}
