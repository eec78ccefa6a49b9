/**
 * What a tree copied out of a guest may hold once it is on the host. A guest is root in its VM and can
 * answer an archive request with any bytes, so every path, link target and mode in its stream is a claim
 * to check, never an instruction (#31).
 */

/** `p` as components below the copy's root, or null when it names an absolute path or climbs with `..`. */
export function entryComponents(p: string): string[] | null {
  if (p.startsWith('/') || p.includes('\0')) return null;
  const parts = p.split('/').filter((x) => x !== '' && x !== '.');
  return parts.includes('..') ? null : parts;
}

/**
 * Host modes keep the permission bits and drop setuid and setgid: a host user could otherwise run a
 * guest-made program as its owner (the host user, root when smol runs as root). Sticky stays on
 * directories, where it only narrows who may delete, and is meaningless on files.
 */
export function hostMode(mode: number, isDir: boolean): number {
  return mode & (isDir ? 0o1777 : 0o777);
}

/** The kernel's limit on symlinks followed in one lookup (ELOOP); a chain past it leads nowhere. */
const MAX_LINK_HOPS = 40;

/** The target of the tree's symlink at these components, or undefined when there is none. */
export type LinkLookup = (parts: readonly string[]) => string | undefined;

/**
 * Does the symlink at `at` (components below the root) with text `target` resolve inside the tree, when
 * followed the way the kernel would, through the tree's other symlinks (`linkAt`)? An absolute target, a
 * `..` above the root at any step, or a loop is outside: such a link on the host would point at host
 * files, or nowhere.
 */
export function linkStaysInside(at: readonly string[], target: string, linkAt: LinkLookup): boolean {
  if (target.startsWith('/')) return false;
  const dir = at.slice(0, -1);
  let todo = target.split('/');
  let hops = 0;
  while (todo.length) {
    const c = todo.shift()!;
    if (c === '' || c === '.') continue;
    if (c === '..') {
      if (!dir.length) return false;
      dir.pop();
      continue;
    }
    const next = linkAt([...dir, c]);
    if (next === undefined) {
      dir.push(c);
      continue;
    }
    if (++hops > MAX_LINK_HOPS || next.startsWith('/')) return false;
    todo = [...next.split('/'), ...todo];
  }
  return true;
}
