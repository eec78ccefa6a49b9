import type { Command } from 'commander';
import { z } from 'zod';
import { UserError } from '../../../errors/index.js';
import { parseLabelFlags } from '../../../smolfile/labels.js';
import { allowSchema, portsSchema } from '../../../smolfile/network.js';
import { cpusSchema, memorySchema } from '../../../smolfile/schema.js';
import { secretFlagsSchema } from '../../../smolfile/secrets.js';
import { updateMachine, type SpecPatch } from '../../../vm/api/machines.js';
import { machineService } from '../../context.js';
import { envFromList, envListSchema, parseFlags, volumesFromFlags } from '../../machine-options.js';
import { printJson } from '../../output.js';
import { machineView } from './view.js';

const collect = (v: string, prev: string[] = []) => [...prev, v];
/** `--no-publish` etc. arrive as false: an empty list. */
const list = <T extends z.ZodTypeAny>(s: T) => z.preprocess((v) => (v === false ? [] : v), s.optional());

const updateSchema = z.object({
  cpus: z.coerce.number().pipe(cpusSchema).optional(),
  mem: memorySchema.optional(),
  net: z.boolean().optional(),
  gpu: z.boolean().optional(),
  forkable: z.boolean().optional(),
  workdir: z.string().startsWith('/', 'must be an absolute guest path').optional(),
  env: list(envListSchema),
  publish: list(portsSchema),
  allow: list(z.array(allowSchema)),
  volume: list(z.array(z.string())),
  allowUnsafeVolume: z.boolean().optional(),
  label: z.array(z.string()).optional(),
  unlabel: z.array(z.string()).optional(),
  secrets: z.boolean().optional(),
  json: z.boolean().optional(),
}).passthrough();

/** What cannot change, and why (each is a flag of `machine create`). */
const FIXED: Record<string, string> = {
  image: 'the machine\'s disk is an overlay on its image\'s base; create a new machine (smol machine create NEW --image …) instead',
  smolfile: 'a Smolfile also declares the image, disk size and init, which are fixed once a machine exists; pass the fields to change as flags',
  from: 'the machine\'s disk is an overlay on the artifact\'s disk; create a new machine from it instead',
};

export function register(parent: Command): void {
  parent.command('update')
    .description('change a stopped machine\'s CPUs, memory, network, GPU, volumes, env, secrets or labels (for its next start)')
    .argument('<name>', 'machine name')
    .option('--cpus <n>', 'virtual CPUs')
    .option('--mem <size>', 'memory, in MiB or with a unit (512M, 1G)')
    .option('--net', 'give it egress (as in create)').option('--no-net', 'take egress away')
    .option('--gpu', 'forward CUDA/NVML calls').option('--no-gpu', 'stop forwarding CUDA/NVML calls')
    .option('--forkable', 'keep guest memory in a file so it can be forked').option('--no-forkable', 'boot with ordinary memory')
    .option('-w, --workdir <dir>', 'working directory in the guest')
    .option('-e, --env <K=V>', 'environment; replaces the machine\'s env (repeatable)', collect).option('--no-env', 'clear the environment')
    .option('-p, --publish <[ip:]hport:gport[/proto]>', 'published ports; replace the current ones (repeatable)', collect).option('--no-publish', 'publish no ports')
    .option('--allow <dest[:port]>', 'egress allow list; replaces the current one (repeatable)', collect).option('--no-allow', 'clear the allow list')
    .option('-v, --volume <host:guest[:ro]>', 'volumes; replace the current ones (repeatable)', collect).option('--no-volume', 'remove every volume')
    .option('--allow-unsafe-volume', 'let the -v flags share what smol refuses (as in create)')
    .option('--secret-env <NAME>', 'declared env secrets (names); replace the current ones (repeatable)', collect)
    .option('--secret-file <NAME=PATH>', 'declared secret files; replace the current ones (repeatable)', collect)
    .option('--no-secrets', 'declare no secrets')
    .option('--label <K=V>', 'add or change a label (repeatable; allowed while it runs)', collect)
    .option('--unlabel <K>', 'remove a label (repeatable; allowed while it runs)', collect)
    .option('--image <ref>', 'cannot change (the error says why)').option('-s, --smolfile <file>', 'cannot change (the error says why)').option('--from <file>', 'cannot change (the error says why)')
    .option('--json', 'print the machine as JSON')
    .action(async (name: string, opts: Record<string, unknown>) => {
      for (const k of Object.keys(FIXED)) if (opts[k] !== undefined) throw new UserError(`--${k} cannot be changed by update: ${FIXED[k]}`, { where: `--${k}` });
      const f = parseFlags(updateSchema, opts);
      const decl = parseFlags(secretFlagsSchema(process.cwd()), opts);
      const patch: SpecPatch = {
        cpus: f.cpus, memory: f.mem, net: f.net, gpu: f.gpu, forkable: f.forkable, workdir: f.workdir,
        env: f.env && (envFromList(f.env) ?? {}), ports: f.publish, allow: f.allow, volumes: f.volume && volumesFromFlags({ volume: f.volume, allowUnsafeVolume: f.allowUnsafeVolume }),
        secrets: f.secrets === false ? { env: [], files: {} } : {
          ...(opts.secretEnv !== undefined ? { env: decl.env } : {}), ...(opts.secretFile !== undefined ? { files: decl.files } : {}),
        } as SpecPatch['secrets'],
      };
      if (patch.secrets && !Object.keys(patch.secrets).length) delete patch.secrets;
      const labels = { set: parseLabelFlags(f.label), remove: f.unlabel };
      if (Object.values(patch).every((v) => v === undefined) && !f.label?.length && !f.unlabel?.length) {
        throw new UserError('nothing to update: pass at least one flag', { hint: `See: smol machine update --help (e.g. smol machine update ${name} --cpus 2 --mem 1G)` });
      }
      const svc = machineService();
      const r = await updateMachine(svc, name, patch, labels);
      for (const n of r.notices) process.stderr.write(`smol: ${n}\n`);
      if (f.json) return printJson({ ...machineView(svc, r.machine), changed: r.changed });
      process.stdout.write(r.changed.length ? `${r.machine.name}: ${r.changed.join(', ')} updated\n` : `${r.machine.name}: nothing changed\n`);
    });
}
