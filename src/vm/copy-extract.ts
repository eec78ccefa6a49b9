/**
 * A guest's tar stream, written into a fresh host directory that nothing else writes to. node-tar parses
 * the stream; every write is ours, so the rules are ours to keep (#31.1, #31.3):
 * - a path is components below the root: an absolute one or one with `..` fails the copy, as does one
 *   through a symlink or file the stream made (an honest tar never writes either);
 * - files are created new (O_EXCL|O_NOFOLLOW), so a name the stream used before, a hard link included,
 *   is replaced, never written through; hard links may only join two regular files of this stream;
 * - symlinks are made last, as text, and only when they resolve inside the tree (others: --keep-outside-links);
 * - setuid/setgid are dropped; device nodes and FIFOs are skipped unless --preserve-special; owners are the
 *   host user's (nothing is chowned); file contents count against --max-size, so a compressed stream
 *   (node-tar inflates gzip and zstd on sight) cannot expand past it.
 */
import { constants as C } from 'node:fs';
import { lstat, mkdir, open, rm, symlink, chmod, link } from 'node:fs/promises';
import { once } from 'node:events';
import path from 'node:path';
import { Parser, type ReadEntry } from 'tar';
import { ExitCode, SmolError } from '../errors/index.js';
import { run } from '../util/exec.js';
import { entryComponents, hostMode, linkStaysInside } from './copy-policy.js';

export interface ExtractOptions {
  /** Create FIFOs and device nodes (as far as the host user may) instead of skipping them. */
  preserveSpecial?: boolean;
  /** Keep symlinks that point outside the copied tree (by default they are skipped, with a warning). */
  keepOutsideLinks?: boolean;
  /** File contents in all may not exceed maxBytes; overCap() is the error when they would. */
  limit: { maxBytes: number; overCap(): Error };
  /** One line per kind of thing skipped, for stderr. */
  warn(line: string): void;
}

export interface ExtractStats { entries: number; bytes: number }

type Kind = 'dir' | 'file' | 'link' | 'special';

const refused = (what: string) => new SmolError(`cp failed: the guest's archive ${what}; nothing was written`, ExitCode.integrity, {
  hint: 'An honest tar never writes this: the guest\'s tar, shell or agent has been replaced. Treat the machine as compromised.',
});

const key = (parts: string[]) => parts.join('/');
const sample = (xs: string[]) => xs.slice(0, 5).join(', ') + (xs.length > 5 ? `, and ${xs.length - 5} more` : '');

/** Writes one stream into `root`, which the caller created empty. */
class Extraction {
  readonly stats: ExtractStats = { entries: 0, bytes: 0 };
  private readonly kinds = new Map<string, Kind>([['', 'dir']]);
  private readonly links = new Map<string, string>();
  private readonly dirModes = new Map<string, number>();
  private readonly specials: string[] = [];
  private readonly outside: string[] = [];

  constructor(private readonly root: string, private readonly o: ExtractOptions) {}

  private abs(parts: string[]): string {
    return path.join(this.root, ...parts);
  }

  async entry(e: ReadEntry): Promise<void> {
    this.stats.entries++;
    const parts = entryComponents(e.path);
    if (!parts) throw refused(`holds ${JSON.stringify(e.path)}, a path that leaves the directory`);
    if (!parts.length) {
      if (e.type !== 'Directory') throw refused(`makes its root a ${e.type}`);
      this.dirModes.set('', hostMode(e.mode ?? 0o755, true));
      return void e.resume();
    }
    await this.parents(parts, e.path);
    switch (e.type) {
      case 'Directory': case 'GNUDumpDir': return this.dir(parts, e);
      case 'File': case 'OldFile': case 'ContiguousFile': return this.file(parts, e);
      case 'SymbolicLink': return this.symlink(parts, e.linkpath ?? '', e);
      case 'Link': return this.hardlink(parts, e);
      case 'CharacterDevice': case 'BlockDevice': case 'FIFO': return this.special(parts, e);
      default:
        this.o.warn(`skipped ${e.path}: tar entries of type ${e.type} are not copied`);
        return void e.resume();
    }
  }

  /** Directories above an entry must be ones this stream made (or implied): never a symlink or a file. */
  private async parents(parts: string[], label: string): Promise<void> {
    for (let i = 1; i < parts.length; i++) {
      const k = key(parts.slice(0, i));
      const kind = this.kinds.get(k);
      if (kind === 'dir') continue;
      if (kind) throw refused(`writes ${JSON.stringify(label)} through ${JSON.stringify(k)}, which it made a ${kind === 'link' ? 'symlink' : kind}`);
      await mkdir(this.abs(parts.slice(0, i)), { mode: 0o700 });
      this.kinds.set(k, 'dir');
      this.dirModes.set(k, 0o755);
    }
  }

  /** A later entry of the same name replaces the earlier one, as tar does; nothing is followed. */
  private async clear(parts: string[], dirStays: boolean): Promise<boolean> {
    const k = key(parts);
    const kind = this.kinds.get(k);
    if (!kind) return false;
    if (kind === 'dir' && dirStays) return true;
    if (kind === 'dir') {
      for (const m of [this.kinds, this.links, this.dirModes]) for (const x of m.keys()) if (x.startsWith(`${k}/`)) m.delete(x);
      this.dirModes.delete(k);
    }
    if (kind !== 'link') await rm(this.abs(parts), { recursive: true, force: true });
    this.links.delete(k);
    this.kinds.delete(k);
    return false;
  }

  private async dir(parts: string[], e: ReadEntry): Promise<void> {
    if (!(await this.clear(parts, true))) await mkdir(this.abs(parts), { mode: 0o700 });
    this.kinds.set(key(parts), 'dir');
    this.dirModes.set(key(parts), hostMode(e.mode ?? 0o755, true));
    e.resume();
  }

