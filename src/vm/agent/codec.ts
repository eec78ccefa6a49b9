/**
 * Frame codec for the agent protocol: pure functions and a streaming decoder, no I/O.
 * Header (12 bytes, little-endian): u32 payload length, u8 type, u8 flags, u16 reserved (0), u32 stream.
 */
import { FrameType, HEADER_LENGTH, HELLO_MAGIC, HELLO_MIN, HELLO_NAME_MAX, LAST_FRAME_TYPE, Layout, MAX_PAYLOAD } from './protocol.js';

const H = Layout.header.at;

export interface Frame {
  type: number;
  flags: number;
  stream: number;
  payload: Buffer;
}

/** The peer broke the framing or a payload's layout. The client turns it into a GuestChannelError. */
export class ProtocolError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'ProtocolError';
  }
}

export function encodeHeader(type: number, flags: number, stream: number, length: number): Buffer {
  if (length > MAX_PAYLOAD) throw new ProtocolError(`payload of ${length} bytes exceeds ${MAX_PAYLOAD}`);
  const h = Buffer.allocUnsafe(HEADER_LENGTH);
  h.writeUInt32LE(length, H.length);
  h.writeUInt8(type, H.type);
  h.writeUInt8(flags, H.flags);
  h.writeUInt16LE(0, H.reserved);
  h.writeUInt32LE(stream >>> 0, H.stream);
  return h;
}

/** One contiguous frame; for bulk data send encodeHeader + the payload as two writes instead. */
export function encodeFrame(type: number, flags: number, stream: number, payload: Buffer = Buffer.alloc(0)): Buffer {
  return Buffer.concat([encodeHeader(type, flags, stream, payload.length), payload]);
}

/**
 * Splits a byte stream into frames. Payloads that arrive in one chunk are zero-copy views of it, so
 * a consumer that keeps a payload keeps the chunk alive. Throws ProtocolError on a bad header;
 * after that the decoder is unusable (the stream has lost sync).
 */
export class FrameDecoder {
  private chunks: Buffer[] = [];
  private buffered = 0;
  private failed: ProtocolError | undefined;
  constructor(private readonly maxPayload = MAX_PAYLOAD) {}

  push(chunk: Buffer): Frame[] {
    if (this.failed) throw this.failed;
    if (chunk.length > 0) {
      this.chunks.push(chunk);
      this.buffered += chunk.length;
    }
    const frames: Frame[] = [];
    while (this.buffered >= HEADER_LENGTH) {
      const head = this.peek(HEADER_LENGTH);
      const length = head.readUInt32LE(H.length);
      const type = head.readUInt8(H.type);
      if (length > this.maxPayload) this.fail(`frame payload of ${length} bytes exceeds the ${this.maxPayload}-byte limit`);
      if (type === 0 || type > LAST_FRAME_TYPE) this.fail(`unknown frame type ${type}`);
      if (head.readUInt16LE(H.reserved) !== 0) this.fail('reserved header bits are set');
      if (this.buffered < HEADER_LENGTH + length) break;
      this.take(HEADER_LENGTH);
      frames.push({ type, flags: head.readUInt8(H.flags), stream: head.readUInt32LE(H.stream), payload: this.take(length) });
    }
    return frames;
  }

  /** Bytes held waiting for the rest of a frame. */
  get pending(): number {
    return this.buffered;
  }

  private fail(message: string): never {
    this.failed = new ProtocolError(message);
    this.chunks = [];
    this.buffered = 0;
    throw this.failed;
  }

  private peek(n: number): Buffer {
    const first = this.chunks[0];
    if (first.length >= n) return first;
    return Buffer.concat(this.chunks, n);
  }

  private take(n: number): Buffer {
    this.buffered -= n;
    const first = this.chunks[0];
    if (n === 0) return Buffer.alloc(0);
    if (first.length > n) {
      this.chunks[0] = first.subarray(n);
      return first.subarray(0, n);
    }
    if (first.length === n) {
      this.chunks.shift();
      return first;
    }
    const out = Buffer.allocUnsafe(n);
    let at = 0;
    while (at < n) {
      const c = this.chunks[0];
      const k = Math.min(c.length, n - at);
      c.copy(out, at, 0, k);
      at += k;
      if (k === c.length) this.chunks.shift();
      else this.chunks[0] = c.subarray(k);
    }
    return out;
  }
}

/**
 * Offset of the first plausible HELLO frame in buf (a stream-0 HELLO header followed by the magic), or -1.
 * Before the handshake a serial port may still deliver bytes meant for a previous host; they are skipped.
 */
export function findHello(buf: Buffer): number {
  for (let i = buf.indexOf(HELLO_MAGIC, HEADER_LENGTH); i >= 0; i = buf.indexOf(HELLO_MAGIC, i + 1)) {
    const h = i - HEADER_LENGTH;
    const len = buf.readUInt32LE(h + H.length);
    if (buf[h + H.type] === FrameType.hello && buf[h + H.flags] === 0 && buf.readUInt16LE(h + H.reserved) === 0 && buf.readUInt32LE(h + H.stream) === 0 && len >= HELLO_MIN && len <= HELLO_MIN + HELLO_NAME_MAX) return h;
  }
  return -1;
}
