/**
 * Malformed and hostile frames against a running daemon: each ends (at most) its own session; the
 * daemon stays up and keeps serving well-behaved clients.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import fs from 'node:fs';
import path from 'node:path';
import { OP, OP_ROWS, PROTOCOL, encodeFrame } from '../../../src/cuda/protocol/index.js';
import { buildNative, progs, ptx, Raw, runProgram, shimEnv, startDaemon, type DaemonProc } from './helpers.js';

let d: DaemonProc;
beforeAll(async () => { buildNative(); d = await startDaemon(); });
afterAll(async () => { await d?.stop(); });

async function daemonStillServes() {
  const r = await runProgram(path.join(progs, 'driver_vecadd'), [ptx, 'quick', '4096'], shimEnv(d.endpoint));
  expect(r.code, r.stderr).toBe(0);
  expect(r.stdout).toContain('RESULT vecadd PASS');
}

describe('hostile frames end only their own session', () => {
  it('random bytes', async () => {
    const c = new Raw(d.endpoint);
    let x = 12345;
    const junk = Buffer.alloc(65536, 0).map(() => ((x = (x * 1103515245 + 12345) >>> 0) >>> 24));
    c.send(Buffer.from(junk));
    expect(await c.hangsUp()).toBe(true);
    await daemonStillServes();
  });

  it('a call before the handshake, and a handshake from another protocol version', async () => {
    const a = new Raw(d.endpoint);
    a.send(encodeFrame(OP.MemAlloc, [4096]));
    expect(await a.hangsUp()).toBe(true);
    const b = new Raw(d.endpoint);
    b.send(encodeFrame(OP.Hello, [PROTOCOL.magic, 12345, process.pid, 0], { seq: 7 }));
    const rep = await b.reply();
    expect(rep?.status).toBe(801);
    b.sock.destroy();
  });

  it('an oversized frame and an unknown op', async () => {
    const a = new Raw(d.endpoint);
    expect((await a.hello())?.status).toBe(0);
    const big = Buffer.alloc(16); big.writeUInt32LE(PROTOCOL.maxPayload + 1, 0); big.writeUInt16LE(OP.Nop, 4);
    a.send(big);
    expect(await a.hangsUp()).toBe(true);
    const b = new Raw(d.endpoint);
    await b.hello();
    b.send(encodeFrame(999, [1, 2, 3], { seq: 2 }));
    expect(await b.hangsUp()).toBe(true);
  });

  it('device pointers and images are checked before the driver sees them', async () => {
    const owner = new Raw(d.endpoint), thief = new Raw(d.endpoint);
    await owner.hello(); await thief.hello();
    owner.send(encodeFrame(OP.PrimaryCtxRetain, [0], { seq: 2 }));
    await owner.reply();
    owner.send(encodeFrame(OP.CtxSetCurrent, [PROTOCOL.kinds.ctx * 2 ** 48 + PROTOCOL.primaryBase], { flags: PROTOCOL.flags.async }));
    owner.send(encodeFrame(OP.MemAlloc, [4096], { seq: 3 }));
    const alloc = await owner.reply();
    expect(alloc?.status, JSON.stringify(alloc, (_k, v) => (typeof v === "bigint" ? String(v) : v))).toBe(0);
    expect(alloc?.op).toBe(OP.MemAlloc);
    const ptr = alloc!.outs[0];
    // cuMemAlloc leaves memory as it finds it (a freed buffer may hold 0xee), so the owner writes first.
    owner.send(encodeFrame(OP.MemcpyHtoDSync, [ptr], { seq: 4, blob: Buffer.alloc(64, 0x11) }));
    expect((await owner.reply())?.status).toBe(0);
    // Another session naming that pointer gets an error, and its session goes on.
    thief.send(encodeFrame(OP.MemcpyDtoH, [ptr, 64, 0], { seq: 2 }));
    expect((await thief.reply())?.status).toBe(1);
    thief.send(encodeFrame(OP.MemcpyHtoD, [ptr, 0, 0], { flags: PROTOCOL.flags.async, blob: Buffer.alloc(64, 0xee) }));
    thief.send(encodeFrame(OP.Nop, [], { seq: 3 }));
    expect((await thief.reply())?.status).toBe(1); // the failed async copy surfaces at the next sync call
    // A fatbin whose header claims more bytes than were sent is refused.
    const fat = Buffer.alloc(64); fat.writeUInt32LE(0xba55ed50, 0); fat.writeUInt16LE(16, 6); fat.writeBigUInt64LE(1n << 40n, 8);
    thief.send(encodeFrame(OP.LibraryLoadData, [PROTOCOL.kinds.library * 2 ** 48 + 1], { seq: 4, blob: fat }));
    expect((await thief.reply())?.status).toBe(200);
    // The owner's memory was untouched.
    owner.send(encodeFrame(OP.MemcpyDtoH, [ptr, 64, 0], { seq: 5 }));
    const mine = await owner.reply();
    expect(mine?.status).toBe(0);
    expect(mine!.blob.equals(Buffer.alloc(64, 0x11))).toBe(true);
    owner.sock.destroy(); thief.sock.destroy();
  });

  it('a function of an unloaded module is refused, not handed to the driver', async () => {
    const c = new Raw(d.endpoint);
    await c.hello();
    c.send(encodeFrame(OP.PrimaryCtxRetain, [0], { seq: 2 }));
    await c.reply();
    c.send(encodeFrame(OP.CtxSetCurrent, [PROTOCOL.kinds.ctx * 2 ** 48 + PROTOCOL.primaryBase], { flags: PROTOCOL.flags.async }));
    const mod = PROTOCOL.kinds.module * 2 ** 48 + 1, fn = PROTOCOL.kinds.func * 2 ** 48 + 2;
    c.send(encodeFrame(OP.ModuleLoadData, [mod], { seq: 3, blob: fs.readFileSync(ptx) }));
    expect((await c.reply())?.status).toBe(0);
    c.send(encodeFrame(OP.ModuleGetFunction, [mod, fn], { seq: 4, blob: Buffer.from('vecadd') }));
    expect((await c.reply())?.status).toBe(0);
    c.send(encodeFrame(OP.FuncGetAttribute, [fn, 0], { seq: 5 }));
    expect((await c.reply())?.status).toBe(0);
    c.send(encodeFrame(OP.ModuleUnload, [mod], { flags: PROTOCOL.flags.async }));
    c.send(encodeFrame(OP.FuncGetAttribute, [fn, 0], { seq: 6 }));
    const stale = await c.reply(); // decoding it needs the op's one result: an error reply carries it too
    expect(stale?.status).toBe(400);
    expect(stale?.outs).toEqual([0n]);
    c.sock.destroy();
    await daemonStillServes();
  });

  it('500 random well-framed calls (seeded) leave the daemon serving', async () => {
    let x = 99;
    const rnd = () => (x = (x * 1103515245 + 12345) >>> 0);
    const ids = OP_ROWS.map((r) => r).filter((r) => r.id !== OP.Hello);
    for (let conn = 0; conn < 5; conn++) {
      const c = new Raw(d.endpoint);
      await c.hello();
      for (let i = 0; i < 100; i++) {
        const row = ids[rnd() % ids.length];
        const pick = () => [0, 1, 2, rnd(), rnd() * 2 ** 20, PROTOCOL.kinds.stream * 2 ** 48 + (rnd() % 8)][rnd() % 6];
        const args = Array.from({ length: row.nargs }, pick);
        c.send(encodeFrame(row.id, args, { seq: i + 2, flags: rnd() % 2 ? PROTOCOL.flags.async : 0, blob: Buffer.alloc(rnd() % 64, rnd() & 255) }));
      }
      await new Promise((r) => setTimeout(r, 100));
      c.sock.destroy();
    }
    const st = await d.status();
    expect(st.pid).toBe(d.proc.pid);
    await daemonStillServes();
  });
});
