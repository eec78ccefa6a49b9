/**
 * Malformed and hostile frames against a running daemon: each ends (at most) its own session; the
 * daemon stays up and keeps serving well-behaved clients.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import fs from 'node:fs';
import path from 'node:path';
import { OP, OP_ROWS, PROTO_HASH, PROTOCOL, encodeFrame } from '../../../src/cuda/protocol/index.js';
import { buildNative, progs, ptx, Raw, runProgram, shimEnv, startDaemon, waitFor, type DaemonProc } from './helpers.js';

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

/** The daemon's own child processes: one per session plus the spare. */
function children(pid: number): number {
  let n = 0;
  for (const e of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(e)) continue;
    try {
      if (Number(fs.readFileSync(`/proc/${e}/stat`, 'utf8').replace(/^.*\) /s, '').split(' ')[1]) === pid) n++;
    } catch { /* gone */ }
  }
  return n;
}

describe('a guest opening connections in a loop', () => {
  const CAP = 3;
  let small: DaemonProc;
  beforeAll(async () => { small = await startDaemon([], { SMOL_GPU_MAX_SESSIONS: String(CAP), SMOL_GPU_HANDSHAKE_MS: '1500' }); });
  afterAll(async () => { await small?.stop(); });

  it('40 connections get at most the cap of session processes; the rest are refused at HELLO', async () => {
    const conns = Array.from({ length: 40 }, () => new Raw(small.endpoint));
    // each refusal first waits a moment for a slot (ADMIT_WAIT_MS), one after another: allow for 37 of them
    for (const c of conns) c.send(encodeFrame(OP.Hello, [PROTOCOL.magic, PROTO_HASH, process.pid, 0], { seq: 1 }));
    const replies = await Promise.all(conns.map((c) => c.reply(60_000)));
    const admitted = replies.filter((r) => r?.status === 0).length;
    expect(admitted).toBe(CAP);
    expect(replies.filter((r) => r?.status === 46)).toHaveLength(40 - CAP); // CUDA_ERROR_DEVICE_UNAVAILABLE
    const st = await small.status();
    expect(st.sessions.length).toBe(CAP);
    expect(st.refusedSessions).toBeGreaterThanOrEqual(40 - CAP);
    expect(children(small.proc.pid!)).toBeLessThanOrEqual(CAP + 1); // the sessions and one spare
    expect(small.log()).toMatch(/refused a connection: 3 sessions are open/);
    // a real program past the cap is told why, not that its shim is from another version
    const late = await runProgram(path.join(progs, 'driver_vecadd'), [ptx, 'quick', '4096'], shimEnv(small.endpoint));
    expect(late.code).not.toBe(0);
    expect(late.stderr).toMatch(/refused the session: it already serves its limit of CUDA processes/);
    // a closed session frees its slot for the next guest
    for (const c of conns) c.sock.destroy();
    await waitFor(async () => ((await small.status()).sessions.length === 0 ? true : undefined), 20_000);
    const next = new Raw(small.endpoint);
    expect((await next.hello())?.status).toBe(0);
    next.sock.destroy();
  });

  it('a connection that never completes its HELLO is closed after the handshake timeout', async () => {
    const silent = new Raw(small.endpoint);
    const partial = new Raw(small.endpoint);
    partial.send(encodeFrame(OP.Hello, [PROTOCOL.magic, 0, 0, 0]).subarray(0, 20)); // a header and a few bytes
    expect(await silent.hangsUp()).toBe(true);
    expect(await partial.hangsUp()).toBe(true);
    const st = await waitFor(async () => { const s = await small.status(); return s.sessions.length === 0 ? s : undefined; }, 20_000);
    expect(st?.lastClose?.reason).toMatch(/no handshake within 1500 ms/);
  });
});
