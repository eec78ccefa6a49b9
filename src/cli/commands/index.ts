import type { Command } from 'commander';

/** Top-level commands (run, fork, setup, doctor, worker, gateway); one file each in this folder. */
export function registerTopLevelCommands(_program: Command): void {
  // commands are added as they land
}
