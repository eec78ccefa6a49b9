/**
 * Host directories smol will not share into a guest unless the user says so (`--allow-unsafe-volume`,
 * docs/volumes.md#host-paths-smol-refuses): the host kernel's interfaces, smol's own state, and `/` read-write.
 * Every check works on what the path is, not on how it is spelled: its real path (symlinks resolved) and the
 * identity (device and inode) of each directory on the way up, so neither a symlink nor a bind mount of
 * /proc elsewhere gets through. A guest with a read-write share can plant symlinks on the host, which is why
 * this runs at every start, not only at create.
 */
import fs from 'node:fs';
import path from 'node:path';

/** smol's own directories, as the process resolving the volume sees them. */
export interface SmolDirs { home: string; assets: string }

/** Where the host kernel is reachable as files: a guest writing there changes the host itself. */
const KERNEL_DIRS: Record<string, string> = {
  '/proc': 'the host kernel\'s process and settings interface: a guest could change host sysctls (kernel.core_pattern runs a program as host root)',
  '/sys': 'the host kernel\'s device and settings interface: a guest could reconfigure host devices and the kernel',
  '/dev': 'the host\'s device nodes: a guest could read and write the host\'s disks and memory',
};

/**
 * statfs magic numbers of kernel interface filesystems (linux/magic.h), wherever they are mounted: a bind of
 * /proc/sys at /srv/x has no /proc above it but is still procfs.
 */
const KERNEL_FS = new Map<number, string>([
  [0x9fa0, 'procfs'], [0x62656572, 'sysfs'], [0x27e0eb, 'cgroup'], [0x63677270, 'cgroup2'], [0x64626720, 'debugfs'],
  [0x74726163, 'tracefs'], [0x73636673, 'securityfs'], [0xcafe4a11, 'bpf'], [0x62656570, 'configfs'],
  [0xde5e81e4, 'efivarfs'], [0x65735543, 'fusectl'], [0x6165676c, 'pstore'], [0x42494e4d, 'binfmt_misc'], [0x1cd1, 'devpts'],
]);

type Id = string;
/** A directory's identity (device:inode), as busybox `stat -c %d:%i` prints it. */
export const idOf = (p: string): Id | null => {
  try {
    const st = fs.statSync(p);
    return `${st.dev}:${st.ino}`;
  } catch {
    return null;
  }
};

/** p and each directory above it, by identity. */
function chain(p: string): Id[] {
  const ids: Id[] = [];
  for (let d = p; ; d = path.dirname(d)) {
    const id = idOf(d);
    if (id) ids.push(id);
    if (d === path.dirname(d)) return ids;
  }
}

const realOr = (p: string): string => {
  try {
    return fs.realpathSync(p);
  } catch {
    return path.resolve(p); // a home not made yet cannot be shared either; its spelled path is what it will be
  }
};

/**
 * Why this host directory must not be shared (with the mode asked), or null. `real` is its real path; the
 * caller has checked that it exists and is a directory.
 */
export function hostPathProblem(real: string, readonly: boolean, dirs: SmolDirs): string | null {
  const up = chain(real);
  for (const [dir, why] of Object.entries(KERNEL_DIRS)) {
    const id = idOf(dir);
    if (real === dir || real.startsWith(`${dir}/`) || (id && up.includes(id))) return `it is ${real === dir ? '' : 'inside '}${dir}, ${why}`;
  }
  let magic: number | undefined;
  try {
    magic = fs.statfsSync(real).type;
  } catch { /* only a refusal needs it */ }
  const kfs = magic === undefined ? undefined : KERNEL_FS.get(magic);
  if (kfs) return `it is on a ${kfs} filesystem, one of the host kernel's interfaces: a guest writing there changes the host itself`;
  if (!readonly && up.length && up[0] === idOf('/')) return 'it is the host\'s root directory, read-write: a guest could rewrite any host file';
  const own: [string, string][] = [[realOr(dirs.home), 'smol\'s home (SMOL_HOME)'], [realOr(dirs.assets), 'smol\'s shared assets (SMOL_ASSETS)']];
  for (const [dir, what] of own) {
    const id = idOf(dir);
    const inside = real === dir || real.startsWith(`${dir}/`) || (id !== null && up.includes(id));
    const above = dir.startsWith(real === '/' ? '/' : `${real}/`) || chain(dir).includes(up[0]);
    if (inside || above) {
      return `it ${inside ? (real === dir ? 'is' : 'is inside') : 'contains'} ${what}, ${dir}: a guest could ${readonly ? 'read every machine\'s disk, image and database' : 'rewrite smol\'s database, machine disks, kernel and images'}`;
    }
  }
  return null;
}
