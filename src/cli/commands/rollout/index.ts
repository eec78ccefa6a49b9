import type { Command } from 'commander';

/** Registers `smol rollout …` subcommands; one file per subcommand in this folder. */
export function registerRolloutCommands(_program: Command): void {
  // subcommands are added as they land
}
