/**
 * Each guest process gets a host process of its own (session-process.ts): the real driver makes a
 * kernel fault fatal to the whole process that ran it, so guests sharing one process would share faults.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildNative, fakeLibcuda, progs, ptx, root, runProgram, shimEnv, startDaemon, waitFor, type DaemonProc } from './helpers.js';
import fs from 'node:fs';
import path from 'node:path';

let d: DaemonProc;
beforeAll(async () => { buildNative(); d = await startDaemon(); });
afterAll(async () => { await d?.stop(); });

const holder = (): Promise<ChildProcess> => new Promise((resolve, reject) => {
  const p = spawn(path.join(progs, 'driver_vecadd'), [ptx, 'hold', '1024'], { env: { ...process.env, ...shimEnv(d.endpoint) }, stdio: ['ignore', 'pipe', 'pipe'] });
  p.stdout.on('data', (b) => { if (String(b).includes('READY')) resolve(p); });
  p.on('exit', (code) => reject(new Error(`holder exited ${code}`)));
});
const childrenOf = (ppid: number): number[] => fs.readdirSync('/proc').filter((f) => /^\d+$/.test(f)).filter((f) => {
  try { return Number(fs.readFileSync(`/proc/${f}/stat`, 'utf8').replace(/^.*\) /s, '').split(' ')[1]) === ppid; } catch { return false; }
}).map(Number);
const alive = (pid: number) => { try { process.kill(pid, 0); return true; } catch { return false; } };

describe('session processes', () => {
  it('two guests are served by two processes, neither of them the daemon', async () => {
    const [a, b] = await Promise.all([holder(), holder()]);
    const st = await waitFor(async () => { const s = await d.status(); return s.sessions.length === 2 ? s : undefined; }, 3000);
    a.kill('SIGKILL'); b.kill('SIGKILL');
    const pids = st!.sessions.map((s) => s.pid);
    expect(new Set(pids).size).toBe(2);
    expect(pids).not.toContain(st!.pid);
    expect(pids.every((p) => p > 0)).toBe(true);
  });

  it('a session process that dies takes only its own guest with it', async () => {
    const victim = await holder();
    const st = await waitFor(async () => { const s = await d.status(); return s.sessions.length === 1 ? s : undefined; }, 3000);
    const gone = new Promise<number | null>((r) => victim.once('exit', (code) => r(code)));
    process.kill(st!.sessions[0].pid, 'SIGKILL');
    // The guest's next call finds the connection closed: the hold loop ends with an error, not a hang.
    victim.stdin?.end();
    const closed = await waitFor(async () => { const s = await d.status(); return s.sessions.length === 0 ? s : undefined; }, 3000);
    expect(closed?.lastClose?.reason).toMatch(/SIGKILL/);
    victim.kill('SIGKILL'); await gone;
    const r = await runProgram(path.join(progs, 'driver_vecadd'), [ptx], shimEnv(d.endpoint));
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toContain('ALL PASS');
  });

  it('a fault poisons the rest of its own process as on an H200, through the shim and on the FAKE alike', async () => {
    const real = fs.readFileSync(path.join(root, 'test/fixtures/cuda-programs/expected-fault_isolation.txt'), 'utf8')// `# unverified: …` marks a line no real driver has printed yet
      .split('\n').filter((l) => l.startsWith('CASE ')).map((l) => l.replace(/\s*#.*$/, '')).join('\n');
    const fake = await runProgram(path.join(progs, 'fault_isolation'), [ptx], { LD_LIBRARY_PATH: path.dirname(fakeLibcuda) });
    const remoted = await runProgram(path.join(progs, 'fault_isolation'), [ptx], shimEnv(d.endpoint));
    const cases = (out: string) => out.split('\n').filter((l) => l.startsWith('CASE ')).join('\n');
    expect(cases(fake.stdout)).toBe(real);
    expect(cases(remoted.stdout)).toBe(real);
  });

  it('a guest whose kernel faults does not affect the next guest (the driver would: one process per guest)', async () => {
    const f = await runProgram(path.join(progs, 'fault_isolation'), [ptx], shimEnv(d.endpoint));
    expect(f.code, f.stderr).toBe(0);
    expect(f.stdout).toMatch(/^CASE ctx_create_after 700$/m);
    const r = await runProgram(path.join(progs, 'driver_vecadd'), [ptx], shimEnv(d.endpoint));
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toContain('ALL PASS');
  });

  it('stopping the daemon ends its session processes and leaves no spare', async () => {
    const e = await startDaemon();
    const h = await new Promise<ChildProcess>((resolve) => {
      const p = spawn(path.join(progs, 'driver_vecadd'), [ptx, 'hold', '1024'], { env: { ...process.env, ...shimEnv(e.endpoint) }, stdio: ['ignore', 'pipe', 'pipe'] });
      p.stdout.on('data', (b) => { if (String(b).includes('READY')) resolve(p); });
    });
    const st = await e.status();
    const children = childrenOf(e.proc.pid!);
    expect(children).toContain(st.sessions[0].pid);
    expect(children.length).toBe(2); // the session and the spare
    const code = await e.stop();
    h.kill('SIGKILL');
    expect(code).toBe(0);
    expect(children.filter(alive)).toEqual([]);
  });
});
