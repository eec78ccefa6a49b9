/**
 * vm's timeouts and limits that the CLI shows or shares (vm/limits.ts says why each has its value): a flag's
 * default in its help, the guest command's kill grace, the bound on cleanup after an abort.
 */

/** The defaults of --boot-timeout (before SMOL_BOOT_TIMEOUT_MS), `machine stop --timeout` and `fork --ready-timeout`. */
export { BOOT_TIMEOUT_MS, STOP_GRACE_MS, FORK_READY_TIMEOUT_MS } from '../limits.js';
/** A guest command's SIGTERM → SIGKILL (also a forwarded SIGTERM's), and how long cleanup may take after an abort. */
export { KILL_GRACE_MS, ABORT_CLEANUP_MS } from '../limits.js';
/** `smol machine cp` out of a guest: the defaults of --max-size and --idle-timeout. */
export { CP_MAX_BYTES, CP_IDLE_MS } from '../limits.js';
