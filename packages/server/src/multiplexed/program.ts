// The proxy's calls to the program's own HTTP server: `/register` for the begin, `/secrets` for a feed.
export type ProgramAnswer =
  | { readonly ok: true; readonly status: number; readonly body: string }
  | { readonly ok: false; readonly status?: number; readonly error: unknown };

/** POSTs `json` to the program; a non-2xx answer or an unreachable program is `ok: false`. */
export async function postToProgram(appPort: number, path: string, json: string): Promise<ProgramAnswer> {
  let response: Response;
  try {
    response = await fetch(`http://127.0.0.1:${appPort}${path}`, { method: "POST", headers: { "content-type": "application/json" }, body: json });
  } catch (error) {
    return { ok: false, error: { error: `the program could not be reached on port ${appPort}`, reason: describeFailure(error) } };
  }
  const body = await response.text();
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
