/**
 * Runs one claimed item's stage and says what to tell the ledger. CPU stages go through a StageRunner;
 * GPU stages become requests to the inference gateway with the item's idempotency key, so a retried
 * attempt gets the stored answer instead of a second inference. A blob that cannot be read or written, or a
 * gateway that cannot be reached or refuses this worker, is thrown as an InfraFailure (infra.ts): the item is
 * not at fault, and the worker gives it back without spending its attempt.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { BlobStore } from '../ledger/blobs.js';
import type { Claim } from '../ledger/types.js';
import { ExitCode } from '../errors/index.js';
import { GatewayError, GatewayTrustError, GatewayUnreachableError, infer, type GatewayEndpoint } from './gateway-client.js';
import { guard, infraFailure } from './infra.js';
import { GATEWAY_DOWN_MAX_WAIT_MS, GATEWAY_DOWN_RETRY_MS, GATEWAY_RETRY_AFTER_MS } from './limits.js';
import type { CpuStage, GpuStage, Manifest } from './manifest.js';
import type { StageRunner } from './stage-runner.js';

export type Execution = { ok: true; outputRef: string } | { ok: false; error: string; retryable: boolean } | { ok: false; aborted: true };

export interface ExecContext {
  blobs: BlobStore;
  runner: StageRunner;
  gateway?: string | GatewayEndpoint;
  /** Where the blobs are, for messages: a directory, or the ledger that holds them. */
  blobsAt: string;
  /** How long a gateway may refuse connections within one attempt (GATEWAY_DOWN_MAX_WAIT_MS). */
  gatewayDownMaxWaitMs?: number;
  /** Milliseconds on the ledger clock; used only to turn the item's deadline into a budget. */
  now: () => number;
}

const sleep = (ms: number, signal: AbortSignal) => new Promise<void>((resolve) => {
  const done = () => { clearTimeout(t); signal.removeEventListener('abort', done); resolve(); };
  const t = setTimeout(done, ms);
  signal.addEventListener('abort', done, { once: true });
});

export async function execute(ctx: ExecContext, m: Manifest, c: Claim, signal: AbortSignal): Promise<Execution> {
  const stage = m.stages[c.item.stageIndex];
  const budget = c.item.deadlineAt === null ? c.item.timeoutMs : Math.min(c.item.timeoutMs, c.item.deadlineAt - ctx.now());
  if (budget <= 0) return { ok: false, error: 'deadline exceeded', retryable: false };
  return stage.kind === 'cpu' ? runCpu(ctx, stage, c, budget, signal) : runGpu(ctx, stage, c, budget, signal);
}

async function runCpu(ctx: ExecContext, stage: CpuStage, c: Claim, budget: number, signal: AbortSignal): Promise<Execution> {
  const workDir = await guard('worker', 'creating the attempt\'s work directory', os.tmpdir(), () => fs.mkdtempSync(path.join(os.tmpdir(), `smol-item-${c.item.id}-`)));
  try {
    const inputPath = await guard('blob', `reading input blob ${c.item.inputRef}`, ctx.blobsAt, () => ctx.blobs.fileOf(c.item.inputRef));
    const out = await guard('worker', `running stage "${stage.name}" (${ctx.runner.isolation} isolation)`, os.hostname(), () => ctx.runner.run({
      stage, inputPath, workDir, timeoutMs: budget, signal,
      env: {
        SMOL_INPUT: inputPath, SMOL_ROLLOUT_ID: c.item.rolloutId, SMOL_ITEM_ID: String(c.item.id),
        SMOL_SAMPLE_ID: c.item.sampleId, SMOL_STAGE: c.item.stage, SMOL_ATTEMPT: String(c.attempt),
        SMOL_IDEMPOTENCY_KEY: c.item.idempotencyKey, SMOL_ENV_VERSION: c.item.envVersion,
      },
    }));
    if (out.aborted) return { ok: false, aborted: true };
    if (out.timedOut) return { ok: false, error: `timed out after ${budget} ms`, retryable: true };
    if (out.exitCode !== 0) {
      const how = out.signal ? `killed by ${out.signal}` : `exit ${out.exitCode}`;
      return { ok: false, error: `${stage.command[0]} failed (${how})${out.stderrTail ? `: ${out.stderrTail}` : ''}`, retryable: true };
    }
    return { ok: true, outputRef: await guard('blob', 'writing the output blob', ctx.blobsAt, () => ctx.blobs.put(out.output)) };
  } finally {
    fs.rmSync(workDir, { recursive: true, force: true });
  }
}

