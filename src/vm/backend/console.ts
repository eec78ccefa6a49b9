/** Reading a machine's console log: waiting for a line, and the tail for error messages. */
import { readFileSync } from 'node:fs';
import { BootError, TimeoutError } from '../../errors/index.js';

export function consoleTail(consoleLogPath: string, lines: number): string {
  let text = '';
  try { text = readFileSync(consoleLogPath, 'utf8'); } catch { return ''; }
  return text.trimEnd().split('\n').slice(-lines).join('\n');
}

/**
 * Poll the console log until `pattern` appears. Fails fast with BootError when `alive()` turns false
 * first (QEMU exited: a panic with panic=-1 and -no-reboot ends the process).
 */
export async function waitForConsole(consoleLogPath: string, pattern: RegExp, opts: { timeoutMs: number; alive?: () => boolean; pollMs?: number }): Promise<RegExpExecArray> {
  const deadline = Date.now() + opts.timeoutMs;
  const read = () => { try { return readFileSync(consoleLogPath, 'utf8'); } catch { return ''; } };
  for (;;) {
    // liveness first, then the log: a VM that prints and powers off between the two reads still matches
    const alive = opts.alive ? opts.alive() : true;
    const m = pattern.exec(read());
    if (m) return m;
    if (!alive) {
      throw new BootError(`boot failed: the VM exited before printing ${pattern}`, { hint: `Console output:\n${consoleTail(consoleLogPath, 20)}` });
    }
    if (Date.now() >= deadline) {
      throw new TimeoutError(`boot timed out: ${pattern} not seen within ${opts.timeoutMs} ms`, { hint: `Console output:\n${consoleTail(consoleLogPath, 20)}` });
    }
    await new Promise((r) => setTimeout(r, opts.pollMs ?? 10));
  }
}
