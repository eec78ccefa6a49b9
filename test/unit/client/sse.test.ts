/** The SDK's event-stream parser: the WHATWG line rules in any chunking, and its caps against a hostile server. */
import { describe, expect, it } from 'vitest';
import { SmolProtocolError } from '../../../src/client/errors.js';
import { SseParser, sseEvents } from '../../../src/client/sse.js';

const enc = (s: string) => new TextEncoder().encode(s);

function parseSplit(text: string, at: number[]): ReturnType<SseParser['push']> {
  const p = new SseParser();
  const b = enc(text);
  const out = [];
  let prev = 0;
  for (const i of [...at, b.length]) {
    out.push(...p.push(b.subarray(prev, i)));
    prev = i;
  }
  return out;
}

describe('SseParser', () => {
  const stream = '\ufeffevent: stdout\r\ndata: {"data":"aGk="}\r\n\r\n: ping\n\nevent: exit\rdata: a\rdata: b\r\rdata:no-space\nid: 7\n\nevent: tail\ndata: cut';
  const want = [
    { event: 'stdout', data: '{"data":"aGk="}' },
    { event: 'exit', data: 'a\nb' },
    { event: 'message', data: 'no-space', id: '7' },
  ];

  it('reads LF, CRLF and CR line ends, comments, a BOM and multi-line data, and drops an unfinished event', () => {
    expect(parseSplit(stream, [])).toEqual(want);
  });

  it('gives the same events however the bytes are split (every single split point, and byte by byte)', () => {
    const n = enc(stream).length;
    for (let i = 0; i <= n; i++) expect(parseSplit(stream, [i]), `split at ${i}`).toEqual(want);
    expect(parseSplit(stream, Array.from({ length: n }, (_, i) => i))).toEqual(want);
  });

  it('refuses a line or an event over its cap instead of growing', () => {
    const p = new SseParser(16, 32);
    expect(() => p.push(enc('data: ' + 'x'.repeat(20)))).toThrow(SmolProtocolError);
    const q = new SseParser(16, 32);
    expect(() => q.push(enc('data: 0123456789\n'.repeat(3)))).toThrow(/larger than 32 bytes/);
    expect(() => new SseParser(16, 32).push(enc('data: 0123456789\n\n'.repeat(10)))).not.toThrow();
  });

  it('iterates a response body and cancels it when the caller stops early', async () => {
    let cancelled = false;
    const body = new ReadableStream<Uint8Array>({
      pull(c) { c.enqueue(enc('event: stdout\ndata: x\n\n')); },
      cancel() { cancelled = true; },
    });
    let n = 0;
    for await (const ev of sseEvents(body)) {
      expect(ev.event).toBe('stdout');
      if (++n === 3) break;
    }
    expect(cancelled).toBe(true);
  });
});
