import { describe, expect, it } from 'vitest';
import { encodeFrame, encodeHeader, findHello, FrameDecoder, ProtocolError } from '../../../../src/vm/agent/codec.js';
import { encodeHello } from '../../../../src/vm/agent/payloads.js';
import { FrameType, HEADER_LENGTH, MAX_PAYLOAD } from '../../../../src/vm/agent/protocol.js';

const frame = (type: number, stream: number, payload: string, flags = 0) => encodeFrame(type, flags, stream, Buffer.from(payload));

describe('frame codec', () => {
  it('writes the documented little-endian header', () => {
    const h = encodeHeader(FrameType.data, 2, 0x8000_0001, 5);
    expect([...h]).toEqual([5, 0, 0, 0, FrameType.data, 2, 0, 0, 1, 0, 0, 0x80]);
  });

  it('round-trips frames, including empty and maximum payloads', () => {
    const big = Buffer.alloc(MAX_PAYLOAD, 7);
    const bytes = Buffer.concat([frame(FrameType.ping, 0, ''), encodeFrame(FrameType.data, 1, 9, big), frame(FrameType.eof, 9, '', 1)]);
    const frames = new FrameDecoder().push(bytes);
    expect(frames.map((f) => [f.type, f.flags, f.stream, f.payload.length])).toEqual([
      [FrameType.ping, 0, 0, 0],
      [FrameType.data, 1, 9, MAX_PAYLOAD],
      [FrameType.eof, 1, 9, 0],
    ]);
    expect(frames[1].payload.equals(big)).toBe(true);
  });

  it('reassembles frames split at every byte boundary', () => {
    const bytes = Buffer.concat([frame(FrameType.data, 3, 'hello', 1), frame(FrameType.data, 3, 'world', 2)]);
    for (let cut = 0; cut <= bytes.length; cut++) {
      const d = new FrameDecoder();
      const got = [...d.push(bytes.subarray(0, cut)), ...d.push(bytes.subarray(cut))];
      expect(got.map((f) => f.payload.toString())).toEqual(['hello', 'world']);
      expect(d.pending).toBe(0);
    }
  });

  it('decodes a byte-at-a-time stream', () => {
    const bytes = frame(FrameType.exit, 4, 'abcdefgh');
    const d = new FrameDecoder();
    const got = [];
    for (const b of bytes) got.push(...d.push(Buffer.from([b])));
    expect(got).toHaveLength(1);
    expect(got[0].payload.toString()).toBe('abcdefgh');
  });

  it('returns zero-copy views when a payload lies within one chunk', () => {
    const bytes = frame(FrameType.data, 1, 'xyz', 1);
    const [f] = new FrameDecoder().push(bytes);
    expect(f.payload.buffer).toBe(bytes.buffer);
  });

  it('rejects an oversize length before buffering the payload', () => {
    const h = Buffer.alloc(HEADER_LENGTH);
    h.writeUInt32LE(MAX_PAYLOAD + 1, 0);
    h.writeUInt8(FrameType.data, 4);
    expect(() => new FrameDecoder().push(h)).toThrow(/exceeds/);
  });

  it('rejects unknown frame types (0 and beyond the last opcode)', () => {
    for (const t of [0, FrameType.shutdown + 1, 255]) {
      const h = Buffer.alloc(HEADER_LENGTH);
      h.writeUInt8(t, 4);
      expect(() => new FrameDecoder().push(h)).toThrow(ProtocolError);
    }
  });

  it('rejects nonzero reserved header bits', () => {
    const f = frame(FrameType.ping, 0, '');
    f.writeUInt16LE(1, 6);
    expect(() => new FrameDecoder().push(f)).toThrow(/reserved/);
  });

  it('stays failed after a protocol error (the stream has lost sync)', () => {
    const d = new FrameDecoder();
    expect(() => d.push(Buffer.alloc(HEADER_LENGTH))).toThrow(ProtocolError);
    expect(() => d.push(frame(FrameType.ping, 0, ''))).toThrow(ProtocolError);
  });

  it('honours a smaller negotiated limit', () => {
    expect(() => new FrameDecoder(16).push(frame(FrameType.data, 1, 'x'.repeat(17), 1))).toThrow(/16-byte limit/);
  });

  it('refuses to encode an oversize payload', () => {
    expect(() => encodeHeader(FrameType.data, 0, 1, MAX_PAYLOAD + 1)).toThrow(ProtocolError);
  });

  it('finds a HELLO after stale bytes, and only a real one', () => {
    const hello = encodeFrame(FrameType.hello, 0, 0, encodeHello({ version: 1, capabilities: 0, maxPayload: MAX_PAYLOAD, window: 1, nonce: 1, name: 'x' }));
    const fakeMagic = encodeFrame(FrameType.data, 1, 5, Buffer.from('SMOL....'));
    expect(findHello(hello)).toBe(0);
    expect(findHello(Buffer.concat([fakeMagic, Buffer.from([1, 2, 3]), hello]))).toBe(fakeMagic.length + 3);
    expect(findHello(fakeMagic)).toBe(-1);
    expect(findHello(hello.subarray(0, 15))).toBe(-1);
  });
});
