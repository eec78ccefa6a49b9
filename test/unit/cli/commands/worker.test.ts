import { describe, expect, it } from 'vitest';
import { main } from '../../../../src/cli/main.js';

/** Runs the CLI in-process and returns its exit code and what it printed on stderr. */
async function smol(...args: string[]): Promise<{ code: number; stderr: string }> {
  const write = process.stderr.write;
  let stderr = '';
  process.stderr.write = ((s: string) => { stderr += s; return true; }) as typeof process.stderr.write;
  try {
    return { code: await main(['node', 'smol', ...args]), stderr };
  } finally {
    process.stderr.write = write;
    process.exitCode = undefined;
  }
}

describe('smol worker flags', () => {
  it('refuses gateway credentials without --gateway instead of ignoring them', async () => {
    for (const flag of ['--gateway-token-file', '--gateway-ca']) {
      const r = await smol('worker', '--ledger', '/nonexistent/ledger.db', flag, '/tmp/x');
      expect(r.code).toBe(64);
      expect(r.stderr).toContain(`${flag} needs --gateway`);
    }
  });
});
