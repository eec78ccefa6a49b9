import type { Command } from 'commander';
import { z } from 'zod';
import { ExitCode, InterruptedError } from '../../../errors/index.js';
import { copy, parseCopyEnd } from '../../../vm/api/exec.js';
import { ABORT_CLEANUP_MS, CP_IDLE_MS, CP_MAX_BYTES } from '../../../vm/api/limits.js';
import { machineService } from '../../context.js';
import { durationSchema, parseFlags } from '../../machine-options.js';
import { formatBytes, printJson } from '../../output.js';
import { terminalSafe } from '../../../util/terminal-safe.js';

/** "10G", "512M", "1.5GiB", "4096" (bytes) → bytes. */
const byteSizeSchema = z.string().transform((v, ctx) => {
  const m = /^\s*(\d+(?:\.\d+)?)\s*([kmgt]?)(?:i?b)?\s*$/i.exec(v);
  const n = m ? Math.floor(Number(m[1]) * 1024 ** ' kmgt'.indexOf((m[2] || ' ').toLowerCase())) : NaN;
  if (!(n > 0)) {
    ctx.addIssue({ code: 'custom', message: `"${v}" is not a size; use bytes or forms like 512M, 10G` });
    return z.NEVER;
  }
  return n;
});

const cpSchema = z.object({
  recursive: z.boolean().optional(),
  json: z.boolean().optional(),
  maxSize: byteSizeSchema.optional(),
  idleTimeout: durationSchema.optional(),
  preserveSpecial: z.boolean().optional(),
  keepOutsideLinks: z.boolean().optional(),
});

export function register(parent: Command): void {
  parent.command('cp')
    .description('copy a file (or with -r a directory) into or out of a running machine (MACHINE:/path names the guest side)')
    .argument('<src>', 'source: a host path or MACHINE:/path')
    .argument('<dst>', 'destination: a host path or MACHINE:/path')
    .option('-r, --recursive', 'copy directories, keeping modes and symlinks (onto an existing directory: inside it)')
    .option('--max-size <size>', `out of a guest: refuse more than this many bytes (default ${CP_MAX_BYTES / 1024 ** 3}G)`)
    .option('--idle-timeout <duration>', `out of a guest: fail when it sends nothing this long (default ${CP_IDLE_MS / 1000}s)`)
    .option('--preserve-special', 'out of a guest with -r: create its device nodes and FIFOs (skipped by default)')
    .option('--keep-outside-links', 'out of a guest with -r: keep symlinks that point outside the copied directory (skipped by default)')
    .option('--json', 'print the result as JSON')
    .action(async (src: string, dst: string, opts: unknown) => {
      const o = parseFlags(cpSchema, opts);
      const t0 = performance.now();
      // Out of a guest, a signal must not leave a partial file: it aborts the copy, which removes it.
      const out = parseCopyEnd(src).machine !== null;
      const ctl = new AbortController();
      const stop = (code: typeof ExitCode.interrupted | typeof ExitCode.terminated) => () => {
        if (ctl.signal.aborted) process.exit(code);
        ctl.abort(new InterruptedError(code === ExitCode.interrupted ? 'interrupted' : 'terminated', code));
        setTimeout(() => process.exit(code), ABORT_CLEANUP_MS).unref(); // should removing the partial file hang
      };
      const onInt = stop(ExitCode.interrupted), onTerm = stop(ExitCode.terminated);
      if (out) { process.on('SIGINT', onInt); process.on('SIGTERM', onTerm); }
      try {
        const r = await copy(machineService(), src, dst, {
          recursive: o.recursive, maxBytes: o.maxSize, idleMs: o.idleTimeout, preserveSpecial: o.preserveSpecial, keepOutsideLinks: o.keepOutsideLinks,
          // warnings name guest paths: a guest's control sequences or newlines must not act on the terminal
          signal: ctl.signal, warn: (line) => process.stderr.write(`smol: ${terminalSafe(line).replace(/\n/g, '\\n')}\n`),
        });
        const secs = (performance.now() - t0) / 1000;
        if (o.json) printJson({ ...r, seconds: secs });
        else process.stderr.write(`copied ${formatBytes(r.bytes)} in ${secs.toFixed(2)}s\n`);
      } finally {
        process.off('SIGINT', onInt);
        process.off('SIGTERM', onTerm);
      }
    });
}
