import type { Command } from 'commander';
import { z } from 'zod';
import { ForkError } from '../../errors/index.js';
import { forkMachine, parseEnvFlags } from '../../vm/fork/index.js';
import { machineService, progress } from '../context.js';
import { durationSchema, parseFlags } from '../machine-options.js';
import { parseLabelFlags } from '../../smolfile/labels.js';
import { formatDuration, printJson, printTable } from '../output.js';

const collect = (v: string, prev: string[] = []) => [...prev, v];

const forkSchema = z.object({
  count: z.coerce.number().int('must be a whole number').min(1, 'must be at least 1').max(64, 'at most 64 clones per fork').default(1),
  namePrefix: z.string().min(1).optional(),
  env: z.array(z.string().regex(/^[A-Za-z_][A-Za-z0-9_]*=/, 'use NAME=value')).optional(),
  waitReady: z.boolean().optional(),
  readyTimeout: durationSchema.optional(),
  hold: z.boolean().optional(),
  json: z.boolean().optional(),
  label: z.array(z.string()).optional(),
});

export function register(program: Command): void {
  program.command('fork')
    .description('clone a running forkable machine into N machines that continue from this moment')
    .argument('<name>', 'the running machine to fork (started with --forkable)')
    .option('-n, --count <n>', 'how many clones (default 1)')
    .option('--name-prefix <prefix>', 'clones are named PREFIX1, PREFIX2, … (default NAME-)')
    .option('-e, --env <K=V>', 'environment for the clones; {index}, {name} and {count} expand per clone (repeatable)', collect)
    .option('--wait-ready', 'wait until a workload in the machine runs smol-fork-ready, then fork')
    .option('--ready-timeout <duration>', 'how long --wait-ready waits (default 5m)')
    .option('--hold', 'leave the parent paused after the fork (shorter pause, no memory copy)')
    .option('--json', 'print the result as JSON')
    .option('--label <K=V>', 'label the clones, over the labels they inherit from the parent (repeatable)', collect)
    .addHelpText('after', `
Examples:
  $ smol machine start web --forkable && smol fork web          # one clone, named web-1
  $ smol fork web -n 8 --name-prefix worker                     # worker1 … worker8
  $ smol fork web -n 4 -e SHARD={index} -e TOTAL={count}        # per-clone environment
  $ smol fork web --wait-ready -n 2                             # fork once the workload runs smol-fork-ready
`)
    .action(async (name: string, opts: unknown) => {
      const o = parseFlags(forkSchema, opts);
      const p = progress(o.json);
      try {
        const r = await forkMachine(machineService(), name, {
          count: o.count, namePrefix: o.namePrefix, env: parseEnvFlags(o.env), waitReady: o.waitReady, readyTimeoutMs: o.readyTimeout,
          hold: o.hold, labels: parseLabelFlags(o.label), onProgress: (m) => p.update(m),
        });
        p.done();
        const failed = r.clones.filter((c) => !c.ok);
        if (o.json) {
          printJson(r);
        } else {
          printTable(['CLONE', 'STATE', 'RUNNING', 'READY'], r.clones.map((c) => [
            c.name, c.ok ? 'running' : `failed: ${c.error}`, c.runningMs === undefined ? null : formatDuration(c.runningMs), c.readyMs === undefined ? null : formatDuration(c.readyMs),
          ]));
          process.stdout.write(`${r.parent} paused ${formatDuration(r.pausedMs)}${r.held ? ' (held)' : ''}; ${r.clones.length - failed.length}/${r.clones.length} clones in ${formatDuration(r.totalMs)}\n`);
        }
        if (failed.length) throw new ForkError(`${failed.length} of ${r.clones.length} clones failed to start; the others are running`, { where: r.parent });
      } catch (err) {
        p.fail();
        throw err;
      }
    });
}
