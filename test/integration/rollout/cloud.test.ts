/**
 * The cloud plane with real processes and a real PostgreSQL, hosts simulated by network namespaces
 * (test/helpers/cloud-hosts.ts): a hybrid rollout whose GPU stages go through the GPU host's gateway and
 * whose CPU stages run on two worker hosts that share nothing with it but the database and the gateway's
 * URL; and the gateway refusing requests from another host without a valid token.
 */
import { spawnSync } from 'node:child_process';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { netnsUnavailableReason } from '../../helpers/netns.js';
import { pgUnavailableReason } from '../../helpers/postgres.js';
import { startCloud, until, workerIdOf, type Cloud } from '../../helpers/cloud-hosts.js';

const skip = netnsUnavailableReason() ?? pgUnavailableReason();
let cloud: Cloud;

/** The example's shape (examples/rollout/manifest.yaml), smaller: the CPU stages sleep so both hosts get some. */
const hybrid = `apiVersion: smol/v1
kind: Rollout
name: hybrid
environment: { version: hybrid-env-1 }
gpus: 1
defaults: { maxAttempts: 3, timeout: 30s, backoff: 100ms }
generate: { count: 8, template: "Solve task {i}: move the block to the goal." }
stages:
  - { name: generate, kind: gpu, model: { name: tiny-policy, version: "2026-01" }, promptVersion: p1, params: { max_tokens: 32, temperature: 0 } }
  - name: simulate
    kind: cpu
    command:
      - sh
      - -c
      - |
        action=$(cat)
        sleep 0.3
        printf '{"sample":"%s","steps":%d}\\n' "$SMOL_SAMPLE_ID" "$(printf '%s' "$action" | wc -c)" > "$SMOL_OUTPUT"
  - name: score
    kind: cpu
    command: [sh, -c, 'steps=$(sed -n "s/.*\\"steps\\":\\([0-9]*\\).*/\\1/p"); sleep 0.3; printf "{\\"reward\\":%d}\\n" $(( steps % 7 ))']
`;

/** Read on the GPU host, in its namespace and with its home: every trajectory and every blob it names. */
const readTrajectories = `import(process.cwd() + '/src/ledger/open.ts').then(async (m) => {
  const l = await m.openLedger(undefined, process.env);
  const out = [];
  for (const t of await l.ledger.trajectories('hybrid')) {
    const body = JSON.parse(await l.blobs.getText(t.ref));
    const steps = [];
    for (const s of body.steps) steps.push({ stage: s.stage, text: await l.blobs.getText(s.outputRef) });
    out.push({ sampleId: t.sampleId, env: body.environmentVersion, steps });
  }
  process.stdout.write(JSON.stringify(out));
  await l.ledger.close(); await l.blobs.close();
});`;

