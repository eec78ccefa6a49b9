import os from 'node:os';
import type { Command } from 'commander';
import { z } from 'zod';
import { createStageRunner, type StageRunner } from '../../rollout/stage-runner.js';
import { Worker, type WorkerEvent } from '../../rollout/worker.js';
import { gatewayEndpoint } from '../../rollout/gateway-client.js';
import { redactUrl } from '../../rollout/infra.js';
import { CONCURRENCY_WINDOW_MS, WORKER_GIVE_UP_AFTER, WORKER_LEASE_MS, WORKER_STOP_GRACE_MS } from '../../rollout/limits.js';
import { parseDuration } from '../../util/duration.js';
import { UserError } from '../../errors/index.js';
import { blobsEnv, blobsOption, ledgerOption, withLedger } from './ledger/open.js';

// bare numbers stay milliseconds here, as they were; the maximum is everyone's (util/duration.ts)
const duration = z.string().transform((v, ctx) => {
  const d = parseDuration(v, 'ms');
  if ('problem' in d) { ctx.addIssue({ code: 'custom', message: d.problem }); return z.NEVER; }
  return d.ms;
});

export const workerSchema = z.strictObject({
  ledger: z.string().optional(),
  blobs: z.string().min(1).optional(),
  concurrency: z.coerce.number().int().min(1).max(1024).optional(),
  adaptive: z.boolean().optional(),
  isolation: z.enum(['process', 'vm']).default('process'),
  gateway: z.url().optional(),
  gatewayTokenFile: z.string().min(1).optional(),
  gatewayCa: z.string().min(1).optional(),
  kind: z.enum(['cpu', 'gpu', 'all']).optional(),
  lease: duration.default(WORKER_LEASE_MS),
  grace: duration.default(WORKER_STOP_GRACE_MS),
  exitWhenIdle: duration.optional(),
  window: duration.default(CONCURRENCY_WINDOW_MS),
  giveUpAfter: z.coerce.number().int().min(1).max(1_000_000).default(WORKER_GIVE_UP_AFTER),
  warmMachine: z.string().min(1).optional(),
  forkPoint: z.string().min(1).optional(),
  smolfile: z.string().min(1).optional(),
  json: z.boolean().optional(),
}).refine((o) => o.isolation === 'vm' || (!o.warmMachine && !o.smolfile && !o.forkPoint), { path: ['isolation'], message: '--warm-machine, --fork-point and --smolfile need --isolation vm' })
  .refine((o) => !(o.warmMachine && o.forkPoint), { path: ['forkPoint'], message: 'give --warm-machine or --fork-point, not both' });

/** SMOL_WORKER_FAULT="after-claim=MS,after-output=MS": pauses for fault-injection tests. */
function faultsFromEnv(): { afterClaimMs?: number; afterOutputMs?: number } {
  const out: { afterClaimMs?: number; afterOutputMs?: number } = {};
  for (const part of (process.env.SMOL_WORKER_FAULT ?? '').split(',').filter(Boolean)) {
    const [k, v] = part.split('=');
    if (k === 'after-claim') out.afterClaimMs = Number(v);
    if (k === 'after-output') out.afterOutputMs = Number(v);
  }
  return out;
}

/** Per minute, as `rollout stats` reports: a VM-isolated worker's few items per second read 0.0 and 0.1 per second. */
const perMin = (perSecond: number) => (perSecond * 60).toFixed(1);

function describe(e: WorkerEvent): string | null {
  switch (e.type) {
    case 'concurrency': {
      const s = e.step;
      return `concurrency ${s.from}${s.to !== s.from ? ` → ${s.to}` : ''}: ${perMin(s.rate)} items/min completed (best ${perMin(s.best)}) — ${s.reason}`;
    }
    case 'failed': return `item ${e.itemId} attempt ${e.attempt} failed (${e.state}): ${e.error}`;
    case 'rejected': return `item ${e.itemId} attempt ${e.attempt}: ${e.op} rejected (${e.reason})`;
    case 'released': return `item ${e.itemId} attempt ${e.attempt}: lease released`;
    case 'infra': {
      const item = e.itemId === undefined ? '' : `item ${e.itemId} attempt ${e.attempt} (stage ${e.stage}): `;
      const lease = e.itemId === undefined ? '' : e.released ? '; lease released' : '; lease not released (it will expire)';
      return `${item}${e.error} [${e.where}]${lease}; ${e.area} failure ${e.inARow} in a row, ${e.infraFailures} in all${e.backoffMs ? `; next claim in ${(e.backoffMs / 1000).toFixed(1)} s` : ''}`;
    }
    case 'stopped': return `worker stopped after ${e.completed} completed items${e.infraFailures ? `, ${e.infraFailures} infrastructure failures` : ''}`;
    default: return process.env.SMOL_VERBOSE === '1' ? `item ${e.itemId} attempt ${e.attempt}: ${e.type}` : null;
  }
}

/** A program embedding the CLI may inject its own VM runner; otherwise `--isolation vm` builds the microVM one. */
let injectedRunner: StageRunner | undefined;
export function setVmStageRunner(r: StageRunner): void { injectedRunner = r; }

