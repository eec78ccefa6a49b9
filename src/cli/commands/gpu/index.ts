import type { Command } from 'commander';

/** Registers `smol gpu …` subcommands; one file per subcommand in this folder. */
export function registerGpuCommands(_program: Command): void {
  // subcommands are added as they land
}
