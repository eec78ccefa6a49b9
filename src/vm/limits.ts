/**
 * How long vm waits, and how much it takes, in one place (issue #32.5): each value with the reason it has that
 * value. A timeout here is a bound that only a stuck guest, QEMU or helper reaches, so most are generous; the
 * few a user may change keep their flag or environment variable, read where noted. Poll intervals stay beside
 * their loops: they say how often, not how long.
 */

// Booting, restoring and reaching a machine

/** A cold boot under TCG takes seconds; a minute means the guest is stuck (--boot-timeout, SMOL_BOOT_TIMEOUT_MS). */
export const BOOT_TIMEOUT_MS = 60_000;
/** The default of --boot-timeout: SMOL_BOOT_TIMEOUT_MS (milliseconds) when set, read once at load. */
export const DEFAULT_BOOT_TIMEOUT_MS = Number(process.env.SMOL_BOOT_TIMEOUT_MS ?? BOOT_TIMEOUT_MS);
/** Loading a saved state (boot snapshot, artifact, fork point) is local and quick; one that takes 30 s never will, and a run then boots cold. */
export const RESTORE_TIMEOUT_MS = 30_000;
/** One HELLO attempt while a guest boots: short, so the boot deadline, not a single try, decides. */
export const BOOT_CONNECT_ATTEMPT_MS = 5_000;
/** The agent answers HELLO within milliseconds of a connect; 10 s is a wedged agent or a full serial port. */
export const AGENT_HELLO_TIMEOUT_MS = 10_000;
/** HELLO is resent after 25, 50, 100 … ms, then at this interval: a swallowed HELLO costs at most a second. */
export const AGENT_HELLO_RETRY_CAP_MS = 1_000;
/** Waiting for one of a machine's agent ports to come free: sessions are short, 30 s of all ports busy is a queue. */
export const CHANNEL_WAIT_MS = 30_000;
/** A `smol run` waits this long for a concurrent `machine stop`/`rm` to let go of its machine's lock (its grace and QMP quit fit). */
export const RUN_SETTLE_MS = 30_000;

// Stopping

/** `machine stop` without --timeout: a clean poweroff takes a second or two; 10 s is a guest ignoring it. */
export const STOP_GRACE_MS = 10_000;
/** Reaching port 0's agent to ask for a poweroff: a guest that cannot answer in 2 s is quit over QMP instead. */
export const SHUTDOWN_CONNECT_MS = 2_000;
/** After the poweroff grace, QMP `quit` gets this long before QEMU is signalled: QEMU flushes its disks and exits at once. */
export const QEMU_QUIT_AFTER_GRACE_MS = 2_000;
/** QMP `quit` on its own (no poweroff first): connect, reply and exit of a QEMU that is not stuck. */
export const QEMU_QUIT_TIMEOUT_MS = 5_000;
/** Within a quit, reaching QMP: a QEMU whose QMP does not answer in 2 s is signalled instead. */
export const QEMU_QUIT_CONNECT_MS = 2_000;
/** QEMU's SIGTERM → SIGKILL: QEMU shuts down on SIGTERM once its block layer is flushed, which a local disk does within 2 s. */
export const QEMU_TERM_GRACE_MS = 2_000;
/** SIGTERM → SIGKILL for a QEMU that already ignored QMP `quit`: it gets one more second, not another full grace. */
export const QEMU_TERM_GRACE_AFTER_QUIT_MS = 1_000;
/** After SIGKILL a QEMU is gone once the kernel has freed its guest RAM: a bound on that wait, not a grace. */
export const KILLED_EXIT_MS = 5_000;
/**
 * A guest command's SIGTERM → SIGKILL, for `--timeout` and for a SIGTERM smol forwards: 3 s, as docs/exit-codes.md
 * (143) promises, long enough for a shell trap or a flush, short enough that a stuck command still ends promptly.
 */
export const KILL_GRACE_MS = 3_000;
/** After an abort (Ctrl-C, SIGTERM, a reader gone), cleanup such as removing a throwaway machine gets this long before smol exits anyway. */
export const ABORT_CLEANUP_MS = 10_000;

// QEMU and QMP

/** `qemu-system -daemonize` returns once the machine is set up (sub-second); a minute is a hung launch. */
export const QEMU_LAUNCH_MS = 60_000;
/** QEMU makes its QMP socket as it starts and answers at once; 5 s is a QEMU that never got there. */
export const QMP_CONNECT_MS = 5_000;
/** The greeting gets at least this long even when the connect deadline is nearly spent: QEMU sends it at once. */
export const QMP_GREETING_MIN_MS = 500;
/** One QMP command or awaited event: QEMU answers in milliseconds unless the command itself is long. */
export const QMP_COMMAND_MS = 30_000;
/** `qemu --version` and the like: a binary that says nothing for 10 s is broken. */
export const QEMU_PROBE_MS = 10_000;
/** A healthy KVM prints the guest kernel's banner in well under a second; 4 s means it is broken (qemu/kvm-probe.ts). */
export const KVM_PROBE_TIMEOUT_MS = 4_000;
/** After QEMU exits, its console keeper gets this long to write the last bytes, so a panic is in the tail. */
export const CONSOLE_SETTLE_MS = 1_000;
/** Per console log file (SMOL_CONSOLE_MAX_BYTES): console.log and console.log.1 together hold at most twice this. */
export const DEFAULT_CONSOLE_MAX_BYTES = 8 << 20;
/** The least SMOL_CONSOLE_MAX_BYTES accepts: a smaller file would not hold the few lines a boot failure shows. */
export const MIN_CONSOLE_MAX_BYTES = 1024;
/** The machine database's SQLite busy_timeout: lock holders are short transactions, 5 s is a stuck process. */
export const MACHINE_DB_BUSY_MS = 5_000;

