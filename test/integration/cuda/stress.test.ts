/**
 * The daemon never aborts and stops promptly (issue 16, part 2): 90 short sessions of every kind
 * against one daemon on the FAKE driver while a long-running client keeps its memory; stops by SIGTERM
 * with and without clients; daemons stopped (and a process exiting) at random points of session churn.
 * Stop-time bounds are the deadlines with a margin for a loaded 2-core machine; the measured
 * figures are printed and kept in docs/cuda.md.
 */
import { spawn } from 'node:child_process';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { OP, PROTOCOL, encodeFrame } from '../../../src/cuda/protocol/index.js';
import { buildNative, fakeLibcuda, progs, ptx, Raw, root, runProgram, shimEnv, waitFor } from './helpers.js';
import { smolBin } from '../../helpers/cli.js';
import fs from 'node:fs';
import os from 'node:os';

/** 300 took 70 s on this shared 2-core machine (a worker thread starts per session); 90 keep it bounded. */
const SESSIONS = 90;

interface Served { endpoint: string; control: string; proc: ReturnType<typeof spawn>; log: () => string; exited: Promise<number | null> }
const dirs: string[] = [];

/** `smol gpu serve` from dist (a worker per session from source would register tsx each time). */
async function serve(): Promise<Served> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'smol-gpu-stress-'));
  dirs.push(dir);
  const control = path.join(dir, 'ctl');
  const proc = spawn(process.execPath, [smolBin, 'gpu', 'serve', '--listen', `unix:${path.join(dir, 'cuda.sock')}`, '--libcuda', fakeLibcuda, '--control', control, '--json'],
    { cwd: root, env: { ...process.env, SMOL_HOME: dir }, stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '', err = '';
  proc.stdout!.on('data', (d) => { out += d; });
  proc.stderr!.on('data', (d) => { err += d; });
  const exited = new Promise<number | null>((r) => proc.on('exit', (code) => r(code)));
  const info = await waitFor(async () => (out.includes('}') ? JSON.parse(out.slice(0, out.indexOf('}') + 1)) as { endpoint: string } : undefined), 30_000);
  if (!info) throw new Error(`daemon did not start: ${err}`);
  return { endpoint: info.endpoint, control, proc, log: () => err, exited };
}

/** Sends SIGTERM and returns the milliseconds until the process is gone, and its exit code. */
async function term(d: Served): Promise<{ ms: number; code: number | null }> {
  const t0 = performance.now();
  d.proc.kill('SIGTERM');
  const code = await d.exited;
  return { ms: performance.now() - t0, code };
}

beforeAll(() => { buildNative(); });
afterAll(() => { for (const d of dirs) fs.rmSync(d, { recursive: true, force: true }); });

describe('the daemon never aborts', () => {
  it(`serves ${SESSIONS} short sessions (NVML, driver API, dropped at random points) and a long-running client throughout; SIGTERM then ends that client and frees its memory`, async () => {
    const d = await serve();
    const long = new Raw(d.endpoint);
    const mem = 1 << 20;
    const ptr = await long.withMemory(mem);
    long.send(encodeFrame(OP.MemcpyHtoD, [ptr, 0, 0], { flags: PROTOCOL.flags.async, blob: Buffer.alloc(4096, 0x5a) }));

    let x = 2026;
    const rnd = (n: number) => (x = (x * 1103515245 + 12345) >>> 0) % n;
    const failures: string[] = [];
    const one = async (i: number) => {
      const kind = i % 3;
      if (kind === 0) {
        const r = await runProgram(path.join(progs, 'nvml_query'), [], shimEnv(d.endpoint));
        if (r.code !== 0 || !r.stdout.includes('Smol FAKE GPU')) failures.push(`nvml ${i}: ${r.code} ${r.stderr}`);
      } else if (kind === 1) {
        const r = await runProgram(path.join(progs, 'driver_vecadd'), [ptx, 'quick', '1024'], shimEnv(d.endpoint));
        if (r.code !== 0 || !r.stdout.includes('RESULT vecadd PASS')) failures.push(`driver ${i}: ${r.code} ${r.stderr}`);
      } else {
        const c = new Raw(d.endpoint);
        const point = rnd(5);
        if (point >= 1) await c.hello();
        if (point >= 2) await c.withMemory(4096 << rnd(8)).catch(() => undefined);
        if (point === 3) c.send(encodeFrame(OP.MemcpyHtoD, [0, 0, 0], { flags: PROTOCOL.flags.async, blob: Buffer.alloc(1 << 16) }).subarray(0, 1000));
        if (point === 4) c.send(Buffer.from([1, 2, 3]));
        await new Promise((r) => setTimeout(r, rnd(30)));
        c.sock.destroy();
      }
    };
    let next = 0;
    await Promise.all(Array.from({ length: 6 }, async () => { while (next < SESSIONS) await one(next++); }));
    expect(failures).toEqual([]);

    // Every short session is gone and freed; the long one still holds its memory and its data.
    const idle = await waitFor(async () => { const s = await queryStatus(d); return s.sessions.length === 1 && s.closedSessions >= SESSIONS ? s : undefined; }, 30_000);
    expect(idle?.sessions[0].memBytes).toBe(mem);
    const back = await long.call(OP.MemcpyDtoH, [ptr, 4096, 0]);
    expect(back?.status).toBe(0);
    expect(back!.blob.equals(Buffer.alloc(4096, 0x5a))).toBe(true);

    const t = await term(d);
    console.log(`SIGTERM with 1 client: process gone in ${t.ms.toFixed(0)} ms; ${/stopped in .*/.exec(d.log())?.[0]}`);
    expect(t.code).toBe(0);
    expect(await long.hangsUp(5000)).toBe(true);
    expect(d.log()).toMatch(/ended 1 session\(s\), freed 1048576 bytes/);
    expect(d.log()).not.toContain('FATAL');
    expect(t.ms).toBeLessThan(3000); // issue's deadline 1 s; margin for a loaded machine
  });

  it('with no clients, SIGTERM ends `smol gpu serve` at once', async () => {
    const d = await serve();
    // Let the warm spare finish loading the driver: a stop waits for a worker that is still binding it.
    expect(await waitFor(async () => ((await queryStatus(d)).spareReady ? true : undefined), 30_000)).toBe(true);
    const t = await term(d);
    console.log(`SIGTERM with no clients: process gone in ${t.ms.toFixed(0)} ms; ${/stopped in .*/.exec(d.log())?.[0]}`);
    expect(t.code).toBe(0);
    expect(d.log()).toMatch(/ended 0 session\(s\)/);
    expect(t.ms).toBeLessThan(1000); // issue's deadline 200 ms; margin for a loaded machine
  });

  it('daemons stopped at points spread over session churn (where a new spare binds the driver), and a process exiting with busy sessions, end cleanly', async () => {
    const child = spawn(process.execPath, ['--import', 'tsx', path.join(root, 'test/integration/cuda/churn-child.ts'), '10', '42'], { cwd: root, stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '', err = '';
    child.stdout.on('data', (b) => { out += b; });
    child.stderr.on('data', (b) => { err += b; });
    // Before the fix a close took 8 s (10 rounds: too long) when it did not abort: bound it.
    const kill = setTimeout(() => child.kill('SIGKILL'), 100_000);
    const code = await new Promise<number | null>((r) => child.on('exit', (c) => r(c)));
    clearTimeout(kill);
    expect(err).not.toContain('FATAL');
    expect(code, out + err).toBe(0);
    expect(out).toContain('exiting with the daemon open');
  });
});

async function queryStatus(d: Served) {
  const { queryGpuDaemon } = await import('../../../src/cuda/daemon/index.js');
  return queryGpuDaemon(d.control);
}
