/**
 * Resuming machines from memory-carrying `.smolmachine` artifacts (DESIGN.md §3–4). `machine create --from`
 * and `pack run` extract the artifact and leave a resume plan next to the machine (pack-source.ts); the next
 * start maps the extracted RAM file copy-on-write, loads the device state and continues the guest where it
 * was packed, instead of booting. A plan is used once: from then on the disk has moved past the saved
 * instant, so later starts boot it. Where the saved state cannot load (another QEMU build, accelerator, CPU
 * model, or a machine of another shape) the disk is cold-booted and a notice says why.
 * Loaded only when a plan or a memory artifact is present, so ordinary boots never pay for it.
 */
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { z } from 'zod';
import { canResume, type ArtifactManifest, type HostQemu } from '../artifact/manifest.js';
import { decodeManifest } from '../artifact/manifest.js';
import type { Smolfile } from '../smolfile/schema.js';
import { cachedProbe } from '../util/probe-cache.js';
import { run } from '../util/exec.js';
import { resumePlanFile } from './boot-files.js';
import type { GuestChannel, Progress } from './engine.js';
import { AGENT_PORTS, type MachineLayout } from './layout.js';
import { findQemu } from './qemu/detect.js';
import type { MachineRecord } from './store/machines.js';
import type { MachineService, OpenChannel } from './service.js';
import { QEMU_PROBE_MS } from './limits.js';

/** qemu/args.ts launches every machine as microvm. */
export const MACHINE_TYPE = 'microvm';

const planSchema = z.object({ artifact: z.string().min(1), dir: z.string().min(1) }).strict();
export type ResumePlan = z.infer<typeof planSchema>;

export function writeResumePlan(layout: MachineLayout, plan: ResumePlan): void {
  fs.writeFileSync(resumePlanFile(layout), `${JSON.stringify(plan)}\n`);
}

/**
 * The QEMU build: the first line of `--version` names the distribution's package build as well as the
 * version ("QEMU emulator version 7.2.22 (Debian 1:7.2+dfsg-7+deb12u18+b3)": "7.2.22 (Debian …)" is kept).
 * Cached per binary like the version.
 */
export async function qemuBuild(): Promise<string> {
  const q = await findQemu();
  if (!q) return 'unknown';
  const st = fs.statSync(q.path);
  const line = await cachedProbe('qemu-build', `${q.path}:${st.size}:${st.mtimeMs}:${st.ino}`, async () => {
    const r = await run(q.path, ['--version'], { allowFailure: true, timeoutMs: QEMU_PROBE_MS });
    return r.stdout.split('\n')[0]?.replace(/^.*?version\s+/i, '').trim() || null;
  });
  return line ?? 'unknown';
}

/**
 * TEST ONLY: SMOL_TEST_RESUME_HOST='{"qemuBuild":"other"}' pretends this host differs from the one that
 * packed the artifact, so tests can watch the cold-boot fallback without a second QEMU build.
 */
function testOverride(): Partial<HostQemu> {
  const raw = process.env.SMOL_TEST_RESUME_HOST;
  return raw ? (JSON.parse(raw) as Partial<HostQemu>) : {};
}

/** What a machine with this spec would be launched on here, in the manifest's terms. */
export async function hostQemu(svc: MachineService, spec: Smolfile): Promise<HostQemu> {
  const ops = svc.engine.fork;
  const vm = ops ? await ops.identity(spec.memory) : { qemu: 'unknown', accel: 'tcg' as const, cpu: 'unknown' };
  return {
    qemuVersion: vm.qemu, qemuBuild: await qemuBuild(), accelerator: vm.accel, cpuModel: vm.cpu, machineType: MACHINE_TYPE,
    memoryMiB: spec.memory, cpus: spec.cpus, net: spec.net, agentPorts: AGENT_PORTS, diskBytes: spec.disk ? spec.disk * 2 ** 20 : undefined,
    ...testOverride(),
  };
}

/** null when the artifact's memory state can be resumed by a machine of this spec, else the one-line notice. */
export async function resumeNotice(svc: MachineService, file: string, m: ArtifactManifest, spec: Smolfile): Promise<string | null> {
  if (!m.resume) return null;
  if (!svc.engine.fork) return `cold-booting ${file}: this VM backend cannot restore saved memory state`;
  if (spec.volumes?.length) return `cold-booting ${file}: a machine with volumes cannot restore saved memory state (QEMU cannot migrate a virtiofs device)`;
  const d = canResume(m, await hostQemu(svc, spec));
  return d.ok ? null : `cold-booting ${file}: its saved memory state cannot be restored here (${d.reason})`;
}

/**
 * The start hook (service.ts): resume rec from its plan, or return null for the caller to boot the disk
 * (state unusable here, or the restore failed: the reason goes to onProgress). The plan is dropped either
 * way. Called with rec's start lock held and its state 'starting'.
 */
export async function resumeMachine(svc: MachineService, rec: MachineRecord, layout: MachineLayout, o: { timeoutMs: number; onProgress?: Progress }): Promise<OpenChannel | null> {
  const planFile = resumePlanFile(layout);
  let plan: ResumePlan;
  let m: ArtifactManifest;
  try {
    plan = planSchema.parse(JSON.parse(fs.readFileSync(planFile, 'utf8')));
    m = decodeManifest(fs.readFileSync(path.join(plan.dir, 'manifest.json')), path.join(plan.dir, 'manifest.json'));
  } catch (err) {
    fs.rmSync(planFile, { force: true });
    o.onProgress?.(`resume plan unusable (${(err as Error).message}); booting the disk`);
    return null;
  }
  // one shot: after this start, whether it resumes or boots, the disk is past the saved instant
  fs.rmSync(planFile, { force: true });
  const notice = await resumeNotice(svc, plan.artifact, m, rec.spec);
  if (notice || !m.resume) {
    o.onProgress?.(notice ?? 'no memory state; booting');
    return null;
  }
  const files = { memory: path.join(plan.dir, entryName(m, 'memory')), state: path.join(plan.dir, entryName(m, 'device-state')) };
  const ops = svc.engine.fork!;
  const port = m.resume.agentPort;
  o.onProgress?.('resuming the packed memory state');
  let pid: number | undefined;
  let ch: GuestChannel | undefined;
  const release = svc.store.lock(`${rec.id}#p${port}`, 'channel', rec.name);
  try {
    // the cached RAM file is mapped MAP_PRIVATE: the guest's writes never reach it, so runs share one copy
    pid = await svc.engine.launch(rec.spec, layout, { diskless: false, forkable: false, clone: { memFile: files.memory } });
    svc.store.update(rec.id, { pid, startedAt: Date.now() });
    await ops.restore(layout, files.state, o.timeoutMs);
    ch = await svc.engine.connect(layout, port, o.timeoutMs);
    // no VMGENID in the guest kernel: every resume of one artifact would share its RNG state until reseeded
    await ch.configure({ hostname: rec.name, machineId: crypto.randomBytes(16).toString('hex'), entropy: crypto.randomBytes(64), timeMs: Date.now() });
    return { ch, release };
  } catch (err) {
    ch?.close();
    release();
    if (pid) await svc.engine.terminate(pid, layout, 0).catch(() => undefined);
    svc.store.update(rec.id, { pid: null });
    o.onProgress?.(`resuming ${plan.artifact} failed (${(err as Error).message}); booting its disk`);
    return null;
  }
}

function entryName(m: ArtifactManifest, kind: 'memory' | 'device-state'): string {
  return m.entries.find((e) => e.kind === kind)!.name;
}
