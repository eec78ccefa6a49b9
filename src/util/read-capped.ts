/**
 * Reads a text file the user named (a Smolfile, a rollout manifest) with a size limit, so that a huge file,
 * /dev/zero or a stream that never ends is refused after `max` bytes instead of growing memory until it runs out.
 */
import fs from 'node:fs';

/** The file's text, or null when it holds more than `max` bytes. Errors opening or reading it are thrown as they are. */
export function readCapped(file: string, max: number): string | null {
  const fd = fs.openSync(file, 'r');
  try {
    const st = fs.fstatSync(fd);
    if (st.isFile() && st.size > max) return null;
    // one byte past the limit tells "exactly max" from "more"
    const buf = Buffer.alloc(max + 1);
    let got = 0;
    while (got < buf.length) {
      const n = fs.readSync(fd, buf, got, buf.length - got, null);
      if (n === 0) break;
      got += n;
    }
    return got > max ? null : buf.toString('utf8', 0, got);
  } finally {
    fs.closeSync(fd);
  }
}

/** "8 MiB", "256 KiB": how the limits read in errors and docs. */
export function sizeLabel(bytes: number): string {
  if (bytes >= 1024 * 1024 && bytes % (1024 * 1024) === 0) return `${bytes / (1024 * 1024)} MiB`;
  if (bytes >= 1024 && bytes % 1024 === 0) return `${bytes / 1024} KiB`;
  return `${bytes} bytes`;
}
