/**
 * The host side of one tar stream from a guest: each entry written into a fresh directory (`root`) that
 * only this writer touches, under the rules of copy-policy.ts (#31.1, #31.3).
 *
 * Directories and symlinks are kept in a tree in memory, and that tree, not the disk, says what a path
 * goes through: a name in it is a directory we made, a symlink we will make, or (when absent) at most a
 * file or special file we made. So an entry can never be written through a symlink or a file, and
 * replacing a directory drops everything below it at once. Files are not kept (an honest tree is mostly
 * files); what is kept is charged against a budget, so a stream of names cannot grow smol without bound.
 */
import { constants as C } from 'node:fs';
import { chmod, link, lstat, mkdir, open, rm, symlink } from 'node:fs/promises';
import path from 'node:path';
import type { ReadEntry } from 'tar';
import { ExitCode, NoSpaceError, SmolError } from '../errors/index.js';
import { run } from '../util/exec.js';
import { entryComponents, hostMode, linkStaysInside } from './copy-policy.js';
import { CP_MAX_ENTRIES } from './limits.js';

export interface WriterOptions {
  /** Create FIFOs and device nodes (as far as the host user may) instead of skipping them. */
  preserveSpecial?: boolean;
  /** Keep symlinks that point outside the copied tree (by default they are skipped, with a warning). */
  keepOutsideLinks?: boolean;
  /** File contents in all may not exceed maxBytes; overCap() is the error when they would. */
  limit: { maxBytes: number; overCap(): Error };
  /** One line per kind of thing skipped, for stderr. */
  warn(line: string): void;
  /** Bytes of names and link targets kept in memory (TRACKED_BYTES). */
  trackedBytes?: number;
  /** Entries of every kind the copy may create (CP_MAX_ENTRIES): file contents are capped by bytes, inodes by this. */
  maxEntries?: number;
}

export interface ExtractStats { entries: number; bytes: number }

/** Names, link targets and bookkeeping of directories and symlinks held in memory for one copy. */
export const TRACKED_BYTES = 64 * 1024 * 1024;
const NODE_COST = 96;

interface Dir { kind: 'dir'; mode: number; children: Map<string, Node> }
interface Link { kind: 'link'; target: string }
type Node = Dir | Link;

export const refused = (what: string) => new SmolError(`cp failed: the guest's archive ${what}; nothing was written`, ExitCode.integrity, {
  hint: 'An honest tar never writes this: the guest\'s tar, shell or agent has been replaced. Treat the machine as compromised.',
});

/** At most five, then a count: a guest decides how many there are. */
class Sample {
  n = 0;
  readonly first: string[] = [];
  add(s: string): void {
    if (++this.n <= 5) this.first.push(s);
  }
  toString(): string {
    return this.first.join(', ') + (this.n > 5 ? `, and ${this.n - 5} more` : '');
  }
}

export class TreeWriter {
  readonly stats: ExtractStats = { entries: 0, bytes: 0 };
  private readonly top: Dir = { kind: 'dir', mode: 0o755, children: new Map() };
  private tracked = 0;
  private readonly specials = new Sample();
  private readonly outside = new Sample();
  private readonly others = new Sample();

  constructor(private readonly root: string, private readonly o: WriterOptions) {}

  private abs(parts: readonly string[]): string {
    return path.join(this.root, ...parts);
  }

  private track(n: number): void {
    this.tracked += n;
    const budget = this.o.trackedBytes ?? TRACKED_BYTES;
    if (this.tracked > budget) {
      throw new SmolError(`cp failed: the guest's archive holds more directories and symlinks than smol tracks in one copy (${budget} bytes of names); nothing was written`, ExitCode.failure, {
        hint: 'Copy its subdirectories one at a time.',
      });
    }
  }

  async entry(e: ReadEntry): Promise<void> {
    const max = this.o.maxEntries ?? CP_MAX_ENTRIES;
    if (++this.stats.entries > max) {
      throw new NoSpaceError(`cp failed: the guest's archive holds more than ${max} entries, the most one copy creates; nothing was written`, {
        hint: 'Copy its subdirectories one at a time, or pack them into one file in the guest (tar) and copy that.',
      });
    }
    const parts = entryComponents(e.path);
    if (!parts) throw refused(`holds ${JSON.stringify(e.path)}, a path that leaves the directory`);
    if (!parts.length) {
      if (e.type !== 'Directory') throw refused(`makes its root a ${e.type}`);
      this.top.mode = hostMode(e.mode ?? 0o755, true);
      return void e.resume();
    }
    const parent = await this.parentOf(parts, e.path);
    const name = parts[parts.length - 1]!;
    switch (e.type) {
      case 'Directory': case 'GNUDumpDir': return this.dir(parent, parts, name, e);
      case 'File': case 'OldFile': case 'ContiguousFile': return this.file(parent, parts, name, e);
      case 'SymbolicLink': return this.symlink(parent, parts, name, e.linkpath ?? '', e);
      case 'Link': return this.hardlink(parent, parts, name, e);
      case 'CharacterDevice': case 'BlockDevice': case 'FIFO': return this.special(parent, parts, name, e);
      default:
        this.others.add(`${e.path} (${e.type})`);
        return void e.resume();
    }
  }

