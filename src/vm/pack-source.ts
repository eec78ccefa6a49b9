/**
 * The machine side of `.smolmachine` artifacts: what `smol pack create --from-vm/--image/-s` packs, and
 * how an artifact becomes a bootable disk (`smol machine create --from FILE`, `smol pack run FILE`).
 */
import fs from 'node:fs';
import path from 'node:path';
import { ConflictError, ExitCode, PrerequisiteError, SmolError, UserError } from '../errors/index.js';
import { ensureExtracted, type MachineSource, type ResolvedSource } from '../artifact/index.js';
import { loadSmolfile } from '../smolfile/load.js';
import { mergeSpec } from '../smolfile/merge.js';
import type { Smolfile } from '../smolfile/schema.js';
import { assetsHome, dataPaths } from '../util/paths.js';
import { resolveImage } from './image/index.js';
import { bootFile, bootFilesFor, hostBootFiles, type BootFiles } from './boot-files.js';
import { createCloneDisk } from './fork/clone.js';
import { identityMismatch } from './fork/identity.js';
import { discardSpare } from './fork/spare.js';
import { AGENT_PORTS, type MachineLayout } from './layout.js';
import { newMachineId, type MachineRecord } from './store/machines.js';
import { MACHINE_TYPE, qemuBuild, writeResumePlan } from './resume.js';
import type { MachineService } from './service.js';
import { refuseSecretRam } from './secrets.js';

/**
 * Extract (once, cached) and record the artifact's boot files next to the machine; returns its base disk.
 * A memory-carrying artifact also leaves a resume plan: the machine's first start decides (for the machine
 * as it is then shaped, on the QEMU it then has) whether to resume it or boot its disk (resume.ts).
 */
export async function prepareArtifactImage(file: string, home: string, layout: MachineLayout): Promise<{ base: string; imageId: string; notice?: string }> {
  const prep = await ensureExtracted(file, path.join(dataPaths(home).cache, 'artifacts'));
  const { disk, kernel, initrd } = prep.files;
  if (!disk || !kernel || !initrd) throw new UserError(`artifact ${file} has no ${!disk ? 'disk' : !kernel ? 'kernel' : 'initramfs'} entry, so it cannot boot`);
  const boot: BootFiles = { kernel, initrd, kernelIdentity: prep.manifest.kernel?.identity ?? 'artifact' };
  fs.writeFileSync(bootFile(layout), JSON.stringify(boot));
  if (prep.manifest.resume) writeResumePlan(layout, { artifact: file, dir: prep.dir });
  return { base: disk, imageId: `artifact-${prep.digest.slice(0, 24)}` };
}

function specFields(spec: Smolfile) {
  return { cpus: spec.cpus, memoryMiB: spec.memory, env: spec.env, workdir: spec.workdir, entrypoint: spec.command };
}

/**
 * Pauses a running forkable machine just long enough to freeze its disk (blockdev-snapshot-sync: it continues
 * on a new overlay), save its device state and copy its RAM file, then lets it run on. The frozen overlay
 * chain is the disk that matches the memory; it stays the machine's backing file, as after a fork.
 */
