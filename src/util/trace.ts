/**
 * SMOL_TRACE=1: one stderr line per phase of a run, `[trace <ms since the process started>] <phase>`, so
 * where a run's time goes can be measured without a profiler (bench/io.ts reads them for its breakdown of
 * `smol run -v`). Off by default, and then free.
 */
const on = process.env.SMOL_TRACE === '1';

export function trace(phase: string): void {
  if (on) process.stderr.write(`[trace ${performance.now().toFixed(1)}] ${phase}\n`);
}

if (on) process.on('exit', () => trace('exit'));