async function runGpu(ctx: ExecContext, stage: GpuStage, c: Claim, budget: number, signal: AbortSignal): Promise<Execution> {
  if (!ctx.gateway) return { ok: false, error: 'GPU stage claimed by a worker without --gateway', retryable: true };
  const until = Date.now() + budget;
  const req = {
    apiVersion: 'v1' as const, requestId: `${c.item.id}#${c.attempt}`, rolloutId: c.item.rolloutId, idempotencyKey: c.item.idempotencyKey,
    model: stage.model, promptVersion: stage.promptVersion, input: { ref: c.item.inputRef, text: await guard('blob', `reading input blob ${c.item.inputRef}`, ctx.blobsAt, () => ctx.blobs.getText(c.item.inputRef)) },
    params: stage.params, deadline: until,
  };
  const url = typeof ctx.gateway === 'string' ? ctx.gateway : ctx.gateway.url;
  const op = `POST ${new URL('/v1/infer', url).href}`;
  const maxDown = ctx.gatewayDownMaxWaitMs ?? GATEWAY_DOWN_MAX_WAIT_MS;
  let downSince: number | null = null;
  for (;;) {
    if (signal.aborted) return { ok: false, aborted: true };
    try {
      const res = await infer(ctx.gateway, req, AbortSignal.any([signal, AbortSignal.timeout(Math.max(1, until - Date.now()))]));
      return { ok: true, outputRef: await guard('blob', 'writing the output blob', ctx.blobsAt, () => ctx.blobs.put(res.output.text)) };
    } catch (err) {
      if (signal.aborted) return { ok: false, aborted: true };
      // overload: wait as told and try again within this attempt's budget, rather than burning an attempt
      if (err instanceof GatewayError && err.status === 429 && Date.now() + (err.retryAfterMs ?? GATEWAY_RETRY_AFTER_MS) < until) {
        await sleep(err.retryAfterMs ?? GATEWAY_RETRY_AFTER_MS, signal);
        continue;
      }
      // a refused token or an untrusted certificate fails every item alike: this worker's setup, never the item's
      if (err instanceof GatewayTrustError || (err instanceof GatewayError && (err.status === 401 || err.status === 403))) {
        throw infraFailure('gateway', op, url, err, ExitCode.prerequisite);
      }
      // gateway down or restarting (connection refused/reset): not the item's fault, so wait within this attempt
      // while it may be restarting, then give the item back rather than fail it; a timeout is the item's budget
      if (err instanceof GatewayUnreachableError) {
        downSince ??= Date.now();
        if (Date.now() + GATEWAY_DOWN_RETRY_MS < until && Date.now() - downSince < maxDown) {
          await sleep(Math.min(GATEWAY_DOWN_RETRY_MS, maxDown), signal);
          continue;
        }
        throw infraFailure('gateway', op, url, err);
      }
      // the budget ran out on a try after the gateway had been down in this attempt: the outage ate the budget
      if (downSince !== null && (err as Error).name === 'AbortError') {
        throw infraFailure('gateway', op, url, new GatewayUnreachableError(`cannot reach the gateway ${url} in time: it was down earlier in this attempt, and its answer after it came back missed the attempt's deadline`, 'ETIMEDOUT'));
      }
      const retryable = !(err instanceof GatewayError) || err.status >= 500 || err.status === 429;
      return { ok: false, error: `inference failed: ${(err as Error).message}`, retryable };
    }
  }
}
