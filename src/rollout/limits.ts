/**
 * The rollout area's timeouts and limits in one place (issue #32.5): the worker's leases and pacing, the
 * inference gateway's caps and waits, a manifest's bounds and defaults, each with the reason for its value.
 * A flag that overrides one (`smol worker --lease`, `smol gateway --max-batch`, …) shows it as its default.
 */

// The worker

/** `--lease`: a dead worker's items come back within one lease; renewed every third, a worker must stall 20 s to lose one. */
export const WORKER_LEASE_MS = 30_000;
/** `--grace`: on SIGTERM, running items get this long to finish before they are aborted and their leases released. */
export const WORKER_STOP_GRACE_MS = 10_000;
/** `--window`: adaptive concurrency judges completed items per window; 5 s holds several items of a second or two. */
export const CONCURRENCY_WINDOW_MS = 5_000;
/** An idle worker asks the ledger for work this often: new items start within 0.2 s, at ~5 claims a second per worker. */
export const WORKER_POLL_MS = 200;
/** A 429 without Retry-After: wait a second (the header's unit) before asking the gateway again. */
export const GATEWAY_RETRY_AFTER_MS = 1_000;
/** A gateway that refuses connections is restarting, not the item's fault: retry this often within the attempt. */
export const GATEWAY_DOWN_RETRY_MS = 500;
/**
 * A gateway refusing connections this long within one attempt is not restarting (a restart takes seconds): the
 * worker gives the item back as an infrastructure failure instead of waiting out the item's whole timeout.
 */
export const GATEWAY_DOWN_MAX_WAIT_MS = 15_000;
/**
 * After an infrastructure failure (a blob, the ledger or the gateway out of reach) the worker claims nothing
 * for this long, doubled per failure in a row up to the cap, with jitter so that workers hit by one outage do
 * not come back in step: 0.5, 1, 2, 4 s… rides out a restart without hammering what is down.
 */
export const WORKER_INFRA_BACKOFF_MS = 500;
export const WORKER_INFRA_BACKOFF_CAP_MS = 30_000;
/**
 * `--give-up-after`: this many infrastructure failures in a row with one cause and the worker exits non-zero:
 * five (about 8 s of backoff) tells a misconfigured host from a blip, and a supervisor sees the exit.
 */
export const WORKER_GIVE_UP_AFTER = 5;
/** Of a failed stage's stderr, the last 5 lines and at most this many characters go into the ledger with the attempt. */
export const STAGE_STDERR_TAIL_CHARS = 2_000;

// VM-isolated stages (vm-stage-runner.ts)

/** Kept of a VM stage's stderr while it runs, before the tail above is cut from it: enough for the last 5 lines. */
export const VM_STAGE_STDERR_BYTES = 4096;
/** A VM stage boots within its item's timeout, but never gets less than this: no guest boots in under a second. */
export const VM_STAGE_MIN_BOOT_MS = 1_000;
/** Workers starting together wait this long for one of them to save the warm machine's fork point. */
export const WARM_POINT_WAIT_MS = 120_000;

// The inference gateway

/** `--max-outstanding`: admitted, unanswered requests overall; past it a 429 with Retry-After beats a retry storm. */
export const GATEWAY_MAX_OUTSTANDING = 1024;
/** `--max-per-rollout`: one rollout may hold a quarter of the gateway, so one large rollout cannot starve the rest. */
export const GATEWAY_MAX_PER_ROLLOUT = 256;
/** `--max-batch`: the largest batch sent upstream; vLLM and llama.cpp batch well up to a few dozen prompts. */
export const GATEWAY_MAX_BATCH = 32;
/** `--batch-window` (ms): the first request of a batch waits this long for company; small beside an inference's latency. */
export const GATEWAY_BATCH_WINDOW_MS = 5;
/** A request body past this is refused (413) before it is parsed: prompts are text, 8 MiB is far beyond any real one. */
export const GATEWAY_MAX_BODY_BYTES = 8 * 1024 * 1024;
/** Idle keep-alive connections stay open this long (Node's default is 5 s), so a worker's next request reuses one. */
export const GATEWAY_KEEP_ALIVE_MS = 30_000;
/** One upstream completions call: a large batch of long generations takes a minute or more; two is a hung server. */
export const UPSTREAM_TIMEOUT_MS = 120_000;

// Manifests

/**
 * Limits checked before any work (docs/ledger.md): parsing YAML costs ~1 µs and ~50 bytes of memory per byte
 * (more for tiny tokens: util/yaml-bounded.ts counts them first), and each item ~100 µs and ~1.4 KB to submit,
 * so a 50 MB manifest or `count: 10000000` would take minutes and gigabytes before failing or succeeding.
 * A rollout larger than this is several rollouts.
 */
export const MANIFEST_MAX_BYTES = 8 * 1024 * 1024;
export const MAX_ITEMS = 1_000_000;
export const TEMPLATE_MAX_BYTES = 1024 * 1024;
/** What `generate` may expand to: count × the template with {i} replaced. */
export const GENERATED_MAX_BYTES = 64 * 1024 * 1024;
/** A stage's `limits.maxOutputBytes` default: its output is kept whole as a ledger blob, so it is bounded. */
export const STAGE_MAX_OUTPUT_BYTES = 16 * 1024 * 1024;
/** `maxAttempts` may not exceed this: an item that failed 100 times will not succeed on the 101st. */
export const MAX_ATTEMPTS_CAP = 100;
/** `defaults.maxAttempts`: a transient failure gets two retries; a deterministic one fails fast. */
export const DEFAULT_MAX_ATTEMPTS = 3;
/** `defaults.timeout`: one attempt of a stage; most are seconds, a minute is a hung one unless the manifest says otherwise. */
export const STAGE_TIMEOUT_MS = 60_000;
/** `defaults.backoff`: the first retry's wait, doubled per attempt (ledger's cap 60 s): 1 s, 2 s, 4 s ride out a restart. */
export const STAGE_BACKOFF_MS = 1_000;
