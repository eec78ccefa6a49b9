/**
 * The default initramfs: busybox, the guest kernel's modules, /init, and the agent when it is built.
 * Cached by a digest of its inputs under $SMOL_HOME/images/initramfs/, so a second call costs one hash of
 * busybox and the agent.
 */
import { chmod, copyFile, mkdir, mkdtemp, rename, rm, stat, writeFile, cp } from 'node:fs/promises';
import path from 'node:path';
import { dataPaths, buildPaths } from '../../util/paths.js';
import { mapFsError } from '../../errors/index.js';
import { moduleGroup, type KernelInfo } from '../kernel/index.js';
import { writeCpio } from './cpio.js';
import { digestOf, fileDigest } from './digest.js';
import { AGENT_GUEST_PATH, INIT_SCRIPT, MODULE_LIST_PATH } from './init-script.js';
import { BUSYBOX, writeBusyboxTree } from './tree.js';
import { sweepStaleTemps } from './tmp.js';

/** Bump when the layout changes in a way the input digest cannot see. */
const BUILDER_VERSION = 'initramfs-3';

export interface Initramfs {
  path: string;
  digest: string;
  /** False when build/smol-agent did not exist: such a guest can only run the test hook. */
  hasAgent: boolean;
}

export interface InitramfsOptions {
  /** The static agent binary; defaults to build/smol-agent when it exists. */
  agentPath?: string | null;
}

export async function ensureInitramfs(home: string, kernel: KernelInfo, opts: InitramfsOptions = {}): Promise<Initramfs> {
  const agent = opts.agentPath === undefined ? await existing(buildPaths.agent) : opts.agentPath;
  const digest = digestOf(BUILDER_VERSION, INIT_SCRIPT, await fileDigest(BUSYBOX), kernel.release, kernel.packageVersion,
    kernel.moduleOrder.join(','), agent ? await fileDigest(agent) : 'no-agent');
  const dir = path.join(dataPaths(home).images, 'initramfs');
  const out = path.join(dir, `${digest.slice(0, 32)}.cpio`);
  if (await existing(out)) return { path: out, digest, hasAgent: !!agent };
  await mkdir(dir, { recursive: true });
  await sweepStaleTemps(dir);
  const tmp = await mkdtemp(path.join(dir, '.tmp-'));
  try {
    const root = path.join(tmp, 'root');
    await mkdir(root);
    await writeBusyboxTree(root);
    await writeFile(path.join(root, 'init'), INIT_SCRIPT, { mode: 0o755 });
    await mkdir(path.join(root, 'etc/smol'), { recursive: true });
    await writeFile(path.join(root, MODULE_LIST_PATH), kernel.moduleOrder.map((m) => `${moduleGroup(m)} ${m}`).join('\n') + '\n');
    await mkdir(path.join(root, 'lib'), { recursive: true });
    const modSrc = path.join(kernel.modulesRoot, 'lib', 'modules', kernel.release);
    await cp(modSrc, path.join(root, 'lib', 'modules', kernel.release), { recursive: true });
    if (agent) {
      await copyFile(agent, path.join(root, AGENT_GUEST_PATH.slice(1)));
      await chmod(path.join(root, AGENT_GUEST_PATH.slice(1)), 0o755);
    }
    await writeCpio(root, path.join(tmp, 'initramfs.cpio'));
    await rename(path.join(tmp, 'initramfs.cpio'), out);
  } catch (e) {
    throw mapFsError(e, 'building the initramfs');
  } finally {
    await rm(tmp, { recursive: true, force: true });
  }
  return { path: out, digest, hasAgent: !!agent };
}

async function existing(p: string): Promise<string | null> {
  return (await stat(p).catch(() => null)) ? p : null;
}