async function captureRunning(s: MachineService, rec: MachineRecord, boot: BootFiles): Promise<ResolvedSource> {
  const ops = s.engine.fork;
  if (!ops) throw new PrerequisiteError('pack create --with-memory failed: this VM backend cannot save machine state');
  refuseSecretRam(rec, 'pack create --with-memory');
  const layout = s.layout(rec);
  const unlock = s.store.lock(rec.id, 'pack', rec.name);
  let tmp: string | undefined;
  const cleanup = () => { if (tmp) fs.rmSync(tmp, { recursive: true, force: true }); unlock(); };
  try {
    // holding the machine's lock, any staging dir here is from a pack that was killed: it held a RAM copy
    for (const n of fs.readdirSync(layout.dir).filter((x) => x.startsWith('.pack-'))) fs.rmSync(path.join(layout.dir, n), { recursive: true, force: true });
    tmp = fs.mkdtempSync(path.join(layout.dir, '.pack-'));
    const insp = await ops.inspect(layout);
    const restart = `smol machine stop ${rec.name} && smol machine start ${rec.name} --forkable`;
    if (insp.memory !== 'shared') {
      throw new ConflictError(`pack create --with-memory failed: machine "${rec.name}" ${insp.memory === 'none' ? 'was not started forkable' : 'runs on private memory (a clone or a resumed machine)'}, so its RAM is not in a file smol can copy`, { where: rec.name, hint: `Restart it forkable: ${restart}` });
    }
    if (!insp.running) throw new ConflictError(`pack create --with-memory failed: machine "${rec.name}" is paused (held by fork --hold)`, { where: rec.name, hint: `Restart it: ${restart}` });
    if (!insp.diskSize) throw new ConflictError(`pack create --with-memory failed: machine "${rec.name}" has no root disk`, { where: rec.name });
    const diff = identityMismatch(insp.vm, await ops.identity(insp.vm.memoryMiB));
    if (diff.length) {
      throw new ConflictError(`pack create --with-memory failed: machine "${rec.name}" runs on another QEMU setup than this host now has (${diff.join(', ')})`, { where: rec.name, hint: `Restart it on this QEMU: ${restart}` });
    }
    const build = await qemuBuild();
    // a port no host session uses while the state is saved: the resumed guest inherits no session on it
    const held = await s.channel(rec.id);
    try {
      // the machine moves onto a new layer, where its fork spare (on the current one) would no longer fit
      await discardSpare(s, rec);
      const nextDisk = path.join(layout.dir, `disk-${newMachineId()}.qcow2`);
      await createCloneDisk(layout.disk, nextDisk, insp.diskSize);
      const mem = { ram: path.join(tmp, 'memory.ram'), deviceState: path.join(tmp, 'device-state') };
      let moved = false;
      const cap = await ops.capture(layout, {
        stateFile: mem.deviceState, nextDisk, memCopy: mem.ram, hold: false,
        onDiskMoved: () => { moved = true; s.store.update(rec.id, { diskFile: path.basename(nextDisk) }); },
      }).catch((err: unknown) => {
        if (!moved) fs.rmSync(nextDisk, { force: true });
        throw err;
      });
      if (!cap.frozenDisk) throw new SmolError(`pack create --with-memory failed: machine "${rec.name}" reported no disk to freeze`, ExitCode.internal);
      return {
        disk: cap.frozenDisk, kernel: boot.kernel, initrd: boot.initrd, kernelIdentity: boot.kernelIdentity, imageIdentity: rec.imageId ?? undefined,
        ...specFields(rec.spec), memoryMiB: insp.vm.memoryMiB,
        memory: {
          ...mem,
          resume: {
            qemuVersion: insp.vm.qemu, qemuBuild: build, accelerator: insp.vm.accel, cpuModel: insp.vm.cpu, machineType: MACHINE_TYPE,
            net: rec.spec.net, agentPorts: AGENT_PORTS, agentPort: held.ch.port,
          },
        },
        release: async () => cleanup(),
        captured: { pausedMs: cap.pausedMs, stateBytes: cap.stateBytes },
      };
    } finally {
      held.ch.close();
      held.release();
    }
  } catch (err) {
    cleanup();
    throw err;
  }
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
      const s = svc();
      const rec = s.refresh(s.store.get(name));
      const layout = s.layout(rec);
      if (o.withMemory) {
        if (rec.state !== 'running') {
          throw new ConflictError(`machine "${rec.name}" is ${rec.state}; --with-memory packs a running machine`, { where: rec.name, hint: `Start it forkable first: smol machine start ${rec.name} --forkable` });
        }
        return captureRunning(s, rec, await bootFilesFor(layout, assets()));
      }
      if (rec.state !== 'stopped') {
        throw new ConflictError(`machine "${rec.name}" is ${rec.state}; its disk is only consistent when stopped`, { hint: `Stop it first (smol machine stop ${rec.name}), or pack it running with --with-memory (started --forkable)` });
      }
      const boot = await bootFilesFor(layout, assets());
      const unlock = s.store.lock(rec.id, 'pack', rec.name);
      return { disk: layout.disk, kernel: boot.kernel, initrd: boot.initrd, kernelIdentity: boot.kernelIdentity, imageIdentity: rec.imageId ?? undefined, ...specFields(rec.spec), release: async () => unlock() };
    },
    fromImage: (ref) => fromImage(mergeSpec(undefined, undefined, { image: ref === 'default' ? ref : path.resolve(ref) })),
    async fromSmolfile(file, o) {
      const loaded = loadSmolfile(file);
      // an artifact carries the machine, not host directories: init runs without the volumes (docs/volumes.md)
      const spec = { ...mergeSpec(loaded.spec, loaded.dir, {}), volumes: [] };
      if (!spec.init.length && !o.withMemory) return fromImage(spec);
      // init commands change the disk, and memory needs a running machine: build it once, then pack it
      const s = svc();
      const rec = await s.create(spec, { name: `pack-${process.pid}-${Date.now().toString(36)}` });
      try {
        await s.start(rec.id, { forkable: o.withMemory, forkHelper: false });
        if (!o.withMemory) await s.stop(rec.id);
        const src = await this.fromVm(rec.name, o);
        return { ...src, release: async () => { await src.release?.(); await s.remove(rec.id, { force: true }); } };
      } catch (err) {
        await s.remove(rec.id, { force: true });
        throw err;
      }
    },
  };
}
