/**
 * Reading a machine's console log: waiting for a line, and the tail for error messages. The guest writes
 * this file (root in the guest owns its serial port), so both readers hold a bounded window of it, never
 * the whole file: a guest that floods its console costs the host disk, not smol's memory.
 */
import fs from 'node:fs';
import { BootError, TimeoutError } from '../../errors/index.js';

/** The most of the console a reader holds at once. */
export const CONSOLE_WINDOW_BYTES = 1 << 20;
const TAIL_BYTES = 64 << 10;
const CHUNK_BYTES = 256 << 10;

/** The last `lines` lines of the console, from at most its last 64 KiB. */
export function consoleTail(consoleLogPath: string, lines: number): string {
  let fd: number;
  try { fd = fs.openSync(consoleLogPath, 'r'); } catch { return ''; }
  try {
    const size = fs.fstatSync(fd).size;
    const buf = Buffer.alloc(Math.min(size, TAIL_BYTES));
    const n = fs.readSync(fd, buf, 0, buf.length, size - buf.length);
    return buf.subarray(0, n).toString('utf8').trimEnd().split('\n').slice(-lines).join('\n');
  } finally {
    fs.closeSync(fd);
  }
}

/**
 * Reads a growing file in order, chunk by chunk, keeping the last CONSOLE_WINDOW_BYTES as text, and
 * returns the first match of `pattern` that lies within the window when it completes.
 */
class ConsoleWindow {
  private pos = 0;
  private text = '';
  constructor(private readonly file: string, private readonly pattern: RegExp) {}

  scan(): RegExpExecArray | null {
    let fd: number;
    try { fd = fs.openSync(this.file, 'r'); } catch { return null; }
    try {
      const buf = Buffer.alloc(CHUNK_BYTES);
      for (;;) {
        const n = fs.readSync(fd, buf, 0, buf.length, this.pos);
        if (n <= 0) return null;
        this.pos += n;
        this.text += buf.subarray(0, n).toString('latin1');
        if (this.text.length > CONSOLE_WINDOW_BYTES) this.text = this.text.slice(-CONSOLE_WINDOW_BYTES);
        const m = this.pattern.exec(this.text);
        if (m) return m;
      }
    } finally {
      fs.closeSync(fd);
    }
  }
}

/**
 * Poll the console log until `pattern` appears. Fails fast with BootError when `alive()` turns false
 * first (QEMU exited: a panic with panic=-1 and -no-reboot ends the process).
 */
export async function waitForConsole(consoleLogPath: string, pattern: RegExp, opts: { timeoutMs: number; alive?: () => boolean; pollMs?: number }): Promise<RegExpExecArray> {
  const deadline = Date.now() + opts.timeoutMs;
  const window = new ConsoleWindow(consoleLogPath, pattern);
  for (;;) {
    // liveness first, then the log: a VM that prints and powers off between the two reads still matches
    const alive = opts.alive ? opts.alive() : true;
    const m = window.scan();
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

/** Where the last `lines` lines of a log start (the unfinished one after them included), looking back at most `maxBack` bytes. */
export function logTailOffset(fd: number, size: number, lines: number, maxBack = 16 << 20): number {
  const floor = Math.max(0, size - maxBack);
  const buf = Buffer.alloc(TAIL_BYTES);
  let seen = 0;
  for (let end = size; end > floor;) {
    const start = Math.max(floor, end - buf.length);
    const n = fs.readSync(fd, buf, 0, end - start, start);
    for (let i = n - 1; i >= 0; i--) {
      if (buf[i] === 0x0a && ++seen > lines) return start + i + 1;
    }
    end = start;
  }
  return floor;
}

/** Hands `[from, to)` of a log to `write` in chunks of at most 1 MiB, so a flooded log never sits whole in memory; returns `to`. */
export function pumpLog(fd: number, from: number, to: number, write: (chunk: Buffer) => void): number {
  const buf = Buffer.alloc(Math.min(CONSOLE_WINDOW_BYTES, Math.max(0, to - from)));
  for (let pos = from; pos < to;) {
    const n = fs.readSync(fd, buf, 0, Math.min(buf.length, to - pos), pos);
    if (n <= 0) return pos;
    write(Buffer.from(buf.subarray(0, n)));
    pos += n;
  }
  return to;
}
