// The secrets gate: until the program has taken its secrets (the first `Fed`), the proxy holds every
// MCP exchange, inward and outward, and serves them in order once it opens.

export class Gate {
  private opened: boolean;
  private readonly waiting: (() => void)[] = [];

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

  open(): void {
    if (this.opened) return;
    this.opened = true;
    // In arrival order, so held exchanges proceed in the order they were made.
    for (const resume of this.waiting.splice(0)) resume();
  }

  /** Resolves at once when open, else when the gate opens; callers resume in the order they waited. */
  pass(): Promise<void> {
    if (this.opened) return Promise.resolve();
    if (!this.reported) {
      this.reported = true;
      this.onFirstHold?.();
    }
    return new Promise((resolve) => this.waiting.push(resolve));
  }
}
