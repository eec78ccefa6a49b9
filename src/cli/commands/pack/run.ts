import path from 'node:path';
import type { Command } from 'commander';
import { NotFoundError } from '../../../errors/index.js';
import { exitCodeOf } from '../../../vm/api/exec.js';
import { runEphemeral } from '../../../vm/api/run.js';
import { mergeSpec } from '../../../smolfile/merge.js';
import { machineService, progress } from '../../context.js';
import { terminalIo } from '../../exec-io.js';
import { addMachineOptionsNamed, addTerminalOptions, envFromList, machineFlagsSchema, parseFlags, secretsFromFlags, terminalFlags, volumeLabels, volumesFromFlags } from '../../machine-options.js';
import { checkVolumes } from '../../../vm/api/machines.js';
import { inspectArtifact } from '../../../artifact/index.js';
import fs from 'node:fs';

const packRunSchema = machineFlagsSchema.extend({ ...terminalFlags });

/** What `smol run` takes, minus what an artifact fixes itself (its image; --forkable, -s and --gpu are run's). */
const RUN_FLAGS = ['--cpus', '--mem', '--env', '--workdir', '--net', '--publish', '--allow', '--volume', '--allow-unsafe-volume', '--secret-env', '--secret-file'] as const;

const examples = `
Examples:
  $ smol pack run app.smolmachine                          # its entrypoint
  $ smol pack run app.smolmachine -- python3 -V            # another command
  $ smol pack run -e DEBUG=1 -w /srv --mem 1G app.smolmachine -- ./serve
  $ smol pack run -p 8080:80 app.smolmachine               # publish a guest port on 127.0.0.1:8080
  $ smol pack run -v ./data:/data:ro app.smolmachine -- ls /data
  $ smol pack run --secret-env API_TOKEN app.smolmachine     # read from the host now, never stored
`;

/**
 * `smol pack run FILE [-- CMD]`: an artifact in a throwaway machine (extracted once into the cache). A
 * memory-carrying artifact resumes where it was packed (the start hook, vm/resume.ts); where its state
 * cannot load (other resources, volumes), the disk boots and one line says why. Flags override the
 * manifest's resources, env and workdir as they override a Smolfile's in `smol run`.
 */
export function register(parent: Command): void {
  addMachineOptionsNamed(addTerminalOptions(parent.command('run')
    .description('run a .smolmachine in a throwaway machine (its entrypoint, or CMD); memory-carrying artifacts resume instead of booting')
    .argument('<file>', '.smolmachine artifact')
    .argument('[command...]', 'command and arguments (after --)')), RUN_FLAGS)
    .addHelpText('after', examples)
    .action(async (file: string, command: string[], opts: unknown) => {
      const o = parseFlags(packRunSchema, opts);
      const secrets = secretsFromFlags(opts);
      const abs = path.resolve(file);
      if (!fs.existsSync(abs)) throw new NotFoundError(`no such artifact: ${file}`);
      const { manifest } = await inspectArtifact(abs);
      const volumes = volumesFromFlags(o);
      const spec = mergeSpec(undefined, undefined, {
        image: abs, cpus: o.cpus ?? manifest.resources.cpus, memory: o.mem ?? manifest.resources.memoryMiB,
        env: { ...manifest.env, ...envFromList(o.env) }, workdir: o.workdir ?? manifest.workdir, command: manifest.entrypoint,
        net: o.net, ports: o.publish, allow: o.allow, volumes,
      });
      checkVolumes(spec.volumes, volumeLabels(spec.volumes, 0));
      const svc = machineService();
      const notice = manifest.resume ? await (await import('../../../vm/api/pack.js')).resumeNotice(svc, file, manifest, spec) : null;
      if (notice) process.stderr.write(`smol: ${notice}\n`);
      const argv = command.length ? command : spec.command ?? ['/bin/sh'];
      const term = terminalIo({ interactive: o.interactive, tty: o.tty, timeoutMs: o.timeout });
      const p = progress();
      try {
        const res = await runEphemeral(svc, spec, { argv, tty: term.tty, rows: process.stdout.rows, cols: process.stdout.columns },
          { ...term.io, onStart: (h) => { p.done(); term.io.onStart?.(h); } }, { signal: term.signal, onProgress: (m) => p.update(m), secrets });
        process.exitCode = exitCodeOf(res);
      } finally {
        p.done();
        term.restore();
      }
    });
}
