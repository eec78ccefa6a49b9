import fs from 'node:fs';
import path from 'node:path';
import { Option, type Command } from 'commander';
import { z } from 'zod';
import { packArtifact, type PackProgress, type ResolvedSource } from '../../../artifact/index.js';
import { ConflictError, UserError } from '../../../errors/index.js';
import { formatBytes, printJson } from '../../output.js';
import { machineService, machineSource } from '../../context.js';
import { spinnerTerminal } from '../../color.js';

const toInt = (v: string) => Number.parseInt(v, 10);

export const createSchema = z.object({
  fromVm: z.string().min(1).optional(),
  image: z.string().min(1).optional(),
  smolfile: z.string().min(1).optional(),
  disk: z.string().min(1).optional(),
  kernel: z.string().min(1).optional(),
  initrd: z.string().min(1).optional(),
  output: z.string().min(1),
  withMemory: z.boolean().default(false),
  sign: z.string().min(1).optional(),
  createdAt: z.string().datetime({ offset: true }).optional(),
  cpus: z.number().int().min(1).optional(),
  memory: z.number().int().min(16).optional(),
  kernelCmdline: z.string().optional(),
  force: z.boolean().default(false),
  json: z.boolean().default(false),
}).strict().superRefine((o, ctx) => {
  const sources = [o.fromVm && '--from-vm', o.image && '--image', o.smolfile && '-s', o.kernel && '--kernel'].filter(Boolean);
  if (sources.length !== 1) {
    ctx.addIssue({ code: 'custom', path: ['fromVm'], message: `give exactly one of --from-vm, --image, -s or --kernel/--initrd (got ${sources.join(', ') || 'none'})` });
  }
  if (o.kernel && !o.initrd) ctx.addIssue({ code: 'custom', path: ['initrd'], message: '--kernel needs --initrd' });
  if (!o.kernel && (o.initrd || o.disk)) ctx.addIssue({ code: 'custom', path: ['kernel'], message: '--disk and --initrd need --kernel' });
  if (o.withMemory && (o.kernel || o.image)) ctx.addIssue({ code: 'custom', path: ['withMemory'], message: '--with-memory needs a running machine (--from-vm or -s)' });
  // the saved state is of the machine as it runs: another size recorded beside it could never resume
  if (o.withMemory && (o.cpus !== undefined || o.memory !== undefined)) ctx.addIssue({ code: 'custom', path: ['withMemory'], message: '--cpus and --memory cannot be recorded with --with-memory (the state has the running machine\'s)' });
});

/** SOURCE_DATE_EPOCH (reproducible-builds.org) pins the creation time when --created-at is absent. */
function defaultCreatedAt(): string | undefined {
  const e = process.env.SOURCE_DATE_EPOCH;
  if (!e) return undefined;
  if (!/^\d+$/.test(e)) throw new UserError(`SOURCE_DATE_EPOCH must be whole seconds, got ${JSON.stringify(e)}`);
  return new Date(Number(e) * 1000).toISOString();
}

async function resolve(o: z.infer<typeof createSchema>): Promise<ResolvedSource> {
  const src = await machineSource();
  if (o.fromVm) return src.fromVm(o.fromVm, { withMemory: o.withMemory });
  if (o.image) return src.fromImage(o.image);
  if (o.smolfile) return src.fromSmolfile(o.smolfile, { withMemory: o.withMemory });
  return { disk: o.disk, kernel: o.kernel!, initrd: o.initrd!, kernelCmdline: o.kernelCmdline };
}

/** The volumes the packed machine has (or its Smolfile declares): never packed, said so. */
async function omittedVolumes(o: z.infer<typeof createSchema>): Promise<{ host: string; guest: string }[]> {
  if (o.fromVm) return machineService().store.get(o.fromVm).spec.volumes ?? [];
  if (o.smolfile) return (await import('../../../smolfile/load.js')).loadSmolfile(o.smolfile).spec.volumes;
  return [];
}

export function register(parent: Command): void {
  parent.command('create')
    .description('pack a machine (disk, kernel, initramfs, optionally warm memory) into one .smolmachine file')
    .option('--from-vm <name>', 'pack an existing machine')
    .option('--image <ref>', 'pack an image as a fresh machine')
    .option('-s, --smolfile <file>', 'pack the machine a Smolfile describes')
    .requiredOption('-o, --output <file>', 'where to write the artifact')
    .option('--with-memory', 'also pack the running machine\'s memory and device state (started --forkable; paused only while they are saved), so the artifact resumes instead of booting')
    .option('--sign <key>', 'sign with this ed25519 private key (from `smol pack keygen`)')
    .option('--created-at <iso>', 'creation time to record (default: $SOURCE_DATE_EPOCH, else now); fixed input + fixed time = identical bytes')
    .option('--force', 'replace the output file if it exists')
    .option('--json', 'print the result as JSON')
    .addOption(new Option('--disk <file>', 'disk image (qcow2 chain or raw) to pack').hideHelp())
    .addOption(new Option('--kernel <file>', 'guest kernel (vmlinux or bzImage)').hideHelp())
    .addOption(new Option('--initrd <file>', 'guest initramfs').hideHelp())
    .addOption(new Option('--kernel-cmdline <args>', 'kernel command line to record').hideHelp())
    .addOption(new Option('--cpus <n>', 'vCPUs to record').argParser(toInt).hideHelp())
    .addOption(new Option('--memory <mib>', 'guest memory (MiB) to record').argParser(toInt).hideHelp())
    .action(async (raw: Record<string, unknown>) => {
      const o = createSchema.parse(raw);
      const spinner = !o.json && spinnerTerminal() ? (await import('ora')).default({ stream: process.stderr, text: 'packing' }).start() : null;
      // before resolving: a memory pack pauses the machine and moves it onto a new overlay, not to be wasted
      if (!o.force && fs.existsSync(o.output)) throw new ConflictError(`${path.resolve(o.output)} already exists`, { where: o.output, hint: 'Choose another path or pass --force.' });
      const omitted = await omittedVolumes(o);
      if (omitted.length) {
        process.stderr.write(`smol: volumes are not packed (${omitted.map((v) => `${v.host}:${v.guest}`).join(', ')}): an artifact carries the machine, not host directories; pass -v again to \`smol pack run\` or \`smol machine create --from\`\n`);
      }
      const source = await resolve(o);
      const { release, captured, ...inputs } = source;
      try {
        const r = await packArtifact({
          ...inputs, out: o.output, signKey: o.sign, force: o.force, createdAt: o.createdAt ?? defaultCreatedAt(),
          cpus: o.cpus ?? inputs.cpus, memoryMiB: o.memory ?? inputs.memoryMiB,
        }, (p: PackProgress) => { if (spinner) spinner.text = p.entry ? `${p.phase} ${p.entry}` : p.phase; });
        spinner?.stop();
        if (o.json) return printJson({ out: r.out, size: r.size, digest: r.digest, signed: r.signed, captured, manifest: r.manifest });
        const sig = r.manifest.signature ? `, signed by ${r.manifest.signature.keyId}` : '';
        const warm = r.manifest.resume ? `, with memory: resumes instead of booting${captured ? `; the machine paused ${Math.round(captured.pausedMs)} ms` : ''}` : '';
        process.stdout.write(`packed ${r.out} (${formatBytes(r.size)}, ${r.manifest.entries.length} entries${sig}${warm})\ndigest ${r.digest}\n`);
      } finally {
        spinner?.stop();
        await release?.();
      }
    });
}