/** The microVM runner over this SMOL_HOME's machines; loaded only for --isolation vm (it pulls in the VM code). */
async function vmStageRunner(o: { warmMachine?: string; forkPoint?: string; smolfile?: string }): Promise<StageRunner> {
  if (injectedRunner) return injectedRunner;
  const [{ VmStageRunner }, { machineService }, { specFromFlags }] = await Promise.all([
    import('../../rollout/vm-stage-runner.js'), import('../context.js'), import('../machine-options.js'),
  ]);
  return VmStageRunner.create({
    svc: machineService(), spec: specFromFlags({ smolfile: o.smolfile }), warmMachine: o.warmMachine, forkPoint: o.forkPoint,
    onNotice: (line) => process.stderr.write(`smol: ${line}\n`), // a stage's artifact pulled, its point saved: once per host
  });
}

export function register(program: Command): void {
  blobsOption(ledgerOption(program.command('worker')
    .description('claim and run rollout items with leases (CPU stages as subprocesses, GPU stages via the gateway)')
    .option('--concurrency <n>', 'items at once; without it the worker adapts up to 2×CPUs')
    .option('--adaptive', 'with --concurrency: start at 1 and scale up to N only while completed items/s rises')
    .option('--isolation <mode>', 'process, or vm: each attempt in a fresh microVM', 'process')
    .option('--warm-machine <name>', 'with --isolation vm: save one fork point from this forkable machine (NAME.warm, reused) and clone it per attempt')
    .option('--fork-point <point>', 'with --isolation vm: clone each attempt\'s VM from this saved fork point (smol snapshot ls)')
    .option('-s, --smolfile <file>', 'with --isolation vm and no warm machine: the throwaway VM\'s Smolfile')
    .option('--gateway <url>', 'inference gateway for GPU stages (without it only CPU stages are claimed)')
    .option('--gateway-token-file <file>', 'the gateway\'s bearer token (first line that is not a # comment); else $SMOL_GATEWAY_TOKEN')
    .option('--gateway-ca <file>', 'PEM CA to trust for an https gateway with a private certificate')
    .option('--kind <kind>', 'claim only cpu or gpu stages, or all')
    .option('--lease <duration>', 'lease length; renewed every third of it', `${WORKER_LEASE_MS / 1000}s`)
    .option('--grace <duration>', 'on SIGTERM, how long running items may finish before their leases are released', `${WORKER_STOP_GRACE_MS / 1000}s`)
    .option('--exit-when-idle <duration>', 'exit once the queue has been empty this long')
    .option('--window <duration>', 'measurement window for adaptive concurrency', `${CONCURRENCY_WINDOW_MS / 1000}s`)
    .option('--give-up-after <n>', 'exit non-zero after N blob store, ledger or gateway failures in a row with one cause', String(WORKER_GIVE_UP_AFTER))
    .option('--json', 'print events as JSON lines on stdout')))
    .action(async (raw: unknown) => {
      const opts = workerSchema.parse(raw);
      const orphan = !opts.gateway && (opts.gatewayTokenFile ? '--gateway-token-file' : opts.gatewayCa ? '--gateway-ca' : null);
      if (orphan) throw new UserError(`${orphan} needs --gateway: without a gateway this worker claims only CPU stages and would never use it`, { where: orphan, hint: 'Add --gateway https://HOST:PORT, or drop the option.' });
      // read before anything starts, so a missing token file or CA is one clear error
      const gateway = opts.gateway ? gatewayEndpoint({ url: opts.gateway, tokenFile: opts.gatewayTokenFile, caFile: opts.gatewayCa }) : undefined;
      const runner = await createStageRunner(opts.isolation, opts.isolation === 'vm' ? await vmStageRunner(opts) : undefined);
      const env = blobsEnv(opts.blobs);
      await withLedger(opts.ledger, async (l) => {
        const adaptive = opts.concurrency === undefined ? true : opts.adaptive ?? false;
        const worker = new Worker({
          ledger: l.ledger, blobs: l.blobs, runner, gateway, concurrency: opts.concurrency ?? os.availableParallelism() * 2, adaptive,
          leaseMs: opts.lease, windowMs: opts.window, exitWhenIdleMs: opts.exitWhenIdle, faults: faultsFromEnv(),
          kind: opts.kind === 'all' ? undefined : opts.kind,
          ledgerAt: l.location.ledger, giveUpAfter: opts.giveUpAfter, graceMs: opts.grace,
          onEvent: (e) => {
            if (opts.json) process.stdout.write(JSON.stringify(e) + '\n');
            else { const line = describe(e); if (line) process.stderr.write(`worker: ${line}\n`); }
          },
        });
        const onSignal = () => worker.stop(opts.grace);
        process.once('SIGTERM', onSignal);
        process.once('SIGINT', onSignal);
        const vmFrom = runner.isolation === 'vm' ? (opts.forkPoint ? ` (clones of ${opts.forkPoint})` : opts.warmMachine ? ` (clones of ${opts.warmMachine}.warm)` : ' (throwaway machines, or the stage\'s fork point)') : '';
        if (!opts.json) process.stderr.write(`worker ${worker.id}: ${runner.isolation} isolation${vmFrom}, concurrency ${adaptive ? `adaptive 1..${worker.concurrency.max}` : worker.concurrency.max}, ledger ${redactUrl(l.location.ledger)}\n`);
        try {
          await worker.run();
        } finally {
          process.off('SIGTERM', onSignal);
          process.off('SIGINT', onSignal);
        }
      }, env);
    });
}
