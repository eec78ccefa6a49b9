import type { Command } from 'commander';
import { z } from 'zod';
import { runSetup } from '../../vm/api/host.js';
import { assetsHome } from '../../util/paths.js';
import { formatDuration, printJson, printTable } from '../output.js';

export const setupSchema = z.object({ json: z.boolean().optional(), refresh: z.boolean().optional() }).strict();

/** `smol setup`: fetch the guest kernel and build the default images (idempotent, fast when done). */
export function register(program: Command): void {
  program.command('setup')
    .description('fetch the guest kernel and build the default initramfs and disk (safe to re-run)')
    .option('--refresh', 'look for a newer guest kernel package even if one is present')
    .option('--json', 'print the steps as JSON')
    .action(async (raw: Record<string, unknown>) => {
      const o = setupSchema.parse(raw);
      const log = o.json || !process.stderr.isTTY ? undefined : (line: string) => process.stderr.write(`smol: ${line}\n`);
      const steps = await runSetup(assetsHome(), { refresh: o.refresh, log: o.json ? undefined : log });
      if (o.json) return printJson(steps);
      printTable(['STEP', 'RESULT', 'TIME'], steps.map((s) => [s.step, s.result, formatDuration(s.ms)]));
    });
}
