/** Wires the terminal to a guest command: stdin, raw TTY mode, Ctrl-C and window resizes. */
import { ExitCode, InterruptedError } from '../errors/index.js';
import type { ExecHandle, ExecIo } from '../vm/api/exec.js';
import { ABORT_CLEANUP_MS, KILL_GRACE_MS } from '../vm/api/limits.js';
import { onBrokenPipe } from './broken-pipe.js';

export interface TerminalIo {
  io: ExecIo;
  tty: boolean;
  /** Aborted, with an InterruptedError (130 or 143) as reason, when smol must stop without the guest's help. */
  signal: AbortSignal;
  restore(): void;
}

export function terminalIo(o: { interactive?: boolean; tty?: boolean; timeoutMs?: number }): TerminalIo {
  const tty = !!o.tty && !!process.stdin.isTTY;
  // stdin is forwarded when asked (-i) or when it is a pipe or file, so `echo hi | smol run -- cat` works
  const forward = !!o.interactive || tty || !process.stdin.isTTY;
  let handle: ExecHandle | undefined;
  let interrupts = 0;
  const ctl = new AbortController();
  // the caller's cleanup (finally blocks) runs on abort; this only bounds it
  const abort = (c: number) => {
    if (ctl.signal.aborted) process.exit(c);
    ctl.abort(c === ExitCode.interrupted ? new InterruptedError('interrupted') : new InterruptedError('terminated', ExitCode.terminated));
    setTimeout(() => process.exit(c), ABORT_CLEANUP_MS).unref(); // should removing the machine hang
  };
  const onSigint = () => {
    interrupts++;
    if (interrupts > 1 || !handle) abort(130);
    else handle.signal('SIGINT');
  };
  const onSigterm = () => {
    if (!handle) { abort(143); return; }
    // the command gets the same grace as at --timeout; then the abort SIGKILLs it (vm/exec.ts)
    handle.signal('SIGTERM');
    setTimeout(() => abort(143), KILL_GRACE_MS).unref();
  };
  // a reader that went away (`smol run -- cmd | head`) ends the command as SIGPIPE would, cleanup first
  onBrokenPipe(() => {
    if (ctl.signal.aborted) return;
    ctl.abort(new InterruptedError('the reader of the output went away', ExitCode.brokenPipe));
    setTimeout(() => process.exit(ExitCode.brokenPipe), ABORT_CLEANUP_MS).unref();
  });
  const onResize = () => handle?.resize(process.stdout.rows ?? 24, process.stdout.columns ?? 80);
  process.on('SIGINT', onSigint);
  process.on('SIGTERM', onSigterm);
  if (tty) {
    process.stdin.setRawMode(true);
    process.stdout.on('resize', onResize);
  }
  return {
    tty,
    signal: ctl.signal,
    io: {
      stdin: forward ? process.stdin : null,
      stdout: process.stdout,
      stderr: process.stderr,
      timeoutMs: o.timeoutMs,
      signal: ctl.signal,
      onStart: (h) => { handle = h; },
    },
    restore: () => {
      onBrokenPipe(null);
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
