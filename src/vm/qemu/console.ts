/**
 * Reading a machine's console log: waiting for a line, and the tail for error messages. The guest writes
 * this file (root in the guest owns its serial port), so both readers hold a bounded window of it, never
 * the whole file: a guest that floods its console costs the host disk, not smol's memory.
 */
import fs from 'node:fs';
import { BootError, TimeoutError } from '../../errors/index.js';
import { consoleSettled } from './console-keeper.js';

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

/** Where the console keeper (console-keeper.ts) moves a full console.log. */
export const rotatedLog = (file: string): string => `${file}.1`;

/**
 * Reads a growing log in order, a chunk at a time, following it across the keeper's rotations: when the
 * path names a new file, the old one (now .1, complete: the keeper renames before it writes on) is read to
 * its end first. A log rotated twice between two reads loses the file in between, which only a guest
 * flooding its console makes happen.
 */
export class LogFollower {
  private fd: number | null = null;
  private ino = 0;
  private pos = 0;
  /** `from`: an open descriptor of `file` and where in it to go on (it then owns the descriptor). */
  constructor(private readonly file: string, from?: { fd: number; pos: number }) {
    if (from) {
      this.fd = from.fd;
      this.ino = fs.fstatSync(from.fd).ino;
      this.pos = from.pos;
    }
  }

  /** Hands what was written since the last call to `write` until it returns true (stop: the rest waits). */
  drain(write: (chunk: Buffer) => boolean | void): boolean {
    for (;;) {
      if (this.fd === null && !this.open()) return false;
      if (this.pump(write)) return true;
      let ino: number;
      try { ino = fs.statSync(this.file).ino; } catch { return false; }
      if (ino === this.ino) return false;
      // rotated: what is left of the old file came before the new one
      if (this.pump(write)) return true;
      this.close();
      this.pos = 0;
    }
  }

  close(): void {
    if (this.fd !== null) fs.closeSync(this.fd);
    this.fd = null;
  }

  private open(): boolean {
    try { this.fd = fs.openSync(this.file, 'r'); } catch { return false; }
    this.ino = fs.fstatSync(this.fd).ino;
    return true;
  }

  private pump(write: (chunk: Buffer) => boolean | void): boolean {
    const buf = Buffer.alloc(CHUNK_BYTES);
    for (;;) {
      const n = fs.readSync(this.fd!, buf, 0, buf.length, this.pos);
      if (n <= 0) return false;
      this.pos += n;
      if (write(Buffer.from(buf.subarray(0, n)))) return true;
    }
  }
}

/** Keeps the last CONSOLE_WINDOW_BYTES of a log as text, and returns the first match of `pattern` within the window. */
class ConsoleWindow {
  private text = '';
  private readonly log: LogFollower;
  constructor(file: string, private readonly pattern: RegExp) { this.log = new LogFollower(file); }

  scan(): RegExpExecArray | null {
    let m: RegExpExecArray | null = null;
    this.log.drain((chunk) => {
      this.text += chunk.toString('latin1');
      if (this.text.length > CONSOLE_WINDOW_BYTES) this.text = this.text.slice(-CONSOLE_WINDOW_BYTES);
      m = this.pattern.exec(this.text);
      return m !== null;
    });
    return m;
  }

  close(): void { this.log.close(); }
}

/**
 * Poll the console log until `pattern` appears. Fails fast with BootError when `alive()` turns false
 * first (QEMU exited: a panic with panic=-1 and -no-reboot ends the process).
 */
export async function waitForConsole(consoleLogPath: string, pattern: RegExp, opts: { timeoutMs: number; alive?: () => boolean; pollMs?: number }): Promise<RegExpExecArray> {
  const deadline = Date.now() + opts.timeoutMs;
  const window = new ConsoleWindow(consoleLogPath, pattern);
  try {
    for (;;) {
      // liveness first, then the log: a VM that prints and powers off between the two reads still matches
      const alive = opts.alive ? opts.alive() : true;
      const m = window.scan();
      if (m) return m;
      if (!alive) {
        // QEMU is gone, its keeper may still be writing what the guest printed last
        await consoleSettled(consoleLogPath);
        const late = window.scan();
        if (late) return late;
        throw new BootError(`boot failed: the VM exited before printing ${pattern}`, { hint: `Console output:\n${consoleTail(consoleLogPath, 20)}` });
      }
      if (Date.now() >= deadline) {
        throw new TimeoutError(`boot timed out: ${pattern} not seen within ${opts.timeoutMs} ms`, { hint: `Console output:\n${consoleTail(consoleLogPath, 20)}` });
      }
      await new Promise((r) => setTimeout(r, opts.pollMs ?? 10));
    }
  } finally {
    window.close();
  }
}

/** Where the last `lines` lines of a log start (the unfinished one after them included), looking back at most `maxBack` bytes. */
export function logTailOffset(fd: number, size: number, lines: number, maxBack = 16 << 20): number {
  return tailScan(fd, size, lines, maxBack).offset;
}

/** logTailOffset, and how many line ends it passed (all of the file's when fewer than `lines` + 1). */
function tailScan(fd: number, size: number, lines: number, maxBack = 16 << 20): { offset: number; seen: number } {
  const floor = Math.max(0, size - maxBack);
  const buf = Buffer.alloc(TAIL_BYTES);
  let seen = 0;
  for (let end = size; end > floor;) {
    const start = Math.max(floor, end - buf.length);
    const n = fs.readSync(fd, buf, 0, end - start, start);
    for (let i = n - 1; i >= 0; i--) {
      if (buf[i] === 0x0a && ++seen > lines) return { offset: start + i + 1, seen };
    }
    end = start;
  }
  return { offset: floor, seen };
}

const openOrNull = (file: string): number | null => { try { return fs.openSync(file, 'r'); } catch { return null; } };

/**
 * Prints a log with its rotated generation (rotatedLog) before it, or the last `tail` lines of the two, a
 * chunk at a time; returns a follower at the end of what it printed (for --follow; close it when done).
 */
export function pumpConsoleLog(file: string, tail: number | undefined, write: (chunk: Buffer) => void): LogFollower {
  const cur = openOrNull(file);
  const size = cur === null ? 0 : fs.fstatSync(cur).size;
  const part = cur !== null && tail !== undefined ? tailScan(cur, size, tail) : { offset: 0, seen: 0 };
  if (tail === undefined || (part.offset === 0 && part.seen <= tail)) {
    const old = openOrNull(rotatedLog(file));
    if (old !== null) {
      try {
        // rotated since `cur` was opened: that file is .1 now, and printed once, below
        if (cur === null || fs.fstatSync(old).ino !== fs.fstatSync(cur).ino) {
          const oldSize = fs.fstatSync(old).size;
          pumpLog(old, tail === undefined ? 0 : logTailOffset(old, oldSize, tail - part.seen), oldSize, write);
        }
      } finally {
        fs.closeSync(old);
      }
    }
  }
  if (cur === null) return new LogFollower(file);
  return new LogFollower(file, { fd: cur, pos: pumpLog(cur, part.offset, size, write) });
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
