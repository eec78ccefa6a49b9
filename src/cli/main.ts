/**
 * Entry point: builds the commander program from one registration function per command or group.
 * Only the group named on the command line is imported: loading every service up front cost ~0.6 s
 * per invocation, which `smol run` and `smol machine exec` pay on every call.
 */
import { Command, CommanderError } from 'commander';
import { applyColorPolicy } from './color.js';
import { handleError } from './handle-error.js';
import { guardPipes } from './broken-pipe.js';

type Register = (program: Command) => void;

// argv lets a group load only the subcommand named (cli/lazy-group.ts); without it, all of them
const loaders: Record<string, (argv?: string[]) => Promise<Register>> = {
  run: async () => (await import('./commands/run.js')).register,
  worker: async () => (await import('./commands/worker.js')).register,
  gateway: async () => (await import('./commands/gateway.js')).register,
  setup: async () => (await import('./commands/setup.js')).register,
  doctor: async () => (await import('./commands/doctor.js')).register,
  fork: async () => (await import('./commands/fork.js')).register,
  machine: async (argv) => (await import('./commands/machine/index.js')).machineCommands(argv),
  gpu: async () => (await import('./commands/gpu/index.js')).registerGpuCommands,
  rollout: async (argv) => (await import('./commands/rollout/index.js')).rolloutCommands(argv),
  ledger: async () => (await import('./commands/ledger/index.js')).registerLedgerCommands,
  pack: async (argv) => (await import('./commands/pack/index.js')).packCommands(argv),
  completion: async () => (await import('./commands/completion.js')).register,
  smolfile: async () => (await import('./commands/smolfile/index.js')).registerSmolfileCommands,
  prune: async () => (await import('./commands/prune.js')).register,
  image: async (argv) => (await import('./commands/image/index.js')).imageCommands(argv),
  registry: async () => (await import('./commands/registry/index.js')).registerRegistryCommands,
  snapshot: async () => (await import('./commands/snapshot.js')).register,
  serve: async () => (await import('./commands/serve.js')).register,
  mcp: async () => (await import('./commands/mcp.js')).register,
};
const aliases: Record<string, string> = { m: 'machine' };

function newProgram(): Command {
  return new Command('smol')
    .description('microVMs on a real VMM: run, fork and pack machines; CUDA remoting; rollout ledger')
    .version('0.1.0')
    .showHelpAfterError('(run with --help for usage)')
    .exitOverride();
}

/** The full program (help, tests, completion): every command registered. */
export async function buildProgram(): Promise<Command> {
  const program = newProgram();
  for (const load of Object.values(loaders)) (await load())(program);
  return program;
}

/** Only the command named in argv, or everything when none is named (help, typos). */
async function programFor(argv: string[]): Promise<Command> {
  const first = argv.slice(2).find((a) => !a.startsWith('-'));
  const name = first ? (aliases[first] ?? first) : undefined;
  const load = name ? loaders[name] : undefined;
  if (!name && argv.some((a) => a === '-V' || a === '--version')) return newProgram();
  if (!load) return buildProgram();
  const program = newProgram();
  (await load(argv))(program);
  return program;
}

export async function main(argv: string[]): Promise<number> {
  applyColorPolicy();
  const json = argv.includes('--json');
  guardPipes();
  try {
    const program = await programFor(argv);
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
