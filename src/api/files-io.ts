/**
 * The host side of the files routes: scratch directories under $SMOL_HOME, uploads read to a cap, and the
 * parsing of a guest's directory listing (the agent has no listing op, so the guest's busybox `stat` makes one).
 */
import fs from 'node:fs';
import { mkdir, mkdtemp, readdir, rm, stat } from 'node:fs/promises';
import type http from 'node:http';
import path from 'node:path';
import { UserError } from '../errors/index.js';
import { tooLarge } from './body.js';
import { ApiError } from './errors.js';

/** SMOL_API_MAX_UPLOAD: bytes one upload may carry, and one file or tree a download may hold on the host. */
export function uploadCap(): number {
  const raw = process.env.SMOL_API_MAX_UPLOAD;
  if (raw === undefined || raw === '') return 1024 ** 3;
  if (!/^\d+$/.test(raw) || Number(raw) < 1) throw new UserError(`SMOL_API_MAX_UPLOAD must be a whole number of bytes, got ${JSON.stringify(raw)}`, { where: 'SMOL_API_MAX_UPLOAD' });
  return Number(raw);
}

/**
 * SMOL_API_MAX_TRANSFERS (default 4): staged file transfers at once. Each may hold SMOL_API_MAX_UPLOAD of host
 * disk, so without a bound 20 parallel tar downloads of a big tree would ask for 20 GiB.
 */
function transferSlots(): number {
  const n = Number(process.env.SMOL_API_MAX_TRANSFERS ?? '');
  return Number.isInteger(n) && n > 0 ? n : 4;
}
let active = 0;

/**
 * A fresh directory only this request uses; `done` removes it, whatever is in it, and frees its slot. Past
 * the slots: 503 `unavailable` with Retry-After (set on `res`). Named with our pid, so a later server can
 * remove what a killed one left (sweepScratch).
 */
export async function scratch(home: string, res: http.ServerResponse): Promise<{ dir: string; done: () => Promise<void> }> {
  if (active >= transferSlots()) {
    res.setHeader('retry-after', '5');
    throw new ApiError(503, 'unavailable', `${active} file transfers are already staged on this server`, {
      hint: 'Retry after a few seconds, or raise SMOL_API_MAX_TRANSFERS on the server (each may use SMOL_API_MAX_UPLOAD of host disk).',
    }, 75);
  }
  active++;
  try {
    const base = path.join(home, 'tmp');
    await mkdir(base, { recursive: true, mode: 0o700 });
    const dir = await mkdtemp(path.join(base, `api-${process.pid}-`));
    let freed = false;
    return { dir, done: () => { if (!freed) { freed = true; active--; } return rm(dir, { recursive: true, force: true }); } };
  } catch (err) {
    active--;
    throw err;
  }
}

const alive = (pid: number) => {
  try { process.kill(pid, 0); return true; } catch (err) { return (err as NodeJS.ErrnoException).code === 'EPERM'; }
};

/**
 * At `smol serve` start: removes the scratch directories of servers that are gone (killed mid-transfer), up to
 * a GiB each. Two servers may share the home, so a live pid's are kept; unnamed ones (older servers) after an hour.
 */
export async function sweepScratch(home: string): Promise<string[]> {
  const base = path.join(home, 'tmp');
  const names = await readdir(base).catch(() => [] as string[]);
  const removed: string[] = [];
  for (const name of names) {
    if (!name.startsWith('api-')) continue;
    const pid = /^api-(\d+)-/.exec(name)?.[1];
    const dir = path.join(base, name);
    if (pid !== undefined ? Number(pid) === process.pid || alive(Number(pid)) : Date.now() - (await stat(dir)).mtimeMs < 3600_000) continue;
    await rm(dir, { recursive: true, force: true });
    removed.push(name);
  }
  return removed;
}

/** The request body, counted: past `cap` it throws 413 and reads no further. */
export async function* cappedBody(req: http.IncomingMessage, cap: number, what: string): AsyncGenerator<Buffer> {
  const declared = Number(req.headers['content-length'] ?? NaN);
  if (declared > cap) throw tooLarge(cap, what);
  let n = 0;
  for await (const chunk of req as AsyncIterable<Buffer>) {
    n += chunk.length;
    if (n > cap) throw tooLarge(cap, what);
    yield chunk;
  }
}

/** Writes the capped body to `file` (created new, `mode`); returns its size. */
export async function bodyToFile(req: http.IncomingMessage, file: string, mode: number, cap: number): Promise<number> {
  const out = fs.createWriteStream(file, { flags: 'wx', mode });
  let n = 0;
  try {
    for await (const chunk of cappedBody(req, cap, 'file upload')) {
      n += chunk.length;
      if (!out.write(chunk)) await new Promise<void>((resolve) => out.once('drain', () => resolve()));
    }
  } finally {
    await new Promise<void>((resolve, reject) => out.end((err?: Error | null) => (err ? reject(err) : resolve())));
  }
  fs.chmodSync(file, mode); // the umask narrowed what createWriteStream made
  return n;
}

/** At most this many entries in one listing; the answer says when there were more. */
export const LIST_MAX_ENTRIES = 10_000;
/** The guest's listing output held in memory: entries × a long line, and not more. */
export const LIST_MAX_OUTPUT = LIST_MAX_ENTRIES * 320;
const NAME_MAX = 255;

/**
 * One line per entry: the raw mode in hex, the size, the name (`./x`). Exit 2: no such path; 3: not a
 * directory. `head` stops a directory of millions from being listed whole.
 */
export const LIST_SCRIPT = `[ -e "$1" ] || [ -L "$1" ] || exit 2; [ -d "$1" ] || exit 3; cd -- "$1" || exit 2
find . -mindepth 1 -maxdepth 1 -exec stat -c '%f %s %n' {} + | head -n ${LIST_MAX_ENTRIES + 1}`;

export interface DirEntry { name: string; type: 'file' | 'dir' | 'symlink' | 'other'; size: number; mode: string }

const TYPES: Record<number, DirEntry['type']> = { 0o100000: 'file', 0o040000: 'dir', 0o120000: 'symlink' };

/**
 * The guest wrote this text: a line that does not parse (a name with a newline splits into two) is dropped,
 * names are bounded, and only LIST_MAX_ENTRIES are kept. A guest can lie about its own files, nothing more.
 */
export function parseListing(text: string): { entries: DirEntry[]; truncated: boolean } {
  const entries: DirEntry[] = [];
  let truncated = false;
  for (const line of text.split('\n')) {
    const m = /^([0-9a-f]{1,8}) (\d{1,20}) \.\/(.+)$/.exec(line);
    if (!m || m[3].includes('/') || Buffer.byteLength(m[3]) > NAME_MAX) continue;
    if (entries.length === LIST_MAX_ENTRIES) { truncated = true; break; }
    const raw = Number.parseInt(m[1], 16);
    entries.push({ name: m[3], type: TYPES[raw & 0o170000] ?? 'other', size: Math.min(Number(m[2]), Number.MAX_SAFE_INTEGER), mode: octal(raw & 0o7777) });
  }
  entries.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  return { entries, truncated };
}

export const octal = (mode: number) => mode.toString(8).padStart(4, '0');
