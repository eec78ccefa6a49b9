import type { Command } from 'commander';
import { register as registerSubmit } from './submit.js';
import { register as registerLs } from './ls.js';
import { register as registerShow } from './show.js';
import { register as registerCancel } from './cancel.js';
import { register as registerStats } from './stats.js';
import { register as registerResults } from './results.js';

/** Registers `smol rollout …` subcommands; one file per subcommand in this folder. */
export function registerRolloutCommands(program: Command): void {
  const rollout = program.command('rollout').description('hybrid rollouts: GPU stages via the gateway, CPU stages on leased workers');
  registerSubmit(rollout);
  registerLs(rollout);
  registerShow(rollout);
  registerCancel(rollout);
  registerStats(rollout);
  registerResults(rollout);
}