describe.skipIf(skip)(`the cloud plane across namespaces${skip ? ` (skipped: ${skip})` : ''}`, () => {
  beforeAll(async () => { cloud = await startCloud(['w1', 'w2']); });
  afterAll(async () => { await cloud?.close(); });

  it('refuses another host a missing or wrong token with 401 in OpenAI\'s shape, serves the right one', async () => {
    const probe = `const u=${JSON.stringify(cloud.gatewayUrl)}+'/v1/models';
      const ask=(h)=>fetch(u,{headers:h}).then(async r=>({status:r.status,auth:r.headers.get('www-authenticate'),body:await r.json()}));
      Promise.all([ask({}),ask({authorization:'Bearer '+'x'.repeat(40)}),ask({authorization:'Bearer '+process.env.T})]).then(r=>process.stdout.write(JSON.stringify(r)));`;
    const w1 = cloud.lan.hosts.w1;
    const out = spawnSync(w1.exec[0], [...w1.exec.slice(1), process.execPath, '-e', probe], { env: { ...process.env, T: cloud.token }, encoding: 'utf8' });
    expect(out.status, out.stderr).toBe(0);
    const [missing, wrong, right] = JSON.parse(out.stdout) as { status: number; auth: string | null; body: { error?: { code: string; type: string; message: string } } }[];
    expect(missing).toMatchObject({ status: 401, body: { error: { code: 'missing_api_key', type: 'invalid_request_error' } } });
    expect(missing.auth).toContain('Bearer realm="smol gateway"');
    expect(wrong).toMatchObject({ status: 401, body: { error: { code: 'invalid_api_key', type: 'invalid_request_error' } } });
    expect(wrong.auth).toContain('error="invalid_token"');
    expect(JSON.stringify(wrong.body)).not.toContain('x'.repeat(40)); // the token sent is never echoed
    expect(right.status).toBe(200);
  });

  it('runs a hybrid rollout: GPU stages through the gateway, CPU stages on both worker hosts, all readable on the GPU host', async () => {
    const workers = { w1: cloud.worker('w1', ['--concurrency', '2', '--lease', '3s']), w2: cloud.worker('w2', ['--concurrency', '2', '--lease', '3s']) };
    // both are claiming (a window has ended) before there is work, so both get a share of it
    await Promise.all(Object.values(workers).map((w) => w.waitFor((e) => e.type === 'concurrency')));
    await cloud.submit('hybrid', hybrid);
    await until('24 items are done', () => cloud.view(async (l) => (await l.getRollout('hybrid'))!.counts.done === 24), Object.values(workers));
    for (const w of Object.values(workers)) w.kill('SIGTERM');
    for (const [h, w] of Object.entries(workers)) expect(await w.exited, `${h}: ${w.stderr}`).toBe(0);

    const cpuDoneOn = (h: 'w1' | 'w2') => workers[h].events.filter((e) => e.type === 'completed' && e.stage !== 'generate').length;
    expect(cpuDoneOn('w1')).toBeGreaterThan(0);
    expect(cpuDoneOn('w2')).toBeGreaterThan(0);
    expect(cpuDoneOn('w1') + cpuDoneOn('w2')).toBe(16); // each CPU item completed once, by one host
    for (const w of Object.values(workers)) expect(w.events.filter((e) => e.type === 'infra' || e.type === 'failed' || e.type === 'rejected')).toEqual([]);

    await cloud.view(async (l) => {
      const items = await l.listItems('hybrid');
      expect(items.every((i) => i.status === 'done' && i.attempt === 1)).toBe(true);
      // every attempt was made by one of the two worker hosts' processes
      const ids = new Set(Object.values(workers).map(workerIdOf));
      for (const i of items) for (const a of await l.attemptsOf(i.id)) expect(ids.has(a.worker)).toBe(true);
      // the generations went through the gateway: each is its durable inference record, answered upstream in a batch
      for (const s of items.filter((i) => i.stage === 'generate')) {
        expect(await l.getInference(s.idempotencyKey)).toMatchObject({ status: 'done', rolloutId: 'hybrid', envVersion: 'upstream:http://127.0.0.1:8000' });
      }
      expect((await l.stats('hybrid')).inference).toMatchObject({ requests: 8, done: 8, shed: 0 });
    });

    const results = await cloud.runOn('gpu', ['rollout', 'results', 'hybrid', '--json']);
    expect(results.code, results.stderr).toBe(0);
    const rows = JSON.parse(results.stdout) as { sampleId: string; stage: string; output: string | null }[];
    expect(rows).toHaveLength(24);
    for (const r of rows.filter((x) => x.stage === 'generate')) expect(r.output).toMatch(/^tiny-policy:[0-9a-f]{12}:\d+$/);
    for (const r of rows.filter((x) => x.stage === 'score')) expect(JSON.parse(r.output!)).toEqual({ reward: expect.any(Number) });

    const gpu = cloud.lan.hosts.gpu;
    const t = spawnSync(gpu.exec[0], [...gpu.exec.slice(1), process.execPath, '--import', 'tsx', '-e', readTrajectories],
      { env: { ...process.env, SMOL_HOME: cloud.homes.gpu, SMOL_LEDGER: cloud.pg.url, SMOL_BLOBS: '' }, encoding: 'utf8' });
    expect(t.status, t.stderr).toBe(0);
    const trajectories = JSON.parse(t.stdout) as { sampleId: string; env: string; steps: { stage: string; text: string }[] }[];
    expect(trajectories.map((x) => x.sampleId).sort()).toEqual(['s0', 's1', 's2', 's3', 's4', 's5', 's6', 's7']);
    for (const x of trajectories) {
      expect(x.env).toBe('hybrid-env-1');
      expect(x.steps.map((s) => s.stage)).toEqual(['generate', 'simulate', 'score']);
      expect(JSON.parse(x.steps[1].text)).toMatchObject({ sample: x.sampleId });
    }

    const check = await cloud.runOn('gpu', ['ledger', 'check', '--blobs', '--json']);
    expect(check.code, check.stderr).toBe(0);
    const report = JSON.parse(check.stdout) as { issues: unknown[]; blobStore: { kind: string }; blobsChecked: number };
    expect(report.issues).toEqual([]);
    expect(report.blobStore.kind).toBe('postgres');
    expect(report.blobsChecked).toBeGreaterThanOrEqual(24 + 8);
  });
});
