import type { Command } from 'commander';
import { z } from 'zod';
import { NotFoundError } from '../../../errors/index.js';
import { printJson, printTable } from '../../output.js';
import { ledgerOption, withLedger } from '../ledger/open.js';

export const showSchema = z.strictObject({ ledger: z.string().optional(), json: z.boolean().optional(), limit: z.coerce.number().int().positive().default(50) });

export function register(parent: Command): void {
  ledgerOption(parent.command('show')
    .description('show a rollout: counts, its items (stage, attempt, status, last error) and trajectories')
    .argument('<rollout>', 'rollout id (the manifest name)')
    .option('--limit <n>', 'items to list', '50')
    .option('--json', 'print as JSON'))
    .action(async (id: string, raw: unknown) => {
      const opts = showSchema.parse(raw);
      const data = await withLedger(opts.ledger, async (l) => {
        const rollout = await l.ledger.getRollout(id);
        if (!rollout) throw new NotFoundError(`rollout ${id} not found`, { hint: 'List rollouts with `smol rollout ls`.' });
        return { rollout, items: await l.ledger.listItems(id, opts.limit), trajectories: await l.ledger.trajectories(id) };
      });
      if (opts.json) return printJson(data);
      const r = data.rollout;
      process.stdout.write(`rollout ${r.id} (${r.status}), environment ${r.envVersion}, manifest ${r.manifestDigest.slice(0, 19)}\n`);
      process.stdout.write(`items: ${Object.entries(r.counts).map(([k, v]) => `${v} ${k}`).join(', ')}; trajectories: ${r.trajectories}\n`);
      printTable(['item', 'sample', 'stage', 'status', 'attempt', 'last error'],
        data.items.map((i) => [i.id, i.sampleId, i.stage, i.status, `${i.attempt}/${i.maxAttempts}`, i.lastError?.slice(0, 60)]));
    });
}
