/** Public surface of rollouts (src/index.ts re-exports it): manifests, submission, workers, the gateway. */
export { parseManifest, samplesOf, manifestSchema, type Manifest, type Stage, type CpuStage, type GpuStage } from './manifest.js';
export { submitRollout, readManifestFile, type SubmitResult } from './submit.js';
export { advance, itemFor, idempotencyKey, ManifestCache } from './pipeline.js';
export { Worker, type WorkerOptions, type WorkerEvent } from './worker.js';
export { AdaptiveConcurrency, type ConcurrencyStep } from './concurrency.js';
export { ProcessStageRunner, createStageRunner, prlimitArgs, type StageRunner, type StageRun, type StageOutcome } from './stage-runner.js';
export { infer, GatewayError, type InferRequest, type InferResponse } from './gateway-client.js';
export { GatewayService, type GatewayOptions } from './gateway/service.js';
export { startGatewayServer, parseListen, type GatewayServer } from './gateway/server.js';
export { OpenAiCompletionsUpstream, type Upstream } from './gateway/upstream.js';
