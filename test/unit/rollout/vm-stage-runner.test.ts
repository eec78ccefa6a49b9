import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { describe, expect, it, vi } from 'vitest';
import type { RunOptions } from '../../../src/vm/run.js';
import type { MachineService } from '../../../src/vm/service.js';
import type { Smolfile } from '../../../src/smolfile/schema.js';
import type { CpuStage } from '../../../src/rollout/manifest.js';

// a throwaway machine that never finishes booting: only its signal ends it, as runEphemeral's abort does
const seen: RunOptions[] = [];
vi.mock('../../../src/vm/run.js', () => ({
  runEphemeral: (_svc: unknown, _spec: unknown, _req: unknown, _io: unknown, o: RunOptions) => {
    seen.push(o);
    return new Promise((_resolve, reject) => o.signal?.addEventListener('abort', () => reject(new Error('interrupted')), { once: true }));
  },
}));
const { VmStageRunner } = await import('../../../src/rollout/vm-stage-runner.js');

const svc = { store: { list: () => [], find: () => null }, list: async () => [] } as unknown as MachineService;
const stage: CpuStage = { name: 's', kind: 'cpu', command: ['true'], env: {}, limits: { maxOutputBytes: 1 << 20 } } as CpuStage;

async function attempt(o: { timeoutMs: number; abortAfterMs?: number }) {
  const runner = await VmStageRunner.create({ svc, spec: {} as Smolfile });
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'smol-vmstage-'));
  fs.writeFileSync(path.join(dir, 'input'), 'x');
  const ac = new AbortController();
  if (o.abortAfterMs !== undefined) setTimeout(() => ac.abort(), o.abortAfterMs);
  try {
    return await runner.run({ stage, inputPath: path.join(dir, 'input'), workDir: dir, env: {}, timeoutMs: o.timeoutMs, signal: ac.signal });
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

describe('vm stage runner, throwaway machine', () => {
  it('stops a machine still booting when the attempt is canceled (the signal reaches runEphemeral)', async () => {
    const r = await attempt({ timeoutMs: 60_000, abortAfterMs: 50 });
    expect(r).toMatchObject({ aborted: true, timedOut: false, exitCode: null, stderrTail: '' });
    expect(seen.at(-1)?.signal?.aborted).toBe(true);
  });

  it('stops a machine still booting at the attempt timeout', async () => {
    const r = await attempt({ timeoutMs: 100 });
    expect(r).toMatchObject({ aborted: false, timedOut: true, exitCode: null, stderrTail: '' });
    expect(seen.at(-1)?.signal?.aborted).toBe(true);
  });
});
