// The secrets gate as the provider sees it: a proxy holds every MCP exchange until the program has
// taken its secrets, so until they are fed an MCP wait names the gate, and the first MCP exchange
// asked meanwhile is reported once (a `heldForSecrets` event).
export class SecretsGate {
  private fed = false;
  private heldReported = false;

  /** The secrets were fed (the program answered `Fed`). */
  open(): void {
    this.fed = true;
  }

  /** What an MCP exchange waits for, with the secrets gate named while the secrets are not fed. */
  waitingFor(what: string): string {
    return this.fed
      ? `the container's MCP server to answer ${what} through the proxy`
      : `the container's MCP server to answer ${what} through the proxy; the secrets were never fed, and a proxy with the secrets gate (the default) holds every MCP exchange until feedSecrets resolves`;
  }

  /** Whether an MCP exchange asked now is the first one held for the secrets (true once). */
  heldNow(begun: boolean): boolean {
    if (this.fed || !begun || this.heldReported) return false;
    this.heldReported = true;
    return true;
  }
}
