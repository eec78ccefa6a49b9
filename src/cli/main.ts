/** Entry point: builds the commander program from one registration function per command group. */
import { Command, CommanderError } from 'commander';
import { handleError } from './handle-error.js';
import { registerMachineCommands } from './commands/machine/index.js';
import { registerGpuCommands } from './commands/gpu/index.js';
import { registerRolloutCommands } from './commands/rollout/index.js';
import { registerLedgerCommands } from './commands/ledger/index.js';
import { registerPackCommands } from './commands/pack/index.js';
import { registerTopLevelCommands } from './commands/index.js';

export function buildProgram(): Command {
  const program = new Command('smol')
    .description('microVMs on a real VMM: run, fork and pack machines; CUDA remoting; rollout ledger')
    .version('0.1.0')
    .showHelpAfterError('(run with --help for usage)')
    .exitOverride();
  registerTopLevelCommands(program);
  registerMachineCommands(program);
  registerGpuCommands(program);
  registerRolloutCommands(program);
  registerLedgerCommands(program);
  registerPackCommands(program);
  return program;
}

export async function main(argv: string[]): Promise<number> {
  const program = buildProgram();
  const json = argv.includes('--json');
  try {
    await program.parseAsync(argv);
    return typeof process.exitCode === 'number' ? process.exitCode : 0;
  } catch (err) {
    if (err instanceof CommanderError) {
      // help and version exit 0; anything else commander rejects is a usage error
      return err.exitCode === 0 ? 0 : 64;
    }
    return handleError(err, json);
  }
}
