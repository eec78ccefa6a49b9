import type { Command } from 'commander';
import { z } from 'zod';
import { ForkError, UserError } from '../../errors/index.js';
import { forkMachine, parseEnvFlags, type CloneOutcome } from '../../vm/api/fork.js';
import { FORK_READY_TIMEOUT_MS } from '../../vm/api/limits.js';
import { machineService, progress } from '../context.js';
import { durationSchema, parseFlags } from '../machine-options.js';
import { parseLabelFlags } from '../../smolfile/labels.js';
import { formatDuration, printJson, printTable } from '../output.js';

const collect = (v: string, prev: string[] = []) => [...prev, v];

const forkSchema = z.object({
  count: z.coerce.number().int('must be a whole number').min(1, 'must be at least 1').max(64, 'at most 64 clones per fork').optional(),
  namePrefix: z.string().min(1).optional(),
  env: z.array(z.string().regex(/^[A-Za-z_][A-Za-z0-9_]*=/, 'use NAME=value')).optional(),
  waitReady: z.boolean().optional(),
  readyTimeout: durationSchema.optional(),
  hold: z.boolean().optional(),
  save: z.string().min(1).optional(),
  from: z.string().min(1).optional(),
  json: z.boolean().optional(),
  label: z.array(z.string()).optional(),
});

function printClones(clones: CloneOutcome[]): void {
  printTable(['CLONE', 'STATE', 'RUNNING', 'READY'], clones.map((c) => [
    c.name, c.ok ? 'running' : `failed: ${c.error}`, c.runningMs === undefined ? null : formatDuration(c.runningMs), c.readyMs === undefined ? null : formatDuration(c.readyMs),
  ]));
}

function failedClones(where: string, clones: CloneOutcome[]): void {
  const failed = clones.filter((c) => !c.ok);
  if (failed.length) throw new ForkError(`${failed.length} of ${clones.length} clones failed to start; the others are running`, { where });
}

export function register(program: Command): void {
  program.command('fork')
    .description('clone a running forkable machine into N machines that continue from this moment; or save that moment once (--save) and clone it later (--from)')
    .argument('[name]', 'the running machine to fork (started with --forkable); omitted with --from')
    .option('-n, --count <n>', 'how many clones (default 1; with --save, none unless given)')
    .option('--name-prefix <prefix>', 'clones are named PREFIX1, PREFIX2, … (default NAME- or POINT-)')
    .option('-e, --env <K=V>', 'environment for the clones; {index}, {name} and {count} expand per clone (repeatable)', collect)
    .option('--wait-ready', 'wait until a workload in the machine runs smol-fork-ready, then fork')
    .option('--ready-timeout <duration>', `how long --wait-ready waits (default ${FORK_READY_TIMEOUT_MS / 60_000}m)`)
    .option('--hold', 'leave the parent paused after the fork (shorter pause, no memory copy)')
    .option('--save <point>', 'freeze this moment as a named fork point (one pause); clones start from it later with --from')
    .option('--from <point>', 'start clones from a saved fork point; the machine it came from is not touched')
    .option('--json', 'print the result as JSON')
    .option('--label <K=V>', 'label the clones, over the labels they inherit from the parent (repeatable)', collect)
    .addHelpText('after', `
Examples:
  $ smol machine start web --forkable && smol fork web          # one clone, named web-1
  $ smol fork web -n 8 --name-prefix worker                     # worker1 … worker8
  $ smol fork web -n 4 -e SHARD={index} -e TOTAL={count}        # per-clone environment
  $ smol fork web --wait-ready -n 2                             # fork once the workload runs smol-fork-ready
  $ smol fork web --save ready && smol fork --from ready -n 8   # save the moment once, clone it any number of times
`)
    .action(async (name: string | undefined, opts: unknown) => {
      const o = parseFlags(forkSchema, opts);
      if (o.from && name) throw new UserError(`give either a machine or --from, not both (got "${name}" and --from ${o.from})`, { hint: `Clone the saved point: smol fork --from ${o.from}` });
      if (!o.from && !name) throw new UserError('missing the machine to fork', { hint: 'smol fork NAME, or smol fork --from POINT for a saved fork point' });
      if ((o.save || o.from) && (o.hold || o.waitReady)) throw new UserError('--hold and --wait-ready apply to a plain fork only', { where: o.hold ? '--hold' : '--wait-ready', hint: 'A saved point never holds the machine; run smol-fork-ready in it before saving if it must wait.' });
      if (o.save && o.from) throw new UserError('--save and --from cannot be combined', { hint: 'Save a point from a machine: smol fork NAME --save POINT' });
      const p = progress(o.json);
      const svc = machineService();
      try {
        if (o.save || o.from) {
          const { saveForkPoint } = await import('../../vm/api/fork.js');
          const { forkFromPoint } = await import('../../vm/api/fork.js');
          const saved = o.save ? await saveForkPoint(svc, name!, o.save, { onProgress: (m) => p.update(m) }) : null;
          const point = o.from ?? o.save!;
          const clones = o.from || o.count ? await forkFromPoint(svc, point, { count: o.count ?? 1, namePrefix: o.namePrefix, env: parseEnvFlags(o.env), labels: parseLabelFlags(o.label), onProgress: (m) => p.update(m) }) : null;
          p.done();
          if (o.json) printJson({ saved, ...(clones ?? {}) });
          else {
            if (saved) process.stdout.write(`saved ${saved.point} from ${saved.machine}: paused ${formatDuration(saved.pausedMs)}, disk chain ${saved.chainDepth} files${saved.merged ? ` (merged ${saved.merged.merged} layers)` : ''}\n`);
            if (clones) {
              printClones(clones.clones);
              process.stdout.write(`${clones.clones.filter((c) => c.ok).length}/${clones.clones.length} clones from ${point} in ${formatDuration(clones.totalMs)}; nothing paused\n`);
            }
          }
          if (clones) failedClones(point, clones.clones);
          return;
        }
        const r = await forkMachine(svc, name!, {
          count: o.count ?? 1, namePrefix: o.namePrefix, env: parseEnvFlags(o.env), waitReady: o.waitReady, readyTimeoutMs: o.readyTimeout,
          hold: o.hold, labels: parseLabelFlags(o.label), onProgress: (m) => p.update(m),
        });
        p.done();
        if (o.json) {
          printJson(r);
        } else {
          printClones(r.clones);
          process.stdout.write(`${r.parent} paused ${formatDuration(r.pausedMs)}${r.held ? ' (held)' : ''}; ${r.clones.filter((c) => c.ok).length}/${r.clones.length} clones in ${formatDuration(r.totalMs)}\n`);
        }
        failedClones(r.parent, r.clones);
      } catch (err) {
        p.fail();
        throw err;
      }
    });
}
