/**
 * The `smol pack` command group on its own (the full CLI also loads the machine lifecycle), with the
 * real error handler: tests run it as a subprocess to see exit codes, stdout and stderr as users do.
 */
import { Command, CommanderError } from 'commander';
import { packCommands } from '../../../src/cli/commands/pack/index.js';
import { handleError } from '../../../src/cli/handle-error.js';

const program = new Command('smol').exitOverride();
packCommands(process.argv).then((register) => { register(program); return program.parseAsync(process.argv); }).then(
  () => { process.exitCode = typeof process.exitCode === 'number' ? process.exitCode : 0; },
  (err: unknown) => { process.exitCode = err instanceof CommanderError ? (err.exitCode === 0 ? 0 : 64) : handleError(err, process.argv.includes('--json')); },
);
