import type { Command } from 'commander';
import { z } from 'zod';
import { machineService, progress } from '../context.js';
import { parseFlags } from '../machine-options.js';
import { formatBytes, formatDuration, printJson, printTable } from '../output.js';

const rmSchema = z.object({ force: z.boolean().optional(), json: z.boolean().optional() });

/** `smol snapshot …`: saved fork points (docs/fork.md). `save` is `smol fork NAME --save POINT` under the name a user may look for. */
export function register(program: Command): void {
  const snap = program.command('snapshot').description('saved fork points: freeze a running machine once, clone it any number of times (smol fork --from)');
  snap.command('save')
    .description('save a running forkable machine as a fork point (same as smol fork NAME --save POINT)')
    .argument('<machine>', 'the running machine (started with --forkable)')
    .argument('<point>', 'the fork point\'s name')
    .option('--json', 'print the result as JSON')
    .action(async (machine: string, point: string, opts: { json?: boolean }) => {
      const { saveForkPoint } = await import('../../vm/api/fork.js');
      const p = progress(opts.json);
      try {
        const r = await saveForkPoint(machineService(), machine, point, { onProgress: (m) => p.update(m) });
        p.done();
        if (opts.json) printJson(r);
        else process.stdout.write(`saved ${r.point} from ${r.machine}: paused ${formatDuration(r.pausedMs)}, disk chain ${r.chainDepth} files${r.merged ? ` (merged ${r.merged.merged} layers)` : ''}\n`);
      } catch (err) {
        p.fail();
        throw err;
      }
    });
  snap.command('ls')
    .description('list saved fork points with what they hold and the clones using them')
    .option('--json', 'print as JSON')
    .action(async (opts: { json?: boolean }) => {
      const { listPoints } = await import('../../vm/api/machines.js');
      const points = listPoints(machineService());
      if (opts.json) return printJson(points);
      printTable(['POINT', 'MACHINE', 'MEMORY', 'TEMPLATE', 'STATE', 'DISK', 'CLONES', 'CREATED'], points.map((v) => [
        v.name, v.machineGone ? `${v.machine} (removed)` : v.machine, `${v.memoryMiB} MiB`, formatBytes(v.sizes.templateBytes), formatBytes(v.sizes.stateBytes),
        formatBytes(v.sizes.diskBytes), v.clones.length, v.createdAt,
      ]));
    });
  snap.command('rm')
    .description('remove a saved fork point (refused while clones use it)')
    .argument('<point>', 'the fork point')
    .option('-f, --force', 'remove the name even while clones use it; its files are freed with the last clone')
    .option('--json', 'print the result as JSON')
    .action(async (point: string, opts: unknown) => {
      const o = parseFlags(rmSchema, opts);
      const { removePoint } = await import('../../vm/api/machines.js');
      const r = removePoint(machineService(), point, { force: o.force });
      if (o.json) return printJson({ point, ...r });
      process.stdout.write(r.freed ? `removed ${point}\n` : `removed the name ${point}; its files go with its last clone (${r.clones.length} left)\n`);
    });
}
