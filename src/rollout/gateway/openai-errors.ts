/**
 * Error bodies in the shape OpenAI's API answers with, `{error: {message, type, param, code}}`, so the
 * official clients raise their usual typed errors (BadRequestError, NotFoundError, RateLimitError, …) and
 * read `error.param` and `error.code` where they expect them. `x-should-retry` tells those clients whether a
 * retry can help: they otherwise retry every 409, 429 and 5xx.
 */
export interface OpenAiErrorBody { error: { message: string; type: string; param: string | null; code: string | null } }
export interface OpenAiErrorAnswer { status: number; body: OpenAiErrorBody; headers: Record<string, string> }

/** The `type` OpenAI uses for each status. */
function typeFor(status: number): string {
  if (status === 429) return 'requests';
  if (status >= 500) return 'server_error';
  return 'invalid_request_error';
}

export function openAiError(status: number, message: string, o: { param?: string | null; code?: string | null; type?: string; retry?: boolean; headers?: Record<string, string> } = {}): OpenAiErrorAnswer {
  const retry = o.retry ?? (status === 429 || status >= 500);
  return {
    status,
    body: { error: { message, type: o.type ?? typeFor(status), param: o.param ?? null, code: o.code ?? null } },
    headers: { 'x-should-retry': String(retry), ...o.headers },
  };
}

/** OpenAI's answer to a path or method it does not serve. */
export function unknownUrl(method: string, pathname: string): OpenAiErrorAnswer {
  return openAiError(404, `Invalid URL (${method} ${pathname})`, { code: 'unknown_url' });
}

/** OpenAI's answer to a body that is not JSON. */
export function notJson(): OpenAiErrorAnswer {
  return openAiError(400, 'We could not parse the JSON body of your request. The API expects a JSON payload (content-type: application/json), but what was sent was not valid JSON.', { code: 'invalid_json' });
}

/**
 * An OpenAI-compatible upstream's error, whatever its dialect (OpenAI's nested `error`, vLLM's and
 * llama.cpp's top-level `{object: "error", message, type, param, code}`, or plain text), as OpenAI's shape.
 * Client errors keep their status; upstream failures become 502 (the upstream, not the request, is at fault).
 */
export function fromUpstream(status: number, text: string, upstreamUrl: string): OpenAiErrorAnswer {
  let e: Record<string, unknown> = {};
  try {
    const j = JSON.parse(text) as Record<string, unknown>;
    e = (j.error && typeof j.error === 'object' ? j.error : j) as Record<string, unknown>;
  } catch {
    e = { message: text.trim().slice(0, 500) };
  }
  const str = (v: unknown) => (typeof v === 'string' && v ? v : null);
  const message = str(e.message) ?? `upstream answered ${status}`;
  if (status === 429) return openAiError(429, `upstream overloaded: ${message}`, { code: 'rate_limit_exceeded', headers: { 'retry-after': '1' } });
  if (status >= 400 && status < 500) return openAiError(status, message, { param: str(e.param), code: str(e.code), retry: false });
  return openAiError(502, `upstream ${upstreamUrl} answered ${status}: ${message}`, { code: 'upstream_error' });
}

/**
 * OpenAI's 401 for a request without a valid bearer token, with RFC 6750's `WWW-Authenticate`. The token
 * sent is never echoed back (OpenAI shows part of it; a gateway log or proxy should not see even that).
 */
export function unauthorized(why: 'missing' | 'wrong'): OpenAiErrorAnswer {
  const realm = 'Bearer realm="smol gateway"';
  if (why === 'missing') {
    return openAiError(401, 'You didn\'t provide an API key. Send the gateway token in an Authorization header using Bearer auth (i.e. Authorization: Bearer YOUR_TOKEN); smol workers read it from $SMOL_GATEWAY_TOKEN or --gateway-token-file.', {
      code: 'missing_api_key', headers: { 'www-authenticate': realm },
    });
  }
  return openAiError(401, 'Incorrect API key provided: the token is not in this gateway\'s --token-file.', {
    code: 'invalid_api_key', headers: { 'www-authenticate': `${realm}, error="invalid_token"` },
  });
}
