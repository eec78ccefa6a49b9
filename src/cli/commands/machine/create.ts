import path from 'node:path';
import type { Command } from 'commander';
import { UserError } from '../../../errors/index.js';
import { machineService, progress } from '../../context.js';
import { addMachineOptions, specFromFlags } from '../../machine-options.js';
import { printJson } from '../../output.js';
import { checkPortsFree } from '../../../vm/api/machines.js';
import { machineView } from './view.js';

type CreateFlags = { start?: boolean; json?: boolean; from?: string; image?: string; smolfile?: string; cpus?: string; mem?: string; workdir?: string; env?: string[] };

/**
 * With --from, the artifact's recorded shape (vCPUs, memory, workdir, env) is the default: a memory-carrying
 * artifact resumes only into a machine of the shape it was packed from. Flags (or a Smolfile, -s) override.
 */
async function artifactDefaults(file: string): Promise<{ cpus: string; mem: string; workdir?: string; env: string[]; manifest: import('../../../artifact/index.js').ArtifactManifest }> {
  const { inspectArtifact } = await import('../../../artifact/index.js'); // artifact code loads only for --from
  const { manifest: m } = await inspectArtifact(path.resolve(file));
  return { cpus: String(m.resources.cpus), mem: String(m.resources.memoryMiB), workdir: m.workdir, env: Object.entries(m.env ?? {}).map(([k, v]) => `${k}=${v}`), manifest: m };
}

export function register(parent: Command): void {
  addMachineOptions(parent.command('create'))
    .description('create a persistent machine (its disk survives stop/start)')
    .argument('<name>', 'machine name')
    .option('--from <file>', 'create it from a .smolmachine artifact (one with memory resumes at its first start)')
    .option('--start', 'start it right away')
    .option('--json', 'print the machine as JSON')
    .addHelpText('after', `
Examples:
  $ smol machine create web --start                    # the default image; its disk survives stop/start
  $ smol machine create web -s Smolfile                # from a Smolfile (YAML, or smolvm's TOML)
  $ smol machine create db --image ./rootfs --mem 1G --cpus 2 -p 5432:5432
  $ smol machine create app --from app.smolmachine     # from a packed artifact
  $ smol machine shell web                             # then: a login shell in it
`)
    .action(async (name: string, opts: CreateFlags) => {
      if (opts.from && opts.image) throw new UserError('--from and --image both name the image; pass one');
      const art = opts.from ? await artifactDefaults(opts.from) : undefined;
      const spec = specFromFlags(art && !opts.smolfile ? {
        ...opts, image: opts.from, cpus: opts.cpus ?? art.cpus, mem: opts.mem ?? art.mem, workdir: opts.workdir ?? art.workdir, env: [...art.env, ...(opts.env ?? [])],
      } : { ...opts, image: opts.from ?? opts.image });
      const svc = machineService();
      const p = progress(opts.json);
      try {
        if (art?.manifest.resume) {
          const notice = await (await import('../../../vm/api/pack.js')).resumeNotice(svc, opts.from!, art.manifest, spec);
          if (notice) process.stderr.write(`smol: ${notice}\n`);
        }
        if (opts.start) await checkPortsFree(spec.ports, name); // a taken host port: nothing made
        let rec = await svc.create(spec, { name, onProgress: (m) => p.update(m) });
        if (opts.start) rec = await svc.start(rec.id, { onProgress: (m) => p.update(m) });
        p.done();
        if (opts.json) printJson(machineView(svc, rec));
        else process.stdout.write(`${rec.name}\n`);
      } catch (err) {
        p.fail();
        throw err;
      }
    });
}
