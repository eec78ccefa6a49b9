import type { Command } from 'commander';

/** Registers `smol machine …` subcommands; one file per subcommand in this folder. */
export function registerMachineCommands(_program: Command): void {
  // subcommands are added as they land
}
