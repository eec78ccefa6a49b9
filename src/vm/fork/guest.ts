/**
 * The guest side of the fork-point handshake, driven entirely through the agent. `smol-fork-ready` (a POSIX
 * sh script installed at forkable start) parks on a FIFO; the host writes the role's environment file, then
 * opens each parked FIFO, in the parent and in every clone separately after the fork.
 */
import { Readable } from 'node:stream';
import { TimeoutError } from '../../errors/index.js';
import type { GuestChannel } from '../engine.js';
import { FORK_GUEST_SCRIPT_MS } from '../limits.js';

/** On the PATH that /init gives every guest process (/usr/local/bin is not on it). */
export const FORK_READY_PATH = '/usr/bin/smol-fork-ready';
export const FORK_DIR = '/run/smol/fork';
/** The role's environment, as `export K='v'` lines; clones also get it in every `smol machine exec`. */
export const FORK_ENV_FILE = '/run/smol/fork.env';

export const FORK_READY_SCRIPT = `#!/bin/sh
# smol-fork-ready: marks the fork point for \`smol fork --wait-ready\` (installed by smol; docs/fork.md).
# Blocks until the host releases it, then prints the role's environment as shell assignments:
#   eval "$(smol-fork-ready)"; echo "$SMOL_FORK_ROLE $SMOL_CLONE_INDEX"
d=${FORK_DIR}
mkdir -p "$d" || exit 1
f="$d/wait.$$"
rm -f "$f"
mkfifo "$f" || exit 1
trap 'rm -f "$f"' EXIT
trap 'exit 130' INT TERM
read -r _ < "$f"
cat ${FORK_ENV_FILE} 2>/dev/null
exit 0
`;

/** Host side of a release: write the env file, then wake every live waiter (a dead one's FIFO is skipped). */
const RELEASE_SCRIPT = `mkdir -p ${FORK_DIR} && cat > ${FORK_ENV_FILE}.tmp && mv ${FORK_ENV_FILE}.tmp ${FORK_ENV_FILE} || exit 1
n=0
for f in ${FORK_DIR}/wait.*; do
  [ -p "$f" ] || continue
  if kill -0 "\${f##*.}" 2>/dev/null; then echo go > "$f" && n=$((n+1)); else rm -f "$f"; fi
done
echo "$n"`;

const WAIT_SCRIPT = `i=0
while :; do
  for f in ${FORK_DIR}/wait.*; do [ -p "$f" ] && kill -0 "\${f##*.}" 2>/dev/null && exit 0; done
  sleep 0.1
done`;

/** Shell-quoted `export` lines: what smol-fork-ready prints and clones source. */
export function envFileText(env: Record<string, string>): string {
  return Object.entries(env).map(([k, v]) => `export ${k}='${v.replace(/'/g, `'\\''`)}'\n`).join('');
}

async function run(ch: GuestChannel, script: string, input: string | null, timeoutMs: number): Promise<{ code: number | null; out: string; err: string }> {
  const h = await ch.exec({ argv: ['/bin/sh', '-c', script] });
  if (input === null) h.stdin.end();
  else Readable.from([Buffer.from(input)]).pipe(h.stdin as NodeJS.WritableStream);
  let out = '';
  let err = '';
  h.stdout.on('data', (d: Buffer) => { out += d.toString(); });
  h.stderr.on('data', (d: Buffer) => { err += d.toString(); });
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => {
      h.signal('SIGKILL');
      reject(new TimeoutError(`guest command timed out after ${Math.round(timeoutMs / 1000)}s`));
    }, timeoutMs);
  });
  try {
    const r = await Promise.race([h.exit, timeout]);
    return { code: r.code, out, err };
  } finally {
    clearTimeout(timer);
  }
}

export async function installForkHelper(ch: GuestChannel): Promise<void> {
  const r = await run(ch, `mkdir -p ${FORK_READY_PATH.replace(/\/[^/]+$/, '')} && cat > ${FORK_READY_PATH}.tmp && chmod 755 ${FORK_READY_PATH}.tmp && mv ${FORK_READY_PATH}.tmp ${FORK_READY_PATH}`, FORK_READY_SCRIPT, FORK_GUEST_SCRIPT_MS);
  if (r.code !== 0) throw new Error(`installing ${FORK_READY_PATH} failed: ${r.err.trim()}`);
}

/** Resolves once a workload in the guest is parked in smol-fork-ready. */
export async function waitForReady(ch: GuestChannel, timeoutMs: number): Promise<void> {
  try {
    await run(ch, WAIT_SCRIPT, null, timeoutMs);
  } catch (err) {
    if (err instanceof TimeoutError) {
      throw new TimeoutError(`no workload called smol-fork-ready within ${Math.round(timeoutMs / 1000)}s`, { hint: 'Run `smol-fork-ready` in the machine at the fork point, or fork without --wait-ready.' });
    }
    throw err;
  }
}

export interface GuestIdentity { hostname: string; machineId: string; entropy: Buffer; timeMs: number }

/**
 * A clone's identity and its fork-point release in one CONFIGURE round trip, done by the agent itself: a
 * shell started in a clone whose translation cache is still empty costs ~100 ms under TCG. An agent older
 * than the release key applies the identity, refuses the key, and the waiters get the shell release.
 * A parent keeps its identity (id null): the native release only spares the CPU its clones are starting on.
 */
export async function identifyAndRelease(ch: GuestChannel, id: GuestIdentity | null, env: Record<string, string>, timeoutMs = FORK_GUEST_SCRIPT_MS): Promise<number> {
  try {
    const r = await ch.configure({ ...(id ?? {}), forkRelease: { dir: FORK_DIR, envFile: FORK_ENV_FILE, text: envFileText(env) } });
    if (r.released !== null) return r.released;
  } catch (err) {
    if (!/not supported/i.test((err as Error).message)) throw err;
  }
  return releaseWaiters(ch, env, timeoutMs);
}

/** Writes the env file and wakes the waiters with a shell in the guest; returns how many were woken. */
export async function releaseWaiters(ch: GuestChannel, env: Record<string, string>, timeoutMs = FORK_GUEST_SCRIPT_MS): Promise<number> {
  const r = await run(ch, RELEASE_SCRIPT, envFileText(env), timeoutMs);
  if (r.code !== 0) throw new Error(`releasing the fork point failed: ${r.err.trim() || `exit ${r.code}`}`);
  return Number(r.out.trim()) || 0;
}
