/** `smol run`: an ephemeral machine that exists for one command and is removed however the command ends. */
import type { Smolfile } from '../smolfile/schema.js';
import type { ExecRequest, Progress } from './engine.js';
import { execOnChannel, type ExecIo, type ExecResult } from './exec.js';
import type { MachineService } from './service.js';
import { attachGpu } from './gpu.js';

export interface RunOptions { onProgress?: Progress; bootTimeoutMs?: number; name?: string }

export async function runEphemeral(svc: MachineService, spec: Smolfile, req: ExecRequest, io: ExecIo, o: RunOptions = {}): Promise<ExecResult> {
  const rec = await svc.create(spec, { ephemeral: true, name: o.name, onProgress: o.onProgress });
  try {
    const started = await svc.start(rec.id, { keepChannel: true, onProgress: o.onProgress, bootTimeoutMs: o.bootTimeoutMs });
    const { ch, release } = started.channel!;
    const gpu = spec.gpu ? await attachGpu(ch, { home: svc.home }).catch(async (err) => { ch.close(); release(); throw err; }) : undefined;
    try {
      return await execOnChannel(ch, { cwd: spec.workdir, ...req, env: { ...spec.env, ...gpu?.env, ...(req.env ?? {}) } }, io);
    } finally {
      ch.close();
      release();
      await gpu?.close();
    }
  } finally {
    await svc.remove(rec.id, { force: true });
  }
}
