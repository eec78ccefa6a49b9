import type { Command } from 'commander';
import { lazyGroup } from '../../lazy-group.js';

const ls = () => import('./ls.js');
const rm = () => import('./rm.js');
const login = () => import('../registry/login.js');

/** `smol image …`; `image login|logout` are the same commands as `registry login|logout`. Loaded when named (cli/lazy-group.ts). */
export function imageCommands(argv?: string[]): Promise<(program: Command) => void> {
  return lazyGroup({
    name: 'image', description: 'images from OCI registries: pull, list, remove, prune the cache',
    modules: { pull: () => import('./pull.js'), ls, list: ls, rm, remove: rm, prune: () => import('./prune.js'), login, logout: login },
  }, argv);
}
