/**
 * The guest kernel: Debian's linux-image-cloud-amd64, fetched with `apt-get download` and unpacked with
 * `dpkg -x` into $SMOL_HOME/kernel/<version>/ (never installed on the host). We keep the ELF vmlinux,
 * the config, and only the modules the guest loads plus a modules.dep for them.
 */
import { mkdtemp, mkdir, readFile, readdir, rename, rm, writeFile, copyFile, stat } from 'node:fs/promises';
import path from 'node:path';
import { run } from '../../util/exec.js';
import { dataPaths } from '../../util/paths.js';
import { PrerequisiteError, mapFsError } from '../../errors/index.js';
import { extractVmlinux } from './vmlinux.js';
import { GUEST_MODULES, loadOrder, moduleName, parseModulesDep } from './modules.js';
import { sweepStaleTemps } from '../image/tmp.js';
import { APT_TIMEOUT_MS } from '../limits.js';

export { detectHostTscKhz, type TscReading } from './tsc.js';
export { GUEST_MODULES, moduleGroup, type ModuleGroup } from './modules.js';

export const KERNEL_META_PACKAGE = 'linux-image-cloud-amd64';

export interface KernelInfo {
  /** Kernel release, e.g. 6.1.0-50-cloud-amd64. */
  release: string;
  /** Debian package and version it came from. */
  package: string;
  packageVersion: string;
  dir: string;
  vmlinux: string;
  /** Root of a tree holding lib/modules/<release>/ (what goes into an initramfs). */
  modulesRoot: string;
  /** Module paths relative to lib/modules/<release>/, in load order. */
  moduleOrder: string[];
}

const META = 'kernel.json';

/** The kernel already in $SMOL_HOME, or null. Never touches the network. */
export async function findKernel(home: string): Promise<KernelInfo | null> {
  const root = dataPaths(home).kernel;
  const current = await readFile(path.join(root, 'current'), 'utf8').catch(() => null);
  if (!current) return null;
  const dir = path.join(root, current.trim());
  const meta = await readFile(path.join(dir, META), 'utf8').catch(() => null);
  if (!meta) return null;
  const info = JSON.parse(meta) as Omit<KernelInfo, 'dir' | 'vmlinux' | 'modulesRoot'>;
  // kept from before GUEST_MODULES grew (virtio_pci): fetched again, as if absent
  if (lacksGuestModules(info.moduleOrder)) return null;
  const vmlinux = path.join(dir, 'vmlinux');
  if (!(await stat(vmlinux).catch(() => null))) return null;
  return { ...info, dir, vmlinux, modulesRoot: path.join(dir, 'modules') };
}

export interface EnsureKernelOptions {
  /** Look up the newest package even when a kernel is present. */
  refresh?: boolean;
  log?: (line: string) => void;
}

/**
 * The guest kernel, fetched on first use. Idempotent and fast when present; atomic: everything is built in
 * a temporary sibling directory and renamed into place, so an interrupted run leaves no half-made kernel.
 */
export async function ensureKernel(home: string, opts: EnsureKernelOptions = {}): Promise<KernelInfo> {
  const existing = await findKernel(home);
  if (existing && !opts.refresh) return existing;
  const root = dataPaths(home).kernel;
  const { pkg, version } = await resolvePackage();
  const release = pkg.replace(/^linux-image-/, '');
  const dir = path.join(root, release);
  if (existing?.release === release) return existing;
  const kept = await readFile(path.join(dir, META), 'utf8').then((t) => JSON.parse(t) as { moduleOrder: string[] }, () => null);
  if (!kept || lacksGuestModules(kept.moduleOrder)) {
    opts.log?.(`fetching ${pkg} ${version}`);
    await buildKernelDir(root, dir, pkg, version, release);
  }
  await writeAtomic(path.join(root, 'current'), release);
  const info = await findKernel(home);
  if (!info) throw new PrerequisiteError(`kernel ${release} is incomplete after setup`);
  return info;
}

function lacksGuestModules(order: readonly string[]): boolean {
  const have = new Set(order.map((p) => moduleName(p).replace(/-/g, '_')));
  return GUEST_MODULES.some((m) => !have.has(m.replace(/-/g, '_')));
}

