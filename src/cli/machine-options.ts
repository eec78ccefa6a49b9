/** Flags shared by `smol run` and `smol machine create`, and how they become a machine spec. */
import { parseDuration } from '../util/duration.js';
import { z } from 'zod';
import { resolveImageRef } from '../util/image-ref.js';
import type { Command } from 'commander';
import { Command as CommandClass, Option } from 'commander';
import { ValidationError } from '../errors/index.js';
import { loadSmolfile } from '../smolfile/load.js';
import { mergeSpec } from '../smolfile/merge.js';
import { cpusSchema, memorySchema, type Smolfile, type Volume } from '../smolfile/schema.js';
import { checkVolumes, flagLabel, parseVolumeFlag, type HostVolume } from '../vm/api/machines.js';
import { allowSchema, portsSchema } from '../smolfile/network.js';
import { parseLabelFlags } from '../smolfile/labels.js';
import { secretFlagsSchema } from '../smolfile/secrets.js';

const collect = (v: string, prev: string[] = []) => [...prev, v];

export function addMachineOptions(cmd: Command): Command {
  return cmd
    .option('--image <ref>', 'image: "default", a rootfs directory, or a docker save / OCI tarball')
    .option('-s, --smolfile <file>', 'read the machine declaration from a Smolfile')
    .option('--cpus <n>', 'virtual CPUs')
    .option('--mem <size>', 'memory, in MiB or with a unit (512M, 1G)')
    .option('-e, --env <K=V>', 'environment variable (repeatable)', collect)
    .option('-w, --workdir <dir>', 'working directory in the guest')
    .option('--net', 'give the machine egress to anywhere but the host and link-local (off by default)')
    .option('-p, --publish <[ip:]hport:gport[/proto]>', 'publish a guest port on the host, 127.0.0.1 unless an address is given (repeatable)', collect)
    .option('--allow <dest[:port]>', 'egress to this host name, address or CIDR only; host:PORT for one host port (repeatable)', collect)
    .option('--gpu', 'forward CUDA/NVML calls to the host GPU daemon')
    .option('-v, --volume <host:guest[:ro]>', 'share a host directory into the guest over virtiofs (repeatable)', collect)
    .option('--allow-unsafe-volume', 'let the -v flags share what smol refuses: /proc, /sys, /dev, its own home or assets, / read-write (docs/volumes.md)')
    .addOption(new Option('--forkable', 'keep guest memory in a file so the machine can be forked').hideHelp(false))
    .option('--label <K=V>', 'label the machine (repeatable); find it with smol machine ls --filter label=K=V', collect)
    .option('--secret-env <NAME>', 'pass host environment variable NAME to the guest command, never stored (repeatable)', collect)
    .option('--secret-file <NAME=PATH>', 'host file PATH as /run/secrets/NAME (tmpfs, 0400) for the guest command, never stored (repeatable)', collect);
}

/** `--secret-env` / `--secret-file` alone (machine exec takes these without the other machine flags). */
export function addSecretOptions(cmd: Command): Command {
  return cmd
    .option('--secret-env <NAME>', 'pass host environment variable NAME to the command, never stored (repeatable)', collect)
    .option('--secret-file <NAME=PATH>', 'host file PATH as /run/secrets/NAME (tmpfs, 0400), never stored (repeatable)', collect);
}

/** The secret declarations of the flags (names and host paths, never values). */
export const secretsFromFlags = (opts: unknown) => parseFlags(secretFlagsSchema(process.cwd()), opts);

/** -e NAME=value entries, repeatable; later entries win. */
export const envListSchema = z.array(z.string().regex(/^[A-Za-z_][A-Za-z0-9_]*=/, 'use NAME=value'));
export const envFromList = (list: string[] | undefined): Record<string, string> | undefined =>
  list && Object.fromEntries(list.map((e) => [e.slice(0, e.indexOf('=')), e.slice(e.indexOf('=') + 1)]));

