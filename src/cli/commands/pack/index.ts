import type { Command } from 'commander';
import { lazyGroup } from '../../lazy-group.js';

/** `smol pack …`: one file per subcommand in this folder, loaded when named (cli/lazy-group.ts). */
export function packCommands(argv?: string[]): Promise<(program: Command) => void> {
  return lazyGroup({
    name: 'pack', description: 'pack machines into verifiable .smolmachine artifacts; sign, inspect, push and pull them',
    modules: {
      create: () => import('./create.js'), inspect: () => import('./inspect.js'), verify: () => import('./verify.js'),
      keygen: () => import('./keygen.js'), push: () => import('./push.js'), pull: () => import('./pull.js'),
      run: () => import('./run.js'), prune: () => import('./prune.js'),
    },
  }, argv);
}
