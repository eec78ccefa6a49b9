/**
 * A bounded parser of `text/event-stream` (the WHATWG rules: LF, CRLF or CR line ends, `data:` lines joined by
 * LF, `:` comments, a BOM at the start ignored), for exec streams, logs and events. The server is trusted no
 * more than any peer: a line or an event over its cap is a SmolProtocolError, never unbounded memory.
 */
import { SmolProtocolError } from './errors.js';

export interface SseEvent { event: string; data: string; id?: string }

/** exec/stream sends ≤ 64 KiB of output a chunk as base64 in JSON (~88 KiB); this leaves room, and a ceiling. */
export const SSE_MAX_LINE = 8 * 1024 * 1024;
export const SSE_MAX_EVENT = 8 * 1024 * 1024;

const CR = 13;
const LF = 10;

export class SseParser {
  private buf: Uint8Array = new Uint8Array(0);
  private skipLf = false; // a chunk that ended in CR: an LF opening the next one belongs to it
  private first = true;
  private event = '';
  private data: string[] = [];
  private dataBytes = 0;
  private id: string | undefined;
  private readonly decoder = new TextDecoder();

  constructor(private readonly maxLine = SSE_MAX_LINE, private readonly maxEvent = SSE_MAX_EVENT) {}

  /** Feeds bytes split anywhere; returns the events they completed. */
  push(chunk: Uint8Array): SseEvent[] {
    const out: SseEvent[] = [];
    let bytes = this.buf.length ? concat(this.buf, chunk) : chunk;
    let start = 0;
    if (this.skipLf && bytes.length) {
      if (bytes[0] === LF) start = 1;
      this.skipLf = false;
    }
    for (let i = start; i < bytes.length; i++) {
      const b = bytes[i];
      if (b !== CR && b !== LF) continue;
      this.line(bytes.subarray(start, i), out);
      if (b === CR) {
        if (i + 1 < bytes.length) { if (bytes[i + 1] === LF) i++; } else this.skipLf = true;
      }
      start = i + 1;
    }
    bytes = bytes.subarray(start);
    if (bytes.length > this.maxLine) throw new SmolProtocolError(`event-stream line longer than ${this.maxLine} bytes`);
    this.buf = bytes.slice(); // a copy: the caller may reuse its chunk's memory
    return out;
  }

  /** The stream ended: a partial line or event with no blank line after it is dropped, as the spec says. */
  end(): void {
    this.buf = new Uint8Array(0);
    this.reset();
  }

  private line(raw: Uint8Array, out: SseEvent[]): void {
    if (raw.length > this.maxLine) throw new SmolProtocolError(`event-stream line longer than ${this.maxLine} bytes`);
    let text = this.decoder.decode(raw);
    if (this.first) {
      this.first = false;
      if (text.charCodeAt(0) === 0xfeff) text = text.slice(1);
    }
    if (text === '') {
      if (this.data.length) out.push({ event: this.event || 'message', data: this.data.join('\n'), ...(this.id !== undefined ? { id: this.id } : {}) });
      this.reset();
      return;
    }
    if (text.startsWith(':')) return;
    const colon = text.indexOf(':');
    const field = colon < 0 ? text : text.slice(0, colon);
    let value = colon < 0 ? '' : text.slice(colon + 1);
    if (value.startsWith(' ')) value = value.slice(1);
    if (field === 'event') this.event = value;
    else if (field === 'data') {
      this.dataBytes += raw.length;
      if (this.dataBytes > this.maxEvent) throw new SmolProtocolError(`event-stream event larger than ${this.maxEvent} bytes`);
      this.data.push(value);
    } else if (field === 'id' && !value.includes('\0')) this.id = value;
  }

  private reset(): void {
    this.event = '';
    this.data = [];
    this.dataBytes = 0;
  }
}

function concat(a: Uint8Array, b: Uint8Array): Uint8Array {
  const r = new Uint8Array(a.length + b.length);
  r.set(a, 0);
  r.set(b, a.length);
  return r;
}

/** The events of a response body, in order; the body is cancelled when the caller stops early. */
export async function* sseEvents(body: ReadableStream<Uint8Array>, parser = new SseParser()): AsyncGenerator<SseEvent> {
  const reader = body.getReader();
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) { parser.end(); return; }
      yield* parser.push(value);
    }
  } finally {
    await reader.cancel().catch(() => undefined);
  }
}
