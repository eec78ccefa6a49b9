import { describe, expect, it } from 'vitest';
import { buildProgram, main } from '../../../src/cli/main.js';

describe('cli entry', () => {
  it('the full program registers every command group', async () => {
    const names = (await buildProgram()).commands.map((c) => c.name()).sort();
    expect(names).toEqual(['completion', 'doctor', 'fork', 'gateway', 'gpu', 'image', 'ledger', 'machine', 'mcp', 'pack', 'prune', 'registry', 'rollout', 'run', 'serve', 'setup', 'smolfile', 'snapshot', 'worker']);
  });

  it('an unknown command is a usage error (64), a known one parses on its own', async () => {
    const err = process.stderr.write;
    process.stderr.write = (() => true) as typeof process.stderr.write;
    try {
      expect(await main(['node', 'smol', 'nosuch'])).toBe(64);
      expect(await main(['node', 'smol', 'run', '--mem', '0', '--', 'true'])).toBe(65);
    } finally {
      process.stderr.write = err;
      process.exitCode = undefined;
    }
  });
});
