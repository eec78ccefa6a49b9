/** Client side of the inference gateway API (v1), used by workers for GPU stages. */
import { SmolError, ExitCode } from '../errors/index.js';

export interface InferRequest {
  apiVersion: 'v1';
  requestId: string;
  rolloutId: string;
  idempotencyKey: string;
  model: { name: string; version: string };
  promptVersion: string;
  input: { ref: string; text: string };
  params: Record<string, unknown>;
  /** Absolute epoch ms; the gateway sheds the request once it passes. */
  deadline: number;
}

export interface InferResponse {
  apiVersion: 'v1';
  requestId: string;
  idempotencyKey: string;
  status: 'ok';
  replayed: boolean;
  output: { ref: string; text: string };
  timing: { queuedMs: number; upstreamMs: number; totalMs: number; batchSize: number };
  model: { name: string; version: string };
  environmentVersion: string;
}

/** A non-2xx answer; `retryAfterMs` is set for 429 overload answers. */
export class GatewayError extends SmolError {
  constructor(message: string, readonly status: number, readonly retryAfterMs: number | null, readonly body: unknown) {
    super(message, status === 429 || status >= 500 ? ExitCode.tempFail : ExitCode.failure);
  }
}

export async function infer(base: string, req: InferRequest, signal?: AbortSignal): Promise<InferResponse> {
  const res = await fetch(new URL('/v1/infer', base), {
    method: 'POST', headers: { 'content-type': 'application/json', 'idempotency-key': req.idempotencyKey }, body: JSON.stringify(req), signal,
  });
  const body = (await res.json().catch(() => null)) as { error?: { message?: string } } | null;
  if (res.ok) return body as unknown as InferResponse;
  const ra = res.headers.get('retry-after');
  throw new GatewayError(`gateway answered ${res.status}: ${body?.error?.message ?? res.statusText}`, res.status, ra ? Number(ra) * 1000 : null, body);
}
