import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { PrerequisiteError } from '../../../src/errors/index.js';
import type { CpuStage } from '../../../src/rollout/manifest.js';
import { createStageRunner, ProcessStageRunner, prlimitArgs } from '../../../src/rollout/stage-runner.js';

const stage = (command: string[], limits: Partial<CpuStage['limits']> = {}): CpuStage =>
  ({ name: 's', kind: 'cpu', command, env: {}, limits: { maxOutputBytes: 1 << 20, ...limits } });

async function runIt(command: string[], o: { limits?: Partial<CpuStage['limits']>; timeoutMs?: number; input?: string; abortAfterMs?: number } = {}) {
  const runner = await ProcessStageRunner.create();
  const workDir = fs.mkdtempSync(path.join(os.tmpdir(), 'smol-stage-'));
  const inputPath = path.join(workDir, 'input');
  fs.writeFileSync(inputPath, o.input ?? 'hello');
  const ac = new AbortController();
  if (o.abortAfterMs) setTimeout(() => ac.abort(), o.abortAfterMs);
  const t0 = Date.now();
  const out = await runner.run({ stage: stage(command, o.limits), inputPath, workDir, env: { SMOL_SAMPLE_ID: 's7' }, timeoutMs: o.timeoutMs ?? 10_000, signal: ac.signal });
  return { ...out, ms: Date.now() - t0, text: out.output.toString() };
}

describe('process stage runner', () => {
  it('feeds the input on stdin and takes stdout as the output', async () => {
    const r = await runIt(['sh', '-c', 'tr a-z A-Z; echo " $SMOL_SAMPLE_ID"']);
    expect(r).toMatchObject({ exitCode: 0, timedOut: false, aborted: false });
    expect(r.text).toBe('HELLO s7\n');
  });

  it('prefers $SMOL_OUTPUT over stdout and reports stderr on failure', async () => {
    expect((await runIt(['sh', '-c', 'echo noise; echo real > "$SMOL_OUTPUT"'])).text).toBe('real\n');
    const bad = await runIt(['sh', '-c', 'echo broken >&2; exit 3']);
    expect(bad.exitCode).toBe(3);
    expect(bad.stderrTail).toBe('broken');
  });

  it('withholds the worker\'s credentials from the stage: ledger URL, gateway token, PostgreSQL and AWS secrets', async () => {
    const secret = { SMOL_LEDGER: 'postgres://u:pw@db/l', SMOL_GATEWAY_TOKEN: 'tok', PGPASSWORD: 'pw', AWS_SECRET_ACCESS_KEY: 'k', SMOL_KEEP_ME: 'kept' };
    const saved = Object.fromEntries(Object.keys(secret).map((k) => [k, process.env[k]]));
    Object.assign(process.env, secret);
    try {
      const r = await runIt(['sh', '-c', 'env | grep -E "^(SMOL_|PG|AWS_)" | sort']);
      expect(r.text).toContain('SMOL_KEEP_ME=kept');
      expect(r.text).toContain('SMOL_SAMPLE_ID=s7');
      expect(r.text).not.toMatch(/SMOL_LEDGER|SMOL_GATEWAY_TOKEN|PGPASSWORD|AWS_SECRET/);
    } finally {
      for (const [k, v] of Object.entries(saved)) if (v === undefined) delete process.env[k]; else process.env[k] = v;
    }
  });

  it('kills the whole process group at the timeout', async () => {
    const r = await runIt(['sh', '-c', 'sleep 30 & sleep 30'], { timeoutMs: 300 });
    expect(r.timedOut).toBe(true);
    expect(r.ms).toBeLessThan(5000);
  });

  it('aborts on cancellation', async () => {
    const r = await runIt(['sleep', '30'], { abortAfterMs: 200 });
    expect(r.aborted).toBe(true);
    expect(r.ms).toBeLessThan(5000);
  });

  it('enforces resource limits through prlimit', async () => {
    const cpu = await runIt(['sh', '-c', 'while :; do :; done'], { limits: { cpuSeconds: 1 }, timeoutMs: 15_000 });
    expect(cpu.timedOut).toBe(false);
    expect(cpu.signal).toMatch(/SIGXCPU|SIGKILL/);
    const big = await runIt(['sh', '-c', 'head -c 100000 /dev/zero > "$SMOL_OUTPUT"'], { limits: { maxOutputBytes: 1000 } });
    expect(big.exitCode === 0 && big.signal === null).toBe(false);
    expect(prlimitArgs({ maxOutputBytes: 10, cpuSeconds: 2, memoryMiB: 1, openFiles: 5 })).toEqual(['--fsize=10', '--cpu=2', '--as=1048576', '--nofile=5']);
  });

  it('a SIGKILLed worker takes its stage command and its background children with it', async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'smol-stage-'));
    const pidFile = path.join(dir, 'pid');
    const bgFile = path.join(dir, 'bg');
    fs.writeFileSync(path.join(dir, 'input'), '');
    // a stand-in worker: runs one stage that records its pid and sleeps
    const script = `const { ProcessStageRunner } = await import(${JSON.stringify(path.resolve('src/rollout/stage-runner.ts'))});
      const r = await ProcessStageRunner.create();
      await r.run({ stage: { name: 's', kind: 'cpu', command: ['sh', '-c', 'sleep 300 & echo $! > ${bgFile}; echo $$ > ${pidFile}; exec sleep 300'], env: {}, limits: { maxOutputBytes: 1000 } },
        inputPath: ${JSON.stringify(path.join(dir, 'input'))}, workDir: ${JSON.stringify(dir)}, env: {}, timeoutMs: 600000, signal: new AbortController().signal });`;
    const worker = spawn(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script], { stdio: 'ignore' });
    // a killed orphan stays a zombie until whoever inherited it reaps it (some PID 1s are slow to): not alive
    const alive = (pid: number) => {
      try { process.kill(pid, 0); } catch { return false; }
      try { return !/^\d+ \(.*\) Z/.test(fs.readFileSync(`/proc/${pid}/stat`, 'utf8')); } catch { return false; }
    };
    let pid = 0;
    for (let i = 0; i < 200 && !pid; i++) {
      await new Promise((r) => setTimeout(r, 50));
      pid = Number(fs.existsSync(pidFile) ? fs.readFileSync(pidFile, 'utf8').trim() : 0);
    }
    const bg = Number(fs.readFileSync(bgFile, 'utf8').trim());
    expect(pid).toBeGreaterThan(0);
    expect([alive(pid), alive(bg)]).toEqual([true, true]);
    worker.kill('SIGKILL');
    for (let i = 0; i < 200 && (alive(pid) || alive(bg)); i++) await new Promise((r) => setTimeout(r, 50));
    try {
      expect([alive(pid), alive(bg)]).toEqual([false, false]);
    } finally {
      for (const p of [pid, bg]) if (alive(p)) process.kill(p, 'SIGKILL');
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });

  it('refuses vm isolation unless a runner is injected', async () => {
    await expect(createStageRunner('vm')).rejects.toBeInstanceOf(PrerequisiteError);
    const fake = { isolation: 'vm' as const, run: async () => ({ exitCode: 0, signal: null, output: Buffer.from('vm'), stderrTail: '', timedOut: false, aborted: false }) };
    expect(await createStageRunner('vm', fake)).toBe(fake);
  });
});
