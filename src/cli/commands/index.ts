import type { Command } from 'commander';
import { register as registerRun } from './run.js';
import { register as registerWorker } from './worker.js';
import { register as registerGateway } from './gateway.js';
import { register as registerSetup } from './setup.js';
import { register as registerDoctor } from './doctor.js';
import { register as registerFork } from './fork.js';

/** Top-level commands (run, fork, setup, doctor, worker, gateway); one file each in this folder. */
export function registerTopLevelCommands(program: Command): void {
  registerRun(program);
  registerWorker(program);
  registerGateway(program);
  registerSetup(program);
  registerDoctor(program);
  registerFork(program);
}
