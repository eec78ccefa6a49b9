/**
 * Environments that travel by digest, across hosts (test/helpers/cloud-hosts.ts): the GPU host builds a machine,
 * packs it with its memory and pushes it to a registry in its own namespace; a worker host whose SMOL_HOME has
 * never seen the machine or the artifact runs a stage with `isolation: {vm: {artifact: REF@sha256:…}}`, pulling
 * across the switch, and the GPU host reads the result. Real QEMU (TCG), real docker-registry, real PostgreSQL.
 * VM boots are few: the source machine, then one resume and one clone on the worker host.
 */
import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { killQemuMentioning, qemuProcessesMentioning, sharedHome } from '../../helpers/cli.js';
import { startCloud, workerIdOf, type Cloud } from '../../helpers/cloud-hosts.js';
import { netnsUnavailableReason, startRegistryIn, type NsRegistry } from '../../helpers/netns.js';
import { pgUnavailableReason } from '../../helpers/postgres.js';
import { hasRegistry } from '../../helpers/registry.js';
import { removeHomeShm } from '../../helpers/shm.js';

const skip = netnsUnavailableReason() ?? pgUnavailableReason() ?? (hasRegistry() ? null : 'docker-registry not installed');
let cloud: Cloud;
let registry: NsRegistry;
let ref = '';

/** What every host has with smol installed (`smol setup`: kernel, images), and the registry it may reach over HTTP. */
const hostEnv = () => ({ SMOL_ASSETS: sharedHome(), SMOL_INSECURE_REGISTRIES: registry.host });

describe.skipIf(skip)(`a registry environment on a fresh host${skip ? ` (skipped: ${skip})` : ''}`, () => {
  beforeAll(async () => {
    cloud = await startCloud(['w1']);
    registry = await startRegistryIn(cloud.gpu);
    // the source: a machine on the GPU host with a marker on its disk, packed running with its memory, pushed by tag
    const onGpu = async (args: string[]) => {
      const r = await cloud.runOn('gpu', args, hostEnv());
      expect(r.code, `smol ${args.join(' ')}: ${r.stderr}`).toBe(0);
      return r.stdout;
    };
    await onGpu(['machine', 'create', 'env', '--forkable', '--start']);
    await onGpu(['machine', 'exec', 'env', '--', 'sh', '-c', 'echo env-v1 > /root/env-marker']);
    const art = path.join(cloud.homes.gpu, 'env.smolmachine');
    await onGpu(['pack', 'create', '--from-vm', 'env', '--with-memory', '-o', art]);
    await onGpu(['machine', 'rm', '--force', 'env']);
    const digest = (JSON.parse(await onGpu(['pack', 'push', art, `${registry.host}/smol/env:v1`, '--json'])) as { manifestDigest: string }).manifestDigest;
    ref = `${registry.host}/smol/env@${digest}`;
  }, 600_000);

  afterAll(async () => {
    for (const h of Object.values(cloud?.homes ?? {})) { killQemuMentioning(h); removeHomeShm(h); }
    registry?.stop();
    await cloud?.close();
  });

  it('runs the stage on a host that never saw the machine: pulled by digest, the pinned environment recorded, read on the GPU host', async () => {
    const home = cloud.homes.w1;
    expect(fs.readdirSync(home)).toEqual(['gateway.token']); // nothing of the machine, the artifact or a fork point
    const digest = ref.slice(ref.indexOf('@') + 1);
    await cloud.submit('art', 'apiVersion: smol/v1\nkind: Rollout\nname: art\ndefaults: { maxAttempts: 1, timeout: 120s }\ngenerate: { count: 1, template: "in{i}" }\n'
      + `stages:\n  - name: look\n    kind: cpu\n    isolation: { vm: { artifact: "${ref}" } }\n    command: [sh, -c, 'echo "$(cat /root/env-marker) $(tr a-z A-Z)"']\n`);
    const w = cloud.worker('w1', ['--isolation', 'vm', '--kind', 'cpu', '--concurrency', '1', '--lease', '10s', '--exit-when-idle', '250ms'], hostEnv());
    expect(await w.exited, w.stderr).toBe(0);
    expect(w.events.filter((e) => e.type === 'completed')).toHaveLength(1);
    // it pulled the artifact itself and made its own fork point from the packed memory
    expect(w.stderr).toMatch(/^smol: pulled .* MiB, blob sha256:/m);
    expect(w.stderr).toContain(`smol: saved fork point art-${digest.slice(7, 19)} from ${ref} (resumed its packed memory)`);

    await cloud.view(async (l) => {
      const [item] = await l.listItems('art');
      // the environment the attempt ran in is the digest it was pinned by, and it ran on the fresh host
      expect(item).toMatchObject({ status: 'done', envVersion: digest });
      expect((await l.attemptsOf(item.id)).map((a) => [a.worker, a.outcome])).toEqual([[workerIdOf(w), 'done']]);
    });
    const results = await cloud.runOn('gpu', ['rollout', 'results', 'art', '--json']);
    expect(results.code, results.stderr).toBe(0);
    // the marker was written on the GPU host's machine: only its disk, pulled by digest, holds it
    expect((JSON.parse(results.stdout) as { sampleId: string; output: string }[]).map((r) => [r.sampleId, r.output])).toEqual([['s0', 'env-v1 IN0\n']]);
    expect(qemuProcessesMentioning(home)).toEqual([]);
  }, 600_000);
});
