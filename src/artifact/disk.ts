/** Disk flattening with qemu-img: a qcow2 chain (or a raw image) becomes one self-contained qcow2 holding only allocated, non-zero clusters. */
import { z } from 'zod';
import { run } from '../util/exec.js';
import { ArtifactError } from '../errors/index.js';

const infoSchema = z.object({ format: z.string(), 'virtual-size': z.number(), 'backing-filename': z.string().optional() });

export interface DiskInfo { format: string; virtualSize: number; backing?: string }

export async function diskInfo(file: string): Promise<DiskInfo> {
  const r = await run('qemu-img', ['info', '--output=json', file]);
  const parsed = infoSchema.safeParse(JSON.parse(r.stdout));
  if (!parsed.success) throw new ArtifactError(`qemu-img info ${file} gave unexpected output`, { where: file });
  return { format: parsed.data.format, virtualSize: parsed.data['virtual-size'], backing: parsed.data['backing-filename'] };
}

/**
 * Zero clusters are detected and left unallocated (`-S 4k`), so a mostly-empty disk stays small.
 * The format is passed explicitly: probing a raw image lets its first bytes choose how it is read.
 */
export async function flattenDisk(input: string, output: string): Promise<DiskInfo> {
  const info = await diskInfo(input);
  if (info.format !== 'qcow2' && info.format !== 'raw') {
    throw new ArtifactError(`disk ${input} is ${info.format}; only qcow2 (with its backing chain) and raw are packed`, { where: input });
  }
  await run('qemu-img', ['convert', '-f', info.format, '-O', 'qcow2', '-S', '4k', input, output]);
  return { format: 'qcow2', virtualSize: info.virtualSize };
}
