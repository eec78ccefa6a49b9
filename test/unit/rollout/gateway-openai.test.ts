/** The OpenAI-shaped pieces of the gateway on their own: upstream error dialects, and SSE chunks with tool calls. */
import { describe, expect, it } from 'vitest';
import { fromUpstream, unknownUrl } from '../../../src/rollout/gateway/openai-errors.js';
import { chunksOf, sseBody } from '../../../src/rollout/gateway/sse.js';

describe('upstream errors as OpenAI error bodies', () => {
  it('reads OpenAI\'s nested error, vLLM\'s top-level one and plain text; 5xx becomes 502', () => {
    expect(fromUpstream(404, '{"error":{"message":"The model `x` does not exist","type":"invalid_request_error","param":"model","code":"model_not_found"}}', 'http://u'))
      .toEqual({ status: 404, body: { error: { message: 'The model `x` does not exist', type: 'invalid_request_error', param: 'model', code: 'model_not_found' } }, headers: { 'x-should-retry': 'false' } });
    const vllm = fromUpstream(400, '{"object":"error","message":"too long","type":"BadRequestError","param":null,"code":400}', 'http://u');
    expect(vllm.body.error).toEqual({ message: 'too long', type: 'invalid_request_error', param: null, code: null });
    const down = fromUpstream(503, 'Service Unavailable', 'http://u');
    expect(down.status).toBe(502);
    expect(down.body.error).toMatchObject({ type: 'server_error', code: 'upstream_error', message: 'upstream http://u answered 503: Service Unavailable' });
    expect(down.headers['x-should-retry']).toBe('true');
    const busy = fromUpstream(429, '{"error":{"message":"slow down"}}', 'http://u');
    expect([busy.status, busy.headers['retry-after'], busy.body.error.type]).toEqual([429, '1', 'requests']);
    expect(unknownUrl('DELETE', '/v1/files/f').body.error).toEqual({ message: 'Invalid URL (DELETE /v1/files/f)', type: 'invalid_request_error', param: null, code: 'unknown_url' });
  });
});

describe('a stored completion as OpenAI stream chunks', () => {
  const completion = {
    id: 'chatcmpl-1', object: 'chat.completion', created: 1, model: 'm', system_fingerprint: 'env',
    choices: [{ index: 0, finish_reason: 'tool_calls', message: { role: 'assistant', content: null, tool_calls: [{ id: 'call_1', type: 'function', function: { name: 'f', arguments: '{"a":1}' } }] } }],
    usage: { prompt_tokens: 3, completion_tokens: 4, total_tokens: 7 },
  };
  it('role first, each tool call with its index, the finish reason last, then usage with no choices', () => {
    const chunks = chunksOf(completion, true) as { choices: { delta: Record<string, unknown>; finish_reason: unknown }[]; usage: unknown }[];
    expect(chunks.map((c) => c.choices[0]?.delta ?? null)).toEqual([
      { role: 'assistant', content: '' },
      { tool_calls: [{ index: 0, id: 'call_1', type: 'function', function: { name: 'f', arguments: '{"a":1}' } }] },
      {},
      null,
    ]);
    expect(chunks[2].choices[0].finish_reason).toBe('tool_calls');
    expect(chunks.slice(0, 3).every((c) => c.usage === null)).toBe(true);
    expect(chunks[3]).toMatchObject({ choices: [], usage: completion.usage, object: 'chat.completion.chunk', id: 'chatcmpl-1' });
    expect(sseBody(completion, false).endsWith('}\n\ndata: [DONE]\n\n')).toBe(true);
    expect(sseBody(completion, false)).not.toContain('usage');
  });
});
