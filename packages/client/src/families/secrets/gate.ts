// The secrets gate as the provider sees it: a proxy holds every MCP exchange until the program has
// taken its secrets, so until they are fed an MCP wait names the gate, and the first MCP exchange
// asked meanwhile and left unanswered for a moment is reported once (a `heldForSecrets` event). The
// proxy does not say whether it has a gate: an MCP answer before any feed shows it has none
// (`--no-secrets-gate`), and from then on nothing names the gate.
export class SecretsGate {
  private fed = false;
  private heldReported = false;
  /** An MCP exchange was answered before any feed: this proxy has no gate (`--no-secrets-gate`). */
  private ungated = false;

  /** The secrets were fed (the program answered `Fed`). */
  open(): void {
    this.fed = true;
  }

  /** An MCP exchange was answered: if the secrets were not fed, the proxy has no gate, and none is named again. */
  answered(): void {
    if (!this.fed) this.ungated = true;
  }

  /** What an MCP exchange waits for, with the secrets gate named while the secrets are not fed. */
  waitingFor(what: string): string {
    return this.fed || this.ungated
      ? `the container's MCP server to answer ${what} through the proxy`
      : `the container's MCP server to answer ${what} through the proxy; the secrets were never fed, and a proxy with the secrets gate (the default) holds every MCP exchange until feedSecrets resolves`;
  }

  /** Whether an MCP exchange asked now is the first one held for the secrets (true once). */
  heldNow(begun: boolean): boolean {
    if (this.fed || this.ungated || !begun || this.heldReported) return false;
    this.heldReported = true;
    return true;
  }
}
