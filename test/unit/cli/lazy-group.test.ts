import { Command } from 'commander';
import { describe, expect, it } from 'vitest';
import { machineCommands } from '../../../src/cli/commands/machine/index.js';
import { imageCommands } from '../../../src/cli/commands/image/index.js';
import { packCommands } from '../../../src/cli/commands/pack/index.js';
import { rolloutCommands } from '../../../src/cli/commands/rollout/index.js';

type Group = (argv?: string[]) => Promise<(program: Command) => void>;
async function registered(group: Group, name: string, argv?: string[]): Promise<string[]> {
  const program = new Command('smol');
  (await group(argv))(program);
  return program.commands.find((c) => c.name() === name)!.commands.map((c) => c.name());
}
const MACHINE = ['create', 'start', 'stop', 'exec', 'ls', 'status', 'rm', 'logs', 'cp', 'update', 'prune', 'shell', 'pause', 'resume'];
const argv = (...a: string[]) => ['node', 'smol', ...a];

describe('command groups register only the subcommand named', () => {
  it('loads one subcommand by name or alias, under either group name', async () => {
    expect(await registered(machineCommands, 'machine', argv('machine', 'ls', '--json'))).toEqual(['ls']);
    expect(await registered(machineCommands, 'machine', argv('m', 'list'))).toEqual(['ls']);
    expect(await registered(machineCommands, 'machine', argv('machine', 'sh', 'web'))).toEqual(['shell']);
    expect(await registered(machineCommands, 'machine', argv('machine', 'exec', 'web', '--', 'ls'))).toEqual(['exec']);
    expect(await registered(imageCommands, 'image', argv('image', 'remove', 'x'))).toEqual(['rm']);
    expect(await registered(packCommands, 'pack', argv('pack', 'run', 'a.smolmachine', '--', 'true'))).toEqual(['run']);
    expect(await registered(rolloutCommands, 'rollout', argv('rollout', 'stats', 'r1', '--json'))).toEqual(['stats']);
  });

  it('one module serving two subcommands registers both (image login, logout)', async () => {
    expect(await registered(imageCommands, 'image', argv('image', 'logout', 'localhost:5000'))).toEqual(['login', 'logout']);
  });

  it('loads all of them, in help order, for help, a typo, or no argv (completion)', async () => {
    for (const a of [argv('machine', '--help'), argv('machine', 'lss'), argv('machine', 'help', 'ls'), undefined]) {
      expect(await registered(machineCommands, 'machine', a)).toEqual(MACHINE);
    }
    expect(await registered(imageCommands, 'image', argv('image'))).toEqual(['pull', 'ls', 'rm', 'prune', 'login', 'logout']);
    expect(await registered(packCommands, 'pack', argv('pack', '--help'))).toEqual(['create', 'inspect', 'verify', 'keygen', 'push', 'pull', 'run', 'prune']);
    expect(await registered(rolloutCommands, 'rollout')).toEqual(['submit', 'ls', 'show', 'cancel', 'stats', 'results']);
  });
});
