/**
 * The model lives behind an upstream: an OpenAI-compatible completions endpoint (vLLM, llama.cpp's server).
 * A batch is one request with `prompt` as an array; choices come back tagged with their index.
 *
 * node:http with a keep-alive agent rather than fetch: under bench:ledger's load undici's fetch (web streams,
 * a teed body per response) was 13% of the gateway's CPU profile, about 1 ms per upstream call.
 */
import http from 'node:http';
import https from 'node:https';
import { GpuError } from '../../errors/index.js';
import { UPSTREAM_TIMEOUT_MS } from '../limits.js';

export interface Upstream {
  readonly url: string;
  complete(model: string, prompts: string[], params: Record<string, unknown>, signal?: AbortSignal): Promise<string[]>;
  /** One request passed through as it is (chat completions, the model list); network failures throw GpuError. */
  forward(method: 'GET' | 'POST', path: string, body?: string, signal?: AbortSignal): Promise<{ status: number; text: string }>;
}

interface CompletionsResponse { choices?: { index?: number; text?: string }[] }

export class OpenAiCompletionsUpstream implements Upstream {
  private readonly target: URL;
  private readonly agent: http.Agent;

  constructor(readonly url: string, private readonly timeoutMs = UPSTREAM_TIMEOUT_MS) {
    this.target = new URL('/v1/completions', url);
    this.agent = new (this.target.protocol === 'https:' ? https.Agent : http.Agent)({ keepAlive: true });
  }

  async complete(model: string, prompts: string[], params: Record<string, unknown>, signal?: AbortSignal): Promise<string[]> {
    const { status, text } = await this.post(JSON.stringify({ ...params, model, prompt: prompts }), signal);
    if (status < 200 || status > 299) throw new GpuError(`upstream ${this.url} answered ${status}: ${text.slice(0, 200)}`);
    let body: CompletionsResponse;
    try {
      body = JSON.parse(text) as CompletionsResponse;
    } catch (err) {
      throw new GpuError(`upstream ${this.url} answered with invalid JSON: ${text.slice(0, 200)}`, { cause: err });
    }
    const out: string[] = new Array(prompts.length);
    for (const [i, c] of (body.choices ?? []).entries()) out[c.index ?? i] = c.text ?? '';
    if (out.filter((t) => t !== undefined).length !== prompts.length) {
      throw new GpuError(`upstream ${this.url} returned ${body.choices?.length ?? 0} choices for ${prompts.length} prompts`);
    }
    return out;
  }

  private post(body: string, signal?: AbortSignal): Promise<{ status: number; text: string }> {
    return this.forward('POST', this.target.pathname, body, signal);
  }

  forward(method: 'GET' | 'POST', pathname: string, body?: string, signal?: AbortSignal): Promise<{ status: number; text: string }> {
    const lib = this.target.protocol === 'https:' ? https : http;
    const target = pathname === this.target.pathname ? this.target : new URL(pathname, this.url);
    return new Promise((resolve, reject) => {
      const unreachable = (err: Error) => reject(new GpuError(`upstream ${this.url} unreachable: ${err.message}`, { cause: err }));
      const headers: Record<string, string | number> = body === undefined ? {} : { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) };
      const req = lib.request(target, { method, agent: this.agent, signal, headers }, (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => { clearTimeout(timer); resolve({ status: res.statusCode ?? 0, text: Buffer.concat(chunks).toString('utf8') }); });
        res.on('error', unreachable);
      });
      const timer = setTimeout(() => req.destroy(new Error(`no answer in ${this.timeoutMs} ms`)), this.timeoutMs);
      req.on('error', (err) => { clearTimeout(timer); unreachable(err); });
      req.end(body);
    });
  }
}
