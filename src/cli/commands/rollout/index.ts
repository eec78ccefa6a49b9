import type { Command } from 'commander';
import { lazyGroup } from '../../lazy-group.js';

/** `smol rollout …`: one file per subcommand in this folder, loaded when named (cli/lazy-group.ts). */
export function rolloutCommands(argv?: string[]): Promise<(program: Command) => void> {
  return lazyGroup({
    name: 'rollout', description: 'hybrid rollouts: GPU stages via the gateway, CPU stages on leased workers',
    modules: {
      submit: () => import('./submit.js'), ls: () => import('./ls.js'), show: () => import('./show.js'),
      cancel: () => import('./cancel.js'), stats: () => import('./stats.js'), results: () => import('./results.js'),
    },
  }, argv);
}
