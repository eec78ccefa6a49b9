/** Which kernel and initramfs a machine boots. Kept apart from pack-source so booting never loads the artifact code. */
import fs from 'node:fs';
import path from 'node:path';
import { PrerequisiteError } from '../errors/index.js';
import { ensureInitramfs } from './image/index.js';
import { findKernel } from './kernel/index.js';
import type { MachineLayout } from './layout.js';

export const isArtifactRef = (ref: string) => ref.endsWith('.smolmachine');

/** Kernel and initramfs a machine boots: the artifact's own when it came from one, else this host's. */
export interface BootFiles { kernel: string; initrd: string; kernelIdentity: string }

export const bootFile = (layout: MachineLayout) => path.join(layout.dir, 'boot.json');
/** Present while a machine made from a memory-carrying artifact has not started yet (vm/resume.ts). */
export const resumePlanFile = (layout: MachineLayout) => path.join(layout.dir, 'resume.json');

export async function hostBootFiles(assets: string): Promise<BootFiles> {
  const kernel = await findKernel(assets);
  if (!kernel) throw new PrerequisiteError(`guest kernel missing in ${assets}`, { hint: 'Run `smol setup` (or `npm run setup`) to fetch the guest kernel and build the default image.' });
  const initrd = await ensureInitramfs(assets, kernel);
  if (!initrd.hasAgent) throw new PrerequisiteError('the guest agent is not built', { hint: 'Build it with: npm run build (needs gcc and libc6-dev).' });
  return { kernel: kernel.vmlinux, initrd: initrd.path, kernelIdentity: `${kernel.package}=${kernel.packageVersion}` };
}

export async function bootFilesFor(layout: MachineLayout, assets: string): Promise<BootFiles> {
  const f = bootFile(layout);
  if (fs.existsSync(f)) return JSON.parse(fs.readFileSync(f, 'utf8')) as BootFiles;
  return hostBootFiles(assets);
}

