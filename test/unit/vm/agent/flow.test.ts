import { describe, expect, it } from 'vitest';
import { InboundCredit, InboundReadable, OutboundWriter, type ChannelPort } from '../../../../src/vm/agent/flow.js';
import { FrameType } from '../../../../src/vm/agent/protocol.js';

interface Sent { type: number; flags: number; stream: number; payload?: Buffer }

function fakePort(o: Partial<ChannelPort> = {}): ChannelPort & { sent: Sent[] } {
  const sent: Sent[] = [];
  return {
    sent,
    send: (type, flags, stream, payload) => (sent.push({ type, flags, stream, payload }), true),
    whenDrained: (cb) => cb(),
    forget: () => undefined,
    maxPayload: 1000,
    guestWindow: 2500,
    hostWindow: 4000,
    ...o,
  };
}

describe('inbound credit', () => {
  it('refuses bytes beyond the window', () => {
    const grants: number[] = [];
    const c = new InboundCredit(100, (n) => grants.push(n));
    expect(c.accept(60)).toBe(true);
    c.pushed(false); // consumer behind: no credit back
    expect(c.accept(41)).toBe(false);
    expect(c.accept(40)).toBe(true);
    expect(grants).toEqual([]);
  });

  it('grants in quarter-window batches while the consumer keeps up', () => {
    const grants: number[] = [];
    const c = new InboundCredit(100, (n) => grants.push(n));
    c.accept(10);
    c.pushed(true);
    expect(grants).toEqual([]);
    c.accept(20);
    c.pushed(true);
    expect(grants).toEqual([30]);
  });

  it('holds credit while the consumer is behind and returns it on read', () => {
    const grants: number[] = [];
    const c = new InboundCredit(100, (n) => grants.push(n));
    c.accept(100);
    c.pushed(false);
    expect(grants).toEqual([]);
    c.read();
    expect(grants).toEqual([100]);
    expect(c.accept(100)).toBe(true);
  });

  it('returns everything at once after release (consumer gone) so the guest never stalls', () => {
    const grants: number[] = [];
    const c = new InboundCredit(100, (n) => grants.push(n));
    c.accept(5);
    c.pushed(false);
    c.release();
    c.accept(3);
    expect(grants).toEqual([5, 3]);
  });
});

describe('InboundReadable', () => {
  it('sends WINDOW frames for the right stream and channel as data is consumed', async () => {
    const port = fakePort();
    const r = new InboundReadable(port, 7, 2);
    expect(r.deliver(Buffer.alloc(1500))).toBe(true);
    expect(r.finish()).toBe(true);
    let n = 0;
    for await (const c of r) n += (c as Buffer).length;
    expect(n).toBe(1500);
    expect(port.sent.filter((s) => s.type === FrameType.window).map((s) => [s.flags, s.stream, s.payload!.readUInt32LE(0)])).toEqual([[2, 7, 1500]]);
  });

  it('rejects data after EOF and a second EOF', () => {
    const r = new InboundReadable(fakePort(), 1, 1);
    r.finish();
    expect(r.deliver(Buffer.from('x'))).toBe(false);
    expect(r.finish()).toBe(false);
  });

  it('calls the early-destroy hook only when destroyed before EOF', () => {
    let cancelled = 0;
    const a = new InboundReadable(fakePort(), 1, 1, () => cancelled++);
    a.destroy();
    const b = new InboundReadable(fakePort(), 2, 1, () => cancelled++);
    b.finish();
    b.destroy();
    expect(cancelled).toBe(1);
  });
});

describe('OutboundWriter', () => {
  it('splits writes by max payload and stops at the credit until WINDOW arrives', () => {
    const port = fakePort();
    const w = new OutboundWriter(port, 3);
    let done = false;
    w.write(Buffer.alloc(4000), () => (done = true));
    expect(port.sent.map((s) => s.payload!.length)).toEqual([1000, 1000, 500]);
    expect(done).toBe(false);
    w.grant(1000);
    expect(done).toBe(false);
    w.grant(5000);
    expect(done).toBe(true);
    expect(port.sent.reduce((a, s) => a + s.payload!.length, 0)).toBe(4000);
    expect(port.sent.every((s) => s.type === FrameType.data && s.flags === 0 && s.stream === 3)).toBe(true);
  });

  it('waits for the socket to drain before completing a write', () => {
    let drain: (() => void) | undefined;
    const port = fakePort({ send: () => false, whenDrained: (cb) => (drain = cb) });
    const w = new OutboundWriter(port, 1);
    let done = false;
    w.write(Buffer.alloc(10), () => (done = true));
    expect(done).toBe(false);
    drain!();
    expect(done).toBe(true);
  });

  it('fails a pending write with the close error, and drops later input after a clean close', () => {
    const port = fakePort({ guestWindow: 0 });
    const w = new OutboundWriter(port, 1);
    const errs: Array<Error | null | undefined> = [];
    w.write(Buffer.alloc(10), (e) => errs.push(e));
    w.close(new Error('gone'));
    expect(errs[0]?.message).toBe('gone');
    const w2 = new OutboundWriter(fakePort(), 2);
    w2.close();
    w2.write(Buffer.alloc(10), (e) => errs.push(e));
    expect(errs[1]).toBeUndefined();
  });
});