export const machineFlagsSchema = z.object({
  image: z.string().min(1).optional(),
  smolfile: z.string().optional(),
  cpus: z.coerce.number().pipe(cpusSchema).optional(),
  mem: memorySchema.optional(),
  env: envListSchema.optional(),
  workdir: z.string().startsWith('/', 'must be an absolute guest path').optional(),
  net: z.boolean().optional(),
  publish: portsSchema.optional(),
  allow: z.array(allowSchema).optional(),
  gpu: z.boolean().optional(),
  forkable: z.boolean().optional(),
  volume: z.array(z.string()).optional(),
  allowUnsafeVolume: z.boolean().optional(),
  label: z.array(z.string()).optional(),
}).passthrough();

/**
 * The -v flags as volumes; --allow-unsafe-volume marks them (and only them: a Smolfile's volumes never) as
 * exempt from the host-path policy, in the spec, so the machine's later starts honour it too.
 */
export const volumesFromFlags = (f: { volume?: string[]; allowUnsafeVolume?: boolean }): HostVolume[] =>
  (f.volume ?? []).map((v) => ({ ...parseVolumeFlag(v), ...(f.allowUnsafeVolume ? { unsafe: true } : {}) }));

/** Bare numbers are seconds; at most 24 days, as everywhere (util/duration.ts). */
export const durationSchema = z.string().transform((v, ctx) => {
  const d = parseDuration(v, 's');
  if ('problem' in d) {
    ctx.addIssue({ code: 'custom', message: d.problem });
    return z.NEVER;
  }
  return d.ms;
});

/** Parse flags with a schema, naming the flag (--mem) in errors rather than the property. */
export function parseFlags<T extends z.ZodTypeAny>(schema: T, opts: unknown): z.output<T> {
  const r = schema.safeParse(opts);
  if (r.success) return r.data;
  throw new ValidationError('invalid options', r.error.issues.map((i) => ({
    path: `--${String(i.path[0] ?? '').replace(/[A-Z]/g, (c) => `-${c.toLowerCase()}`)}`,
    message: i.message,
  })));
}

export function specFromFlags(opts: unknown): Smolfile {
  const f = parseFlags(machineFlagsSchema, opts);
  const base = f.smolfile ? loadSmolfile(f.smolfile) : undefined;
  const env = envFromList(f.env);
  const volumes = volumesFromFlags(f);
  const spec = mergeSpec(base?.spec, base?.dir, {
    image: f.image === undefined || f.image === 'default' ? f.image : pathOf(f.image),
    cpus: f.cpus, memory: f.mem, net: f.net, ports: f.publish, allow: f.allow, gpu: f.gpu, forkable: f.forkable, env, workdir: f.workdir, volumes,
    labels: f.label && parseLabelFlags(f.label), secrets: secretsFromFlags(opts),
  });
  checkVolumes(spec.volumes, volumeLabels(spec.volumes, spec.volumes.length - volumes.length, f.smolfile));
  return spec;
}

/** Smolfile volumes first, then -v ones: errors name the Smolfile entry or the flag. */
export function volumeLabels(vs: readonly Volume[], fromFile: number, smolfile?: string): (i: number) => string {
  const flag = flagLabel(vs);
  return (i) => (i < fromFile ? `${smolfile ?? 'Smolfile'} volumes[${i}]` : flag(i));
}

/** A flag's image path is relative to the cwd (a Smolfile's to its directory, in mergeSpec). */
const pathOf = (p: string) => resolveImageRef(p, process.cwd());

/** The flags of every command that runs one guest command in the terminal (run, machine exec, pack run). */
export const terminalFlags = { timeout: durationSchema.optional(), interactive: z.boolean().optional(), tty: z.boolean().optional() };
export function addTerminalOptions(cmd: Command): Command {
  return cmd
    .option('--timeout <duration>', 'kill the command after this long (exit 124)')
    .option('-i, --interactive', 'forward stdin even when it is a terminal')
    .option('-t, --tty', 'give the command a terminal');
}

/** Some of addMachineOptions' options, for commands that take only those (pack run): one definition each. */
export function addMachineOptionsNamed(cmd: Command, longs: readonly string[]): Command {
  for (const opt of addMachineOptions(new CommandClass()).options) if (longs.includes(opt.long ?? '')) cmd.addOption(opt);
  return cmd;
}
