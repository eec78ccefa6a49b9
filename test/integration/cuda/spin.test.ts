/**
 * Spin-before-block (SMOL_CUDA_SPIN_US): the session polls for its guest's next frame, and the shim for its
 * reply, before sleeping. Forced on here (these 2-CPU machines default to off): frames that arrive while the
 * session polls, in pieces, in bursts, or not until it has gone to sleep, are all served, and a hang-up
 * during polling ends the session. The polling itself is seen in the session thread's sleeps.
 */
import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { OP, PROTOCOL, encodeFrame } from '../../../src/cuda/protocol/index.js';
import { spinUsFor } from '../../../src/cuda/daemon/server.js';
import { Raw, buildNative, progs, ptx, results, runProgram, shimEnv, startDaemon, waitFor, type DaemonProc } from './helpers.js';

const SPIN_US = 10_000; // the most the setting allows: long enough that the test's own calls land inside it
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
/** Times the session's main thread has slept (in read(), or anything else that blocks). */
const sleeps = (pid: number) => Number(/voluntary_ctxt_switches:\s+(\d+)/.exec(fs.readFileSync(`/proc/${pid}/task/${pid}/status`, 'utf8'))![1]);

async function sessionPid(d: DaemonProc): Promise<number> {
  const s = await waitFor(async () => (await d.status()).sessions[0], 5000);
  if (!s) throw new Error('no session');
  return s.pid;
}

/** Sleeps of the session's thread over `n` sync calls made one after another from a Raw client. */
async function sleepsOverCalls(d: DaemonProc, n: number): Promise<number> {
  const g = new Raw(d.endpoint);
  expect((await g.hello())?.status).toBe(0);
  const pid = await sessionPid(d);
  const before = sleeps(pid);
  for (let i = 0; i < n; i++) expect((await g.call(OP.Nop, []))?.status).toBe(0);
  const slept = sleeps(pid) - before;
  g.sock.destroy();
  await waitFor(async () => ((await d.status()).sessions.length === 0 ? true : undefined), 5000);
  return slept;
}

describe('spin-before-block', () => {
  let on: DaemonProc, off: DaemonProc;
  beforeAll(async () => {
    buildNative();
    [on, off] = await Promise.all([startDaemon([], { SMOL_CUDA_SPIN_US: String(SPIN_US) }), startDaemon([], { SMOL_CUDA_SPIN_US: '0' })]);
  }, 120_000);
  afterAll(async () => { await on?.stop(); await off?.stop(); });

  it('reads the setting: 0 turns it off, N is µs up to 10 ms, and by default it is on only with 4 or more CPUs', () => {
    expect(spinUsFor({ SMOL_CUDA_SPIN_US: '0' }, 64)).toBe(0);
    expect(spinUsFor({ SMOL_CUDA_SPIN_US: '120' }, 2)).toBe(120);
    expect(spinUsFor({ SMOL_CUDA_SPIN_US: '99999999' }, 2)).toBe(10_000);
    expect(spinUsFor({}, 2)).toBe(0);
    expect(spinUsFor({}, 3)).toBe(0);
    expect(spinUsFor({}, 4)).toBe(50);
    expect(() => spinUsFor({ SMOL_CUDA_SPIN_US: '-5' }, 8)).toThrow(/SMOL_CUDA_SPIN_US/);
    expect(() => spinUsFor({ SMOL_CUDA_SPIN_US: '5us' }, 8)).toThrow(/SMOL_CUDA_SPIN_US/);
  });

  it('a polling session does not sleep between calls that follow each other closely; one that does not poll sleeps every call', async () => {
    const n = 200;
    const polled = await sleepsOverCalls(on, n);
    const blocked = await sleepsOverCalls(off, n);
    expect(blocked).toBeGreaterThanOrEqual(n * 0.9);
    // A loaded machine can hold the test's event loop past 10 ms now and then: most calls, not all.
    expect(polled).toBeLessThan(n * 0.5);
  });

  it('serves frames split across writes, bursts and frames that come after the poll gave up, in order', async () => {
    const g = new Raw(on.endpoint);
    expect((await g.hello())?.status).toBe(0);
    // split inside the poll window, and split across it (the rest comes after the session went to sleep)
    for (const gapMs of [1, 3 * SPIN_US / 1000]) {
      const f = encodeFrame(OP.Nop, [], { seq: ++g.seq });
      g.send(f.subarray(0, 5));
      await sleep(gapMs);
      g.send(f.subarray(5));
      const r = await g.reply();
      expect([r?.status, r?.seq]).toEqual([0, g.seq]);
    }
    // a burst: many frames in one write, fire-and-forget ones among them, each sync one answered in order
    const frames: Buffer[] = [];
    const first = g.seq + 1;
    for (let i = 0; i < 300; i++) {
      frames.push(encodeFrame(OP.Nop, [], { seq: ++g.seq }));
      if (i % 3 === 0) frames.push(encodeFrame(OP.Nop, [], { flags: PROTOCOL.flags.async }));
    }
    g.send(Buffer.concat(frames));
    for (let i = 0; i < 300; i++) {
      const r = await g.reply();
      expect([r?.status, r?.seq]).toEqual([0, first + i]);
    }
    // a hang-up while the session polls ends it, and it says why
    const pid = await sessionPid(on);
    g.sock.destroy();
    const closed = await waitFor(async () => { const s = await on.status(); return s.sessions.some((x) => x.pid === pid) ? undefined : s; }, 5000);
    expect(closed?.lastClose?.reason).toBe('guest disconnected');
  });

  it('a program gives the same results with both sides polling', async () => {
    const env = { ...shimEnv(on.endpoint), SMOL_CUDA_SPIN_US: String(SPIN_US) };
    const r = await runProgram(path.join(progs, 'driver_vecadd'), [ptx], env);
    expect(r.code, r.stderr).toBe(0);
    const checks = Object.values(results(r.stdout));
    expect(checks.length).toBeGreaterThan(5);
    expect(checks.every((v) => v === 'PASS')).toBe(true);
    const b = await runProgram(path.join(progs, 'driver_bench'), [ptx, '4', '300', '3000'], env);
    expect(b.code, b.stderr).toBe(0);
    expect(b.stdout).toMatch(/^BENCH dtoh_gib_s \d/m);
  });
});
