import path from 'node:path';
import type { Command } from 'commander';
import { z } from 'zod';
import { NotFoundError } from '../../../errors/index.js';
import { exitCodeOf } from '../../../vm/exec.js';
import { runEphemeral } from '../../../vm/run.js';
import { mergeSpec } from '../../../smolfile/merge.js';
import { machineService, progress } from '../../context.js';
import { terminalIo } from '../../exec-io.js';
import { addTerminalOptions, parseFlags, terminalFlags } from '../../machine-options.js';
import { checkVolumes, parseVolumeFlag } from '../../../vm/volumes/spec.js';
import { inspectArtifact } from '../../../artifact/index.js';
import fs from 'node:fs';

const packRunSchema = z.object({ ...terminalFlags, net: z.boolean().optional(), volume: z.array(z.string()).optional() });

/**
 * `smol pack run FILE [-- CMD]`: an artifact in a throwaway machine (extracted once into the cache). A
 * memory-carrying artifact resumes where it was packed (the start hook, vm/resume.ts); where its state
 * cannot load, the disk boots and one line says why.
 */
export function register(parent: Command): void {
  addTerminalOptions(parent.command('run')
    .description('run a .smolmachine in a throwaway machine (its entrypoint, or CMD); memory-carrying artifacts resume instead of booting')
    .argument('<file>', '.smolmachine artifact')
    .argument('[command...]', 'command and arguments (after --)'))
    .option('--net', 'give the machine user-mode networking (one packed with networking resumes only with it)')
    .option('-v, --volume <host:guest[:ro]>', 'share a host directory into the guest over virtiofs (repeatable; the machine boots: no resume, no boot snapshot)', (v: string, p: string[] = []) => [...p, v])
    .action(async (file: string, command: string[], opts: unknown) => {
      const o = parseFlags(packRunSchema, opts);
      const abs = path.resolve(file);
      if (!fs.existsSync(abs)) throw new NotFoundError(`no such artifact: ${file}`);
      const { manifest } = await inspectArtifact(abs);
      const spec = mergeSpec(undefined, undefined, {
        image: abs, cpus: manifest.resources.cpus, memory: manifest.resources.memoryMiB,
        env: manifest.env ?? {}, workdir: manifest.workdir, command: manifest.entrypoint, net: o.net,
        volumes: (o.volume ?? []).map((v) => parseVolumeFlag(v)),
      });
      checkVolumes(spec.volumes);
      const svc = machineService();
      const notice = manifest.resume ? await (await import('../../../vm/resume.js')).resumeNotice(svc, file, manifest, spec) : null;
      if (notice) process.stderr.write(`smol: ${notice}\n`);
      const argv = command.length ? command : spec.command ?? ['/bin/sh'];
      const term = terminalIo({ interactive: o.interactive, tty: o.tty, timeoutMs: o.timeout });
      const p = progress();
      try {
        const res = await runEphemeral(svc, spec, { argv, tty: term.tty, rows: process.stdout.rows, cols: process.stdout.columns },
          { ...term.io, onStart: (h) => { p.done(); term.io.onStart?.(h); } }, { onProgress: (m) => p.update(m) });
        process.exitCode = exitCodeOf(res);
      } finally {
        p.done();
        term.restore();
      }
    });
}