/** The meta package only depends on the real, versioned image package; that one holds the kernel. */
async function resolvePackage(): Promise<{ pkg: string; version: string }> {
  const lookup = async () => {
    const dep = await run('apt-cache', ['depends', KERNEL_META_PACKAGE], { allowFailure: true });
    return dep.exitCode === 0 ? /Depends:\s*(linux-image-[^\s]+)/.exec(dep.stdout)?.[1] : undefined;
  };
  let pkg = await lookup();
  // a fresh container often has no package lists yet; as root we can fetch them
  if (!pkg && process.getuid?.() === 0) {
    await run('apt-get', ['update', '-qq'], { allowFailure: true, timeoutMs: APT_TIMEOUT_MS });
    pkg = await lookup();
  }
  if (!pkg) {
    throw new PrerequisiteError(`cannot resolve ${KERNEL_META_PACKAGE} from the Debian archive`, { hint: 'Run `apt-get update` (as root) so apt knows the package, then `smol setup` again.' });
  }
  const pol = await run('apt-cache', ['policy', pkg], { allowFailure: true });
  const version = /Candidate:\s*(\S+)/.exec(pol.stdout)?.[1] ?? 'unknown';
  return { pkg, version };
}

async function buildKernelDir(root: string, dir: string, pkg: string, version: string, release: string): Promise<void> {
  await mkdir(root, { recursive: true }).catch((e) => { throw mapFsError(e, 'creating kernel directory'); });
  await sweepStaleTemps(root);
  const tmp = await mkdtemp(path.join(root, '.tmp-'));
  try {
    const dl = await run('apt-get', ['download', `${pkg}=${version}`], { cwd: tmp, allowFailure: true, timeoutMs: APT_TIMEOUT_MS });
    const debs = (await readdir(tmp)).filter((f) => f.endsWith('.deb'));
    if (dl.exitCode !== 0 || debs.length !== 1) {
      throw new PrerequisiteError(`apt-get download ${pkg} failed: ${dl.stderr.trim().split('\n').slice(-2).join(' ')}`, { hint: 'Check that the Debian archive is reachable (apt-get update), then run `smol setup` again.' });
    }
    const x = path.join(tmp, 'x');
    await run('dpkg', ['-x', path.join(tmp, debs[0]), x]);
    const out = path.join(tmp, 'out');
    await mkdir(out);
    await extractVmlinux(path.join(x, 'boot', `vmlinuz-${release}`), path.join(out, 'vmlinux'));
    await copyFile(path.join(x, 'boot', `config-${release}`), path.join(out, 'config'));
    const moduleOrder = await keepModules(x, path.join(out, 'modules'), release);
    const meta = { release, package: pkg, packageVersion: version, moduleOrder };
    await writeFile(path.join(out, META), JSON.stringify(meta, null, 2) + '\n');
    await rm(dir, { recursive: true, force: true });
    // a concurrent setup may have won the race; its result is as good as ours
    await rename(out, dir).catch(async (e) => { if (!(await stat(path.join(dir, META)).catch(() => null))) throw e; });
  } catch (e) {
    throw mapFsError(e, 'fetching the guest kernel');
  } finally {
    await rm(tmp, { recursive: true, force: true });
  }
}

/** Copy the guest modules' dependency closure and index it with depmod (Debian's kmod). */
async function keepModules(fullRoot: string, outRoot: string, release: string): Promise<string[]> {
  await run('depmod', ['-b', fullRoot, release]);
  const modDir = path.join(fullRoot, 'lib', 'modules', release);
  const deps = parseModulesDep(await readFile(path.join(modDir, 'modules.dep'), 'utf8'));
  const { order, missing } = loadOrder(deps, GUEST_MODULES);
  if (missing.length) throw new PrerequisiteError(`kernel ${release} lacks modules: ${missing.join(', ')}`);
  const outDir = path.join(outRoot, 'lib', 'modules', release);
  for (const rel of order) {
    await mkdir(path.dirname(path.join(outDir, rel)), { recursive: true });
    await copyFile(path.join(modDir, rel), path.join(outDir, rel));
  }
  for (const f of ['modules.builtin', 'modules.builtin.modinfo', 'modules.order']) {
    await copyFile(path.join(modDir, f), path.join(outDir, f)).catch(() => undefined);
  }
  await run('depmod', ['-b', outRoot, release]);
  return order;
}

async function writeAtomic(file: string, text: string): Promise<void> {
  const tmp = `${file}.${process.pid}.tmp`;
  await writeFile(tmp, text);
  await rename(tmp, file);
}
