import type { Command } from 'commander';

/** Registers `smol pack …` subcommands; one file per subcommand in this folder. */
export function registerPackCommands(_program: Command): void {
  // subcommands are added as they land
}