  private async file(parts: string[], e: ReadEntry): Promise<void> {
    await this.clear(parts, false);
    if (this.stats.bytes + (e.size ?? 0) > this.o.limit.maxBytes) throw this.o.limit.overCap();
    const fh = await open(this.abs(parts), C.O_WRONLY | C.O_CREAT | C.O_EXCL | C.O_NOFOLLOW, 0o600);
    this.kinds.set(key(parts), 'file');
    try {
      for await (const chunk of e as AsyncIterable<Buffer>) {
        this.stats.bytes += chunk.length;
        await fh.write(chunk);
      }
      await fh.chmod(hostMode(e.mode ?? 0o644, false));
      if (e.mtime) await fh.utimes(e.mtime, e.mtime);
    } finally {
      await fh.close();
    }
  }

  private async symlink(parts: string[], target: string, e?: ReadEntry): Promise<void> {
    await this.clear(parts, false);
    if (!target || target.includes('\0')) throw refused(`holds a symlink ${JSON.stringify(key(parts))} without a target`);
    this.kinds.set(key(parts), 'link');
    this.links.set(key(parts), target);
    e?.resume();
  }

  private async hardlink(parts: string[], e: ReadEntry): Promise<void> {
    const to = entryComponents(e.linkpath ?? '');
    const kind = to && to.length ? this.kinds.get(key(to)) : undefined;
    if (!to || !(kind === 'file' || kind === 'link') || to.slice(0, -1).some((_, i) => this.kinds.get(key(to.slice(0, i + 1))) !== 'dir')) {
      throw refused(`holds a hard link ${JSON.stringify(e.path)} to ${JSON.stringify(e.linkpath)}, which is not a file earlier in the same archive`);
    }
    if (kind === 'link') return this.symlink(parts, this.links.get(key(to))!, e);
    await this.clear(parts, false);
    await link(this.abs(to), this.abs(parts));
    this.kinds.set(key(parts), 'file');
    e.resume();
  }

  private async special(parts: string[], e: ReadEntry): Promise<void> {
    e.resume();
    if (!this.o.preserveSpecial) {
      this.specials.push(e.path);
      return;
    }
    await this.clear(parts, false);
    const mode = hostMode(e.mode ?? 0o644, false).toString(8);
    if (e.type === 'FIFO') await run('mkfifo', ['-m', mode, this.abs(parts)]);
    else await run('mknod', ['-m', mode, this.abs(parts), e.type === 'BlockDevice' ? 'b' : 'c', String(e.header.devmaj ?? 0), String(e.header.devmin ?? 0)]);
    this.kinds.set(key(parts), 'special');
  }

  /** Symlinks once the tree is whole (so their targets can be judged), then directory modes, deepest first. */
  async finish(): Promise<void> {
    for (const [k, target] of this.links) {
      const parts = k.split('/');
      if (!this.o.keepOutsideLinks && !linkStaysInside(parts, target, this.links)) {
        this.outside.push(`${k} -> ${target}`);
        continue;
      }
      await symlink(target, this.abs(parts));
    }
    const dirs = [...this.dirModes].sort((a, b) => b[0].split('/').length - a[0].split('/').length);
    for (const [k, mode] of dirs) await chmod(k ? this.abs(k.split('/')) : this.root, mode);
    if (this.specials.length) this.o.warn(`skipped ${this.specials.length} special files (device nodes, FIFOs): ${sample(this.specials)}; --preserve-special creates them`);
    if (this.outside.length) this.o.warn(`skipped ${this.outside.length} symlink${this.outside.length === 1 ? '' : 's'} pointing outside the copied directory: ${sample(this.outside)}; --keep-outside-links keeps them`);
  }
}

/**
 * Extracts `input` into `root` (an empty directory only this call writes to). On any failure the caller
 * removes `root`; this returns only after every write it started has ended, so that removal is final.
 */
export async function extractUntrusted(input: AsyncIterable<Buffer>, root: string, o: ExtractOptions): Promise<ExtractStats> {
  if (!(await lstat(root)).isDirectory()) throw new SmolError(`cp failed: ${root} is not a directory`);
  const x = new Extraction(root, o);
  // meta entries (long names, pax headers) are held in memory: node-tar's 1 MiB bound, kept explicit
  const parser = new Parser({ strict: true, maxMetaEntrySize: 1024 * 1024 });
  let failure: unknown;
  let current: ReadEntry | undefined;
  let chain = Promise.resolve();
  parser.on('entry', (e: ReadEntry) => {
    chain = chain.then(async () => {
      if (failure !== undefined) return void e.resume();
      current = e;
      try {
        await x.entry(e);
      } catch (err) {
        failure ??= err;
        e.resume();
      } finally {
        current = undefined;
      }
    });
  });
  parser.on('error', (err: Error) => { failure ??= refused(`is not a valid tar stream (${err.message})`); });
  const ended = new Promise<void>((resolve, reject) => { parser.on('end', resolve); parser.on('error', reject); });
  ended.catch(() => undefined);
  try {
    for await (const chunk of input) {
      if (failure !== undefined) break;
      if (!parser.write(chunk)) await once(parser, 'drain');
    }
    if (failure === undefined) {
      parser.end();
      await ended;
    }
  } catch (err) {
    failure ??= err;
  } finally {
    // an entry waiting for bytes that will never come would hold the chain open
    if (failure !== undefined) current?.destroy();
    await chain;
  }
  if (failure !== undefined) throw failure instanceof Error ? failure : new Error(String(failure));
  await x.finish();
  return x.stats;
}
