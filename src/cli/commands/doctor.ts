import type { Command } from 'commander';
import chalk from 'chalk';
import { z } from 'zod';
import { ExitCode } from '../../errors/index.js';
import { runChecks, type CheckStatus } from '../../vm/api/host.js';
import { assetsHome } from '../../util/paths.js';
import { printJson, printTable } from '../output.js';

export const doctorSchema = z.object({ json: z.boolean().optional() }).strict();

const mark: Record<CheckStatus, string> = { ok: chalk.green('ok'), warn: chalk.yellow('warn'), missing: chalk.red('MISSING') };

/** `smol doctor`: every prerequisite with its state and what to do; exit 69 when a required one is missing. */
export function register(program: Command): void {
  program.command('doctor')
    .description('check prerequisites (QEMU, kernel, agent, KVM, disk space) and say how to fix each')
    .option('--json', 'print the checks as JSON')
    .action(async (raw: Record<string, unknown>) => {
      const o = doctorSchema.parse(raw);
      const checks = await runChecks(assetsHome());
      const broken = checks.some((c) => c.required && c.status === 'missing');
      if (o.json) printJson({ ok: !broken, checks });
      else {
        printTable(['CHECK', 'STATUS', 'DETAIL', 'FIX'], checks.map((c) => [c.name, mark[c.status], c.detail, c.fix]));
        if (broken) process.stderr.write(`${chalk.red('smol doctor:')} required prerequisites are missing (see FIX above)\n`);
      }
      if (broken) process.exitCode = ExitCode.prerequisite;
    });
}
