/** A GET holds the guest to the size its INFO announced (#31.7): no more bytes, no early end. */
import { describe, expect, it } from 'vitest';
import { GuestChannelError } from '../../../../src/errors/index.js';
import type { Frame } from '../../../../src/vm/agent/codec.js';
import { GetHandler } from '../../../../src/vm/agent/file-transfer.js';
import type { ChannelPort } from '../../../../src/vm/agent/flow.js';
import { Channel, FrameType } from '../../../../src/vm/agent/protocol.js';

function port(): ChannelPort & { sent: number[]; forgot: number[] } {
  const sent: number[] = [], forgot: number[] = [];
  return { sent, forgot, send: (type) => (sent.push(type), true), whenDrained: (cb) => cb(), forget: (id) => forgot.push(id), maxPayload: 65536, guestWindow: 1 << 20, hostWindow: 1 << 20 };
}

const info = (size: number) => {
  const p = Buffer.alloc(12);
  p.writeBigUInt64LE(BigInt(size), 0);
  p.writeUInt32LE(0o644, 8);
  return p;
};
const frame = (type: number, payload = Buffer.alloc(0), flags = 0): Frame => ({ type, flags, stream: 3, payload }) as Frame;

async function readAll(h: GetHandler): Promise<Buffer> {
  const f = await h.info;
  const out: Buffer[] = [];
  for await (const c of f.stream as AsyncIterable<Buffer>) out.push(c);
  return Buffer.concat(out);
}

describe('GET size', () => {
  it('passes exactly the announced bytes', async () => {
    const h = new GetHandler(port(), 3, '/f');
    h.frame(frame(FrameType.info, info(5)));
    h.frame(frame(FrameType.data, Buffer.from('hel'), Channel.out));
    h.frame(frame(FrameType.data, Buffer.from('lo'), Channel.out));
    h.frame(frame(FrameType.eof, undefined, Channel.out));
    expect(h.frame(frame(FrameType.done))).toBe(true);
    expect((await readAll(h)).toString()).toBe('hello');
  });

  it('cuts off a guest that sends more than it announced, and tells it to stop', async () => {
    const p = port();
    const h = new GetHandler(p, 3, '/root/zero');
    h.frame(frame(FrameType.info, info(0)));
    const reading = readAll(h);
    expect(h.frame(frame(FrameType.data, Buffer.alloc(4096), Channel.out))).toBe(true);
    const err = await reading.catch((e: unknown) => e);
    expect(err).toBeInstanceOf(GuestChannelError);
    expect((err as Error).message).toBe('get /root/zero failed: the guest sent more than the 0 bytes it announced');
    expect([p.sent, p.forgot]).toEqual([[FrameType.error], [3]]);
  });

  it('fails a guest that ends before the announced size', async () => {
    const h = new GetHandler(port(), 3, '/f');
    h.frame(frame(FrameType.info, info(10)));
    const reading = readAll(h);
    h.frame(frame(FrameType.data, Buffer.from('abc'), Channel.out));
    expect(h.frame(frame(FrameType.eof, undefined, Channel.out))).toBe(true);
    await expect(reading).rejects.toThrow('ended after 3 of the 10 bytes it announced');
  });
});
