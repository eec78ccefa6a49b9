/**
 * The model lives behind an upstream: an OpenAI-compatible completions endpoint (vLLM, llama.cpp's server).
 * A batch is one request with `prompt` as an array; choices come back tagged with their index.
 */
import { GpuError } from '../../errors/index.js';

export interface Upstream {
  readonly url: string;
  complete(model: string, prompts: string[], params: Record<string, unknown>, signal?: AbortSignal): Promise<string[]>;
}

interface CompletionsResponse { choices?: { index?: number; text?: string }[] }

export class OpenAiCompletionsUpstream implements Upstream {
  constructor(readonly url: string, private readonly timeoutMs = 120_000) {}

  async complete(model: string, prompts: string[], params: Record<string, unknown>, signal?: AbortSignal): Promise<string[]> {
    const timeout = AbortSignal.timeout(this.timeoutMs);
    let res: Response;
    try {
      res = await fetch(new URL('/v1/completions', this.url), {
        method: 'POST', headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ ...params, model, prompt: prompts }),
        signal: signal ? AbortSignal.any([signal, timeout]) : timeout,
      });
    } catch (err) {
      throw new GpuError(`upstream ${this.url} unreachable: ${(err as Error).message}`, { cause: err });
    }
    if (!res.ok) throw new GpuError(`upstream ${this.url} answered ${res.status}: ${(await res.text()).slice(0, 200)}`);
    const body = (await res.json()) as CompletionsResponse;
    const out: string[] = new Array(prompts.length);
    for (const [i, c] of (body.choices ?? []).entries()) out[c.index ?? i] = c.text ?? '';
    if (out.filter((t) => t !== undefined).length !== prompts.length) {
      throw new GpuError(`upstream ${this.url} returned ${body.choices?.length ?? 0} choices for ${prompts.length} prompts`);
    }
    return out;
  }
}
