/**
 * One attempt's command in a clone, driven through the agent so that the guest starts one process, the
 * command itself: the input goes in as a file (the agent's PUT, which makes the directory), the command runs
 * with its stdin on that file and its stdout in another, and the output comes back with the agent's GET
 * ($SMOL_OUTPUT if the command wrote it, else its stdout). A clone's TCG translation cache starts empty, so
 * every extra process (mktemp, cat, a subshell, the final cat) cost 40–60 ms there; the shell wrapper that
 * did this in the guest took ~310 ms per attempt for `true`, against ~90 ms for `true` alone.
 */
import crypto from 'node:crypto';
import { Writable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { NotFoundError } from '../errors/index.js';
import { execOnChannel, type ExecIo, type ExecRequest, type ExecResult, type GuestChannel } from '../vm/api/exec.js';

/** The guest's shell applies the stage's limits to itself and becomes the command (no fork, no subshell). */
const RUN = 'eval "$SMOL_LIMITS" && exec "$@" < "$SMOL_INPUT" > stdout';

const discard = () => new Writable({ write(_c, _e, cb) { cb(); } });

/**
 * Runs `command` in a fresh directory in the guest with `io.stdin` as $SMOL_INPUT; the output goes to
 * `io.stdout`, the command's stderr to `io.stderr`, and its exit status is the result's.
 */
export async function runStageOnChannel(ch: GuestChannel, command: string[], env: Record<string, string>, io: ExecIo & { stdin: NodeJS.ReadableStream }): Promise<ExecResult> {
  const dir = `/tmp/smol-stage.${crypto.randomBytes(4).toString('hex')}`;
  await ch.putFile(io.stdin, `${dir}/input`, 0o644);
  const req: ExecRequest = {
    argv: ['/bin/sh', '-c', RUN, 'smol-stage', ...command],
    env: { ...env, SMOL_INPUT: `${dir}/input`, SMOL_OUTPUT: `${dir}/output` },
    cwd: dir,
  };
  const res = await execOnChannel(ch, req, { stdin: null, stdout: discard(), stderr: io.stderr, onStart: io.onStart, signal: io.signal });
  const out = await ch.getFile(`${dir}/output`).catch((err: unknown) => {
    if (err instanceof NotFoundError) return ch.getFile(`${dir}/stdout`);
    throw err;
  });
  await pipeline(out.stream, io.stdout);
  return res;
}
