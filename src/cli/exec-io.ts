/** Wires the terminal to a guest command: stdin, raw TTY mode, Ctrl-C and window resizes. */
import type { ExecHandle } from '../vm/engine.js';
import type { ExecIo } from '../vm/exec.js';

export interface TerminalIo { io: ExecIo; tty: boolean; restore(): void }

export function terminalIo(o: { interactive?: boolean; tty?: boolean; timeoutMs?: number }): TerminalIo {
  const tty = !!o.tty && !!process.stdin.isTTY;
  // stdin is forwarded when asked (-i) or when it is a pipe or file, so `echo hi | smol run -- cat` works
  const forward = !!o.interactive || tty || !process.stdin.isTTY;
  let handle: ExecHandle | undefined;
  let interrupts = 0;
  const onSigint = () => {
    interrupts++;
    if (interrupts > 1 || !handle) process.exit(130);
    handle.signal('SIGINT');
  };
  const onSigterm = () => handle?.signal('SIGTERM');
  const onResize = () => handle?.resize(process.stdout.rows ?? 24, process.stdout.columns ?? 80);
  process.on('SIGINT', onSigint);
  process.on('SIGTERM', onSigterm);
  if (tty) {
    process.stdin.setRawMode(true);
    process.stdout.on('resize', onResize);
  }
  return {
    tty,
    io: {
      stdin: forward ? process.stdin : null,
      stdout: process.stdout,
      stderr: process.stderr,
      timeoutMs: o.timeoutMs,
      onStart: (h) => { handle = h; },
    },
    restore: () => {
      process.off('SIGINT', onSigint);
      process.off('SIGTERM', onSigterm);
      if (tty) {
        process.stdin.setRawMode(false);
        process.stdout.off('resize', onResize);
      }
      process.stdin.pause();
      process.stdin.unref?.();
    },
  };
}