// Forks and fork points

/** `fork --wait-ready` (--ready-timeout): a workload may warm up for minutes before it parks in smol-fork-ready. */
export const FORK_READY_TIMEOUT_MS = 300_000;
/** A fork's short guest scripts (installing smol-fork-ready, releasing waiters): each runs in milliseconds. */
export const FORK_GUEST_SCRIPT_MS = 10_000;
/** Writing a paused parent's device state to a local file: a few MiB, under a second; a minute is a stuck save. */
export const FORK_SAVE_STATE_MS = 60_000;
/** Cancelling the save a dead fork left running: QEMU stops it at once. */
export const FORK_CANCEL_SAVE_MS = 10_000;
/** Merging a clone's disk layers (block-commit) copies up to the whole disk: 10 minutes is a stuck job, not a big one. */
export const LAYER_MERGE_MS = 600_000;
/** A fork directory with no owner yet is a fork in its first microseconds, unless it is this old. */
export const FORK_UNOWNED_GRACE_MS = 60_000;
/** SMOL_FORK_MAX_DEPTH's default: QEMU walks every layer of a disk chain on a read miss, so past 16 layers merge (fork/chain.ts). */
export const DEFAULT_MAX_CHAIN_DEPTH = 16;

// Volumes and network

/** virtiofsd makes its socket as soon as it is set up; 10 s is one that hangs before listening. */
export const VIRTIOFSD_START_MS = 10_000;
/** A SIGKILLed virtiofsd is gone almost at once (its writes were synchronous, nothing is lost); a bound on that wait. */
export const VIRTIOFSD_STOP_MS = 2_000;
/** 2,000 PCI rescans 10 ms apart (20 s or more) before a volume mount after restore fails: only a stuck device reaches it. */
export const VOLUME_MOUNT_ATTEMPTS = 2_000;
/** A published port's forwarder listens within milliseconds; 5 s means it could not (the port is taken). */
export const FORWARDER_LISTEN_MS = 5_000;

// Boot snapshots, caches and prune

/** One prewarm exec after a snapshot capture: `true` runs in milliseconds, and a missing shell must not stall the run. */
export const PREWARM_EXEC_MS = 5_000;
/** A boot snapshot looked up this recently is about to be marked in use by its restore: prune leaves it. */
export const SNAPSHOT_LOOKUP_GRACE_MS = 60_000;
/** A capture's temp dir younger than this may still be filling (a capture takes well under a minute). */
export const SNAPSHOT_CAPTURE_STALE_MS = 10 * 60_000;
/** An extracted artifact looked up this recently may be about to back a machine being created: prune leaves it. */
export const ARTIFACT_LOOKUP_GRACE_MS = 60_000;
/** A worker's pulled artifact or cached blob used within this long stays through `smol prune` (a stage may be
 *  about to open it; both refill on demand, so a long grace costs only disk). */
export const WORKER_CACHE_GRACE_MS = 60 * 60_000;
/** A machine directory with no row that is this young may be a machine or spare being made right now. */
export const UNREGISTERED_DIR_GRACE_MS = 60_000;
/** A `.tmp-*` build directory (kernel, image) this old belongs to a killed build, not one in progress. */
export const STALE_TEMP_MS = 30 * 60_000;

// Host tools

/** `smol doctor` warns below this much free space in the data dir: an image, its ext4 disk and a machine's overlay need a few GiB. */
export const DATA_DIR_MIN_FREE_BYTES = 2 * 1024 ** 3;
/** apt-get update/download of the kernel package: a slow mirror takes minutes, five is a dead one. */
export const APT_TIMEOUT_MS = 300_000;
/** Reading the host's TSC rate from dmesg or journalctl: both answer in well under a second. */
export const TSC_PROBE_MS = 5_000;

// Copies out of a guest and images

/** `cp --max-size`: generous, a copy is a deliberate act; the cap only stops a guest filling the host disk unasked. */
export const CP_MAX_BYTES = 10 * 1024 ** 3;
/** `cp --idle-timeout`: a live guest sends something every few milliseconds; a minute of silence is a stall (or a FIFO). */
export const CP_IDLE_MS = 60_000;
/** Of a guest's stderr during a copy, the last 4 KiB: enough for its error, and a guest cannot make smol hold more. */
export const CP_STDERR_TAIL_BYTES = 4096;
/** Entries one copy out of a guest may create: a tar of empty files costs the guest 512 bytes each and the host an inode. */
export const CP_MAX_ENTRIES = 1_000_000;
/** Tar meta entries (long names, pax headers) are held in memory: node-tar's own 1 MiB bound, kept explicit. */
export const CP_TAR_META_MAX_BYTES = 1024 * 1024;
/** SMOL_IMAGE_MAX_GIB's default: file content one image may unpack to; a layer of a few MB can declare terabytes. */
export const IMAGE_MAX_GIB = 64;
/** SMOL_IMAGE_MAX_FILES's default: entries one image may unpack; a small layer can declare millions of empty files. */
export const IMAGE_MAX_FILES = 2_000_000;
