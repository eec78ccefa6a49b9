/**
 * The machine side of `.smolmachine` artifacts: what `smol pack create --from-vm/--image/-s` packs, and
 * how an artifact becomes a bootable disk (`smol machine create --from FILE`, `smol pack run FILE`).
 */
import fs from 'node:fs';
import path from 'node:path';
import { ConflictError, PrerequisiteError, UserError } from '../errors/index.js';
import { prepareFromArtifact, type MachineSource, type ResolvedSource } from '../artifact/index.js';
import { loadSmolfile } from '../smolfile/load.js';
import { mergeSpec } from '../smolfile/merge.js';
import type { Smolfile } from '../smolfile/schema.js';
import { assetsHome, dataPaths } from '../util/paths.js';
import { resolveImage } from './image/index.js';
import { bootFile, bootFilesFor, hostBootFiles, type BootFiles } from './boot-files.js';
import type { MachineLayout } from './layout.js';
import type { MachineService } from './service.js';

/** Extract (once, cached) and record the artifact's boot files next to the machine; returns its base disk. */
export async function prepareArtifactImage(file: string, home: string, layout: MachineLayout): Promise<{ base: string; imageId: string; notice?: string }> {
  const prep = await prepareFromArtifact(file, { cacheDir: path.join(dataPaths(home).cache, 'artifacts') });
  const { disk, kernel, initrd } = prep.files;
  if (!disk || !kernel || !initrd) throw new UserError(`artifact ${file} has no ${!disk ? 'disk' : !kernel ? 'kernel' : 'initramfs'} entry, so it cannot boot`);
  const boot: BootFiles = { kernel, initrd, kernelIdentity: prep.manifest.kernel?.identity ?? 'artifact' };
  fs.writeFileSync(bootFile(layout), JSON.stringify(boot));
  return { base: disk, imageId: `artifact-${prep.digest.slice(0, 24)}`, notice: prep.notice };
}

function specFields(spec: Smolfile) {
  return { cpus: spec.cpus, memoryMiB: spec.memory, env: spec.env, workdir: spec.workdir, entrypoint: spec.command };
}

export function machinePackSource(svc: () => MachineService): MachineSource {
  const assets = () => assetsHome({ ...process.env, SMOL_HOME: svc().home });
  const fromImage = async (spec: Smolfile): Promise<ResolvedSource> => {
    const img = await resolveImage(spec.image, assets());
    const boot = await hostBootFiles(assets());
    return { disk: img.basePath, kernel: boot.kernel, initrd: boot.initrd, kernelIdentity: boot.kernelIdentity, imageIdentity: img.id, ...specFields(spec) };
  };
  return {
    async fromVm(name, o) {
      if (o.withMemory) throw new PrerequisiteError('pack create --with-memory is not available yet', { hint: 'Pack the disk only (stop the machine, drop --with-memory).' });
      const s = svc();
      const rec = s.refresh(s.store.get(name));
      if (rec.state !== 'stopped') throw new ConflictError(`machine "${rec.name}" is ${rec.state}; its disk is only consistent when stopped`, { hint: `Stop it first: smol machine stop ${rec.name}` });
      const layout = s.layout(rec);
      const boot = await bootFilesFor(layout, assets());
      const unlock = s.store.lock(rec.id, 'pack', rec.name);
      return { disk: layout.disk, kernel: boot.kernel, initrd: boot.initrd, kernelIdentity: boot.kernelIdentity, imageIdentity: rec.imageId ?? undefined, ...specFields(rec.spec), release: async () => unlock() };
    },
    fromImage: (ref) => fromImage(mergeSpec(undefined, undefined, { image: ref === 'default' ? ref : path.resolve(ref) })),
    async fromSmolfile(file, o) {
      if (o.withMemory) throw new PrerequisiteError('pack create --with-memory is not available yet', { hint: 'Drop --with-memory to pack the disk.' });
      const loaded = loadSmolfile(file);
      const spec = mergeSpec(loaded.spec, loaded.dir, {});
      if (!spec.init.length) return fromImage(spec);
      // init commands change the disk: build the machine once, then pack its disk
      const s = svc();
      const rec = await s.create(spec, { name: `pack-${process.pid}-${Date.now().toString(36)}` });
      try {
        await s.start(rec.id);
        await s.stop(rec.id);
      } catch (err) {
        await s.remove(rec.id, { force: true });
        throw err;
      }
      const src = await this.fromVm(rec.name, { withMemory: false });
      return { ...src, release: async () => { await src.release?.(); await s.remove(rec.id, { force: true }); } };
    },
  };
}
