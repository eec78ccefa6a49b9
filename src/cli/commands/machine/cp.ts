import type { Command } from 'commander';
import { copy } from '../../../vm/exec.js';
import { machineService } from '../../context.js';
import { formatBytes, printJson } from '../../output.js';

export function register(parent: Command): void {
  parent.command('cp')
    .description('copy a file (or with -r a directory) into or out of a running machine (MACHINE:/path names the guest side)')
    .argument('<src>', 'source: a host path or MACHINE:/path')
    .argument('<dst>', 'destination: a host path or MACHINE:/path')
    .option('-r, --recursive', 'copy directories, keeping modes and symlinks (onto an existing directory: inside it)')
    .option('--json', 'print the result as JSON')
    .action(async (src: string, dst: string, opts: { json?: boolean; recursive?: boolean }) => {
      const t0 = performance.now();
      const r = await copy(machineService(), src, dst, { recursive: opts.recursive });
      const secs = (performance.now() - t0) / 1000;
      if (opts.json) printJson({ ...r, seconds: secs });
      else process.stderr.write(`copied ${formatBytes(r.bytes)} in ${secs.toFixed(2)}s\n`);
    });
}
