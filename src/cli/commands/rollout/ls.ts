import type { Command } from 'commander';
import { z } from 'zod';
import { printJson, printTable } from '../../output.js';
import { ledgerOption, withLedger } from '../ledger/open.js';

export const lsSchema = z.strictObject({ ledger: z.string().optional(), json: z.boolean().optional() });

export function register(parent: Command): void {
  ledgerOption(parent.command('ls')
    .description('list rollouts with their item counts')
    .option('--json', 'print as JSON'))
    .action(async (raw: unknown) => {
      const opts = lsSchema.parse(raw);
      const rows = await withLedger(opts.ledger, (l) => l.ledger.listRollouts());
      if (opts.json) return printJson(rows);
      printTable(['rollout', 'status', 'queued', 'leased', 'done', 'dead', 'canceled', 'trajectories', 'created'],
        rows.map((r) => [r.id, r.status, r.counts.queued, r.counts.leased, r.counts.done, r.counts.dead, r.counts.canceled, r.trajectories, new Date(r.createdAt).toISOString()]));
    });
}
