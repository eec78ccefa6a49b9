import type { Command } from 'commander';
import { register as registerRun } from './run.js';
import { register as registerSetup } from './setup.js';
import { register as registerDoctor } from './doctor.js';

/** Top-level commands (run, fork, setup, doctor, worker, gateway); one file each in this folder. */
export function registerTopLevelCommands(program: Command): void {
  registerRun(program);
  registerSetup(program);
  registerDoctor(program);
}
