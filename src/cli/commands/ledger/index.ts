import type { Command } from 'commander';

/** Registers `smol ledger …` subcommands; one file per subcommand in this folder. */
export function registerLedgerCommands(_program: Command): void {
  // subcommands are added as they land
}
