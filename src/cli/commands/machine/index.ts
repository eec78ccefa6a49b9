import type { Command } from 'commander';
import { lazyGroup } from '../../lazy-group.js';

const ls = () => import('./ls.js');
const shell = () => import('./shell.js');

/** `smol machine …`: one file per subcommand in this folder, loaded when named (cli/lazy-group.ts). */
export function machineCommands(argv?: string[]): Promise<(program: Command) => void> {
  return lazyGroup({
    name: 'machine', alias: 'm', description: 'persistent machines: create, start, exec, stop, rm',
    modules: {
      create: () => import('./create.js'), start: () => import('./start.js'), stop: () => import('./stop.js'),
      exec: () => import('./exec.js'), ls, list: ls, status: () => import('./status.js'), rm: () => import('./rm.js'),
      logs: () => import('./logs.js'), cp: () => import('./cp.js'), update: () => import('./update.js'),
      prune: () => import('./prune.js'), shell, sh: shell, pause: () => import('./pause.js'), resume: () => import('./resume.js'),
    },
  }, argv);
}
