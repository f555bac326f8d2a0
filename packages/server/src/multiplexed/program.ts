// The proxy's calls to the program's own HTTP server: `/register` for the begin, `/secrets` for a feed.
export type ProgramAnswer =
  | { readonly ok: true; readonly status: number; readonly body: string }
  | { readonly ok: false; readonly status?: number; readonly error: unknown };

/**
 * POSTs `json` to the program; a non-2xx answer or an unreachable program is `ok: false`. `signal`
 * aborts the call (the proxy is closing): a program that never answers must not hold the proxy open.
 */
export async function postToProgram(appPort: number, path: string, json: string, signal?: AbortSignal): Promise<ProgramAnswer> {
  let response: Response;
  let body: string;
  try {
    response = await fetch(`http://127.0.0.1:${appPort}${path}`, { method: "POST", headers: { "content-type": "application/json" }, body: json, signal });
    body = await response.text();
  } catch (error) {
    if (signal?.aborted) return { ok: false, error: { error: "the proxy is closing", reason: "aborted" } };
    return { ok: false, error: { error: `the program could not be reached on port ${appPort}`, reason: describeFailure(error) } };
  }
  if (response.ok) return { ok: true, status: response.status, body };
  return { ok: false, status: response.status, error: jsonOrText(body, response.status) };
}

/** The program's own words as JSON: its body when that is JSON, else the text under `error`. */
function jsonOrText(body: string, status: number): unknown {
  try {
    return JSON.parse(body);
  } catch {
    return { error: body || `the program answered HTTP ${status}`, status };
  }
}

function describeFailure(error: unknown): string {
  const cause = (error as { cause?: { code?: string } }).cause;
  return cause?.code ?? (error instanceof Error ? error.message : String(error));
}
