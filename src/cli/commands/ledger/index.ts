import type { Command } from 'commander';
import { register as registerCheck } from './check.js';
import { register as registerMigrateBlobs } from './migrate-blobs.js';

/** Registers `smol ledger …` subcommands; one file per subcommand in this folder. */
export function registerLedgerCommands(program: Command): void {
  const ledger = program.command('ledger').description('the rollout ledger (SQLite or PostgreSQL)');
  registerCheck(ledger);
  registerMigrateBlobs(ledger);
}
