import type { Command } from 'commander';
import { z } from 'zod';
import { NotFoundError } from '../../../errors/index.js';
import { printJson } from '../../output.js';
import { ledgerOption, withLedger } from '../ledger/open.js';

export const cancelSchema = z.strictObject({ ledger: z.string().optional(), json: z.boolean().optional() });

export function register(parent: Command): void {
  ledgerOption(parent.command('cancel')
    .description('cancel a rollout: queued items stop, running ones are aborted at their next lease renewal')
    .argument('<rollout>', 'rollout id')
    .option('--json', 'print as JSON'))
    .action(async (id: string, raw: unknown) => {
      const opts = cancelSchema.parse(raw);
      const r = await withLedger(opts.ledger, async (l) => {
        if (!(await l.ledger.getRollout(id))) throw new NotFoundError(`rollout ${id} not found`);
        return l.ledger.cancelRollout(id);
      });
      if (opts.json) printJson({ rolloutId: id, ...r });
      else process.stdout.write(`canceled rollout ${id}: ${r.canceled} items stopped\n`);
    });
}
