/**
 * `smol … | head` closes the pipe early: that is the reader's choice, not an error (and not a stack trace).
 * smol then exits at once with the exit code so far, unless a command whose cleanup matters has taken the
 * event over while it runs: a guest command's output (exec-io.ts) stops the command and, for a throwaway
 * machine, removes it first, instead of leaving its QEMU running.
 */
let takeover: (() => void) | null = null;

export function guardPipes(): void {
  for (const s of [process.stdout, process.stderr]) {
    s.on('error', (err: NodeJS.ErrnoException) => {
      if (err.code !== 'EPIPE') throw err;
      if (takeover) takeover();
      else process.exit(process.exitCode ?? 0);
    });
  }
}

/** While set, a closed stdout or stderr calls `h` (maybe more than once) instead of exiting. */
export function onBrokenPipe(h: (() => void) | null): void {
  takeover = h;
}