  /** The directory an entry goes in: every component above it a directory of this stream, or implied by it. */
  private async parentOf(parts: string[], label: string): Promise<Dir> {
    let d = this.top;
    for (let i = 0; i < parts.length - 1; i++) {
      const c = parts[i]!;
      const n = d.children.get(c);
      if (n?.kind === 'dir') {
        d = n;
        continue;
      }
      const through = JSON.stringify(parts.slice(0, i + 1).join('/'));
      if (n) throw refused(`writes ${JSON.stringify(label)} through ${through}, which it made a symlink`);
      if (await lstat(this.abs(parts.slice(0, i + 1))).then(() => true, () => false)) {
        throw refused(`writes ${JSON.stringify(label)} through ${through}, which it made a file`);
      }
      await mkdir(this.abs(parts.slice(0, i + 1)), { mode: 0o700 });
      this.track(NODE_COST + c.length);
      const made: Dir = { kind: 'dir', mode: 0o755, children: new Map() };
      d.children.set(c, made);
      d = made;
    }
    return d;
  }

  /** A later entry of a name replaces the earlier one, as tar does; nothing is followed. A directory may stay. */
  private async clear(parent: Dir, parts: string[], name: string, keepDir: boolean): Promise<Dir | undefined> {
    const n = parent.children.get(name);
    if (n?.kind === 'dir' && keepDir) return n;
    parent.children.delete(name);
    if (n?.kind !== 'link') await rm(this.abs(parts), { recursive: n?.kind === 'dir', force: true });
    return undefined;
  }

  private async dir(parent: Dir, parts: string[], name: string, e: ReadEntry): Promise<void> {
    const mode = hostMode(e.mode ?? 0o755, true);
    const kept = await this.clear(parent, parts, name, true);
    if (kept) kept.mode = mode;
    else {
      await mkdir(this.abs(parts), { mode: 0o700 });
      this.track(NODE_COST + name.length);
      parent.children.set(name, { kind: 'dir', mode, children: new Map() });
    }
    e.resume();
  }

  private async file(parent: Dir, parts: string[], name: string, e: ReadEntry): Promise<void> {
    await this.clear(parent, parts, name, false);
    if (this.stats.bytes + (e.size ?? 0) > this.o.limit.maxBytes) throw this.o.limit.overCap();
    // new, never through a name that exists: a hard link made earlier is replaced, not written through
    const fh = await open(this.abs(parts), C.O_WRONLY | C.O_CREAT | C.O_EXCL | C.O_NOFOLLOW, 0o600);
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

  private async symlink(parent: Dir, parts: string[], name: string, target: string, e: ReadEntry): Promise<void> {
    if (!target || target.includes('\0')) throw refused(`holds a symlink ${JSON.stringify(parts.join('/'))} without a usable target`);
    await this.clear(parent, parts, name, false);
    this.track(NODE_COST + name.length + target.length);
    parent.children.set(name, { kind: 'link', target });
    e.resume();
  }

  private async hardlink(parent: Dir, parts: string[], name: string, e: ReadEntry): Promise<void> {
    const bad = () => refused(`holds a hard link ${JSON.stringify(e.path)} to ${JSON.stringify(e.linkpath)}, which is not a file earlier in the same archive`);
    const to = entryComponents(e.linkpath ?? '');
    if (!to?.length) throw bad();
    let d: Dir = this.top;
    for (const c of to.slice(0, -1)) {
      const n = d.children.get(c);
      if (n?.kind !== 'dir') throw bad();
      d = n;
    }
    const n = d.children.get(to[to.length - 1]!);
    if (n?.kind === 'link') return this.symlink(parent, parts, name, n.target, e);
    if (n || !(await lstat(this.abs(to)).then((s) => s.isFile(), () => false))) throw bad();
    await this.clear(parent, parts, name, false);
    await link(this.abs(to), this.abs(parts));
    e.resume();
  }

  private async special(parent: Dir, parts: string[], name: string, e: ReadEntry): Promise<void> {
    e.resume();
    if (!this.o.preserveSpecial) return this.specials.add(e.path);
    await this.clear(parent, parts, name, false);
    const mode = hostMode(e.mode ?? 0o644, false).toString(8);
    if (e.type === 'FIFO') await run('mkfifo', ['-m', mode, this.abs(parts)]);
    else await run('mknod', ['-m', mode, this.abs(parts), e.type === 'BlockDevice' ? 'b' : 'c', String(e.header.devmaj ?? 0), String(e.header.devmin ?? 0)]);
  }

  /** The target of the symlink the stream made at `parts`, if it made one. */
  private linkAt = (parts: readonly string[]): string | undefined => {
    let n: Node | undefined = this.top;
    for (const c of parts) n = n?.kind === 'dir' ? n.children.get(c) : undefined;
    return n?.kind === 'link' ? n.target : undefined;
  };

  /** Symlinks once the tree is whole (so their targets can be judged), then directory modes, deepest first. */
  async finish(): Promise<void> {
    await this.settle(this.top, []);
    if (this.specials.n) this.o.warn(`skipped ${this.specials.n} special files (device nodes, FIFOs): ${this.specials}; --preserve-special creates them`);
    if (this.outside.n) this.o.warn(`skipped ${this.outside.n} symlink${this.outside.n === 1 ? '' : 's'} pointing outside the copied directory: ${this.outside}; --keep-outside-links keeps them`);
    if (this.others.n) this.o.warn(`skipped ${this.others.n} entries of types smol does not copy: ${this.others}`);
  }

  private async settle(d: Dir, at: string[]): Promise<void> {
    for (const [name, n] of d.children) {
      const parts = [...at, name];
      if (n.kind === 'dir') await this.settle(n, parts);
      else if (this.o.keepOutsideLinks || linkStaysInside(parts, n.target, this.linkAt)) await symlink(n.target, this.abs(parts));
      else this.outside.add(`${parts.join('/')} -> ${n.target}`);
    }
    await chmod(this.abs(at), d.mode);
  }
}
