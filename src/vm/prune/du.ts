import fs from 'node:fs';
import path from 'node:path';

/** Bytes a file or tree occupies on disk (allocated blocks: sparse files count what they hold), like `du`. */
export function diskBytes(p: string): number {
  let st: fs.Stats;
  try {
    st = fs.lstatSync(p);
  } catch {
    return 0;
  }
  if (!st.isDirectory()) return st.blocks * 512;
  let n = st.blocks * 512;
  let names: string[] = [];
  try {
    names = fs.readdirSync(p);
  } catch {
    // unreadable: count the directory itself
  }
  for (const e of names) n += diskBytes(path.join(p, e));
  return n;
}

/** Modified within the last `ms` (a missing path is not recent). */
export function recentlyTouched(p: string, ms: number, now = Date.now()): boolean {
  try {
    return now - fs.statSync(p).mtimeMs < ms;
  } catch {
    return false;
  }
}
