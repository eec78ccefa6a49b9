import type { Command } from 'commander';
import { register as create } from './create.js';
import { register as start } from './start.js';
import { register as stop } from './stop.js';
import { register as exec } from './exec.js';
import { register as ls } from './ls.js';
import { register as status } from './status.js';
import { register as rm } from './rm.js';
import { register as logs } from './logs.js';
import { register as cp } from './cp.js';
import { register as shell } from './shell.js';
import { register as update } from './update.js';
import { register as prune } from './prune.js';

/** Registers `smol machine …` subcommands; one file per subcommand in this folder. */
export function registerMachineCommands(program: Command): void {
  const machine = program.command('machine').alias('m').description('persistent machines: create, start, exec, stop, rm');
  for (const r of [create, start, stop, exec, ls, status, rm, logs, cp, update, prune]) r(machine);
  shell(machine);
}
