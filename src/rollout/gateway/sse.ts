/**
 * A stored chat completion as the server-sent events OpenAI streams: a first chunk per choice with the role,
 * content in pieces, tool calls, a last chunk with the finish reason, the usage chunk when
 * `stream_options.include_usage` asked for it, then `data: [DONE]`. The gateway answers only once the
 * completion is durable, so the stream replays a finished result (see docs/ledger.md).
 */

type Json = Record<string, unknown>;

/** Word-sized pieces, the grain a client sees from a token stream. */
function pieces(text: string): string[] {
  return text.match(/\s*\S+\s*|\s+/g) ?? [];
}

export function chunksOf(completion: Json, includeUsage: boolean): Json[] {
  const head = { id: completion.id, object: 'chat.completion.chunk', created: completion.created, model: completion.model, system_fingerprint: completion.system_fingerprint ?? null };
  const usage = includeUsage ? { usage: null } : {};
  const chunk = (index: number, delta: Json, finish: unknown = null): Json => ({ ...head, choices: [{ index, delta, logprobs: null, finish_reason: finish }], ...usage });
  const out: Json[] = [];
  const choices = Array.isArray(completion.choices) ? (completion.choices as Json[]) : [];
  choices.forEach((c, i) => {
    const index = typeof c.index === 'number' ? c.index : i;
    const msg = (c.message ?? {}) as Json;
    out.push(chunk(index, { role: msg.role ?? 'assistant', content: '' }));
    if (typeof msg.content === 'string') for (const p of pieces(msg.content)) out.push(chunk(index, { content: p }));
    if (typeof msg.refusal === 'string') out.push(chunk(index, { refusal: msg.refusal }));
    if (Array.isArray(msg.tool_calls)) {
      (msg.tool_calls as Json[]).forEach((t, k) => out.push(chunk(index, { tool_calls: [{ index: k, ...t }] })));
    }
    out.push(chunk(index, {}, c.finish_reason ?? 'stop'));
  });
  if (includeUsage) out.push({ ...head, choices: [], usage: completion.usage ?? null });
  return out;
}

/** The response body: one `data:` event per chunk, then `data: [DONE]`. */
export function sseBody(completion: Json, includeUsage: boolean): string {
  return chunksOf(completion, includeUsage).map((c) => `data: ${JSON.stringify(c)}\n\n`).join('') + 'data: [DONE]\n\n';
}
