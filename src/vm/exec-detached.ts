/**
 * `smol machine exec -d`: start a process in the guest that outlives the exec session and return its pid.
 * The guest's own shell starts it in the background (as `cmd &` in a script: stdin /dev/null, SIGINT and
 * SIGQUIT ignored), its stdout and stderr go to /run/smol/exec/PID.log in the guest.
 */
import { Writable } from 'node:stream';
import { ExitCode, NotFoundError, SmolError } from '../errors/index.js';
import type { ExecRequest } from './engine.js';
import { execInMachine } from './exec.js';
import type { MachineService } from './service.js';
import type { SecretDecl } from '../smolfile/secrets.js';

export const DETACHED_LOG_DIR = '/run/smol/exec';

// the temp name becomes PID.log once $! is known. The shell opens it before forking: a child that opened
// it by name itself could do so after the rename, and write to a new file nobody reads
const SCRIPT = `d=${DETACHED_LOG_DIR}; mkdir -p "$d" && t=$(mktemp "$d/.start.XXXXXX") || exit 70
command -v "$1" >/dev/null 2>&1 || { rm -f "$t"; echo "$1: command not found in the guest" >&2; exit 127; }
exec 3>"$t"
"$@" </dev/null >&3 2>&3 3>&- & p=$!
exec 3>&-
mv "$t" "$d/$p.log" && echo "$p"`;

export interface DetachedExec { pid: number; log: string }

/** `secrets` as for execInMachine: the process's environment gets them, the guest's /run/secrets the files. */
export async function execDetached(svc: MachineService, name: string, req: Omit<ExecRequest, 'tty' | 'rows' | 'cols'>, o: { secrets?: SecretDecl } = {}): Promise<DetachedExec> {
  const chunks: Buffer[] = [];
  const errs: Buffer[] = [];
  const sink = (into: Buffer[]) => new Writable({ write(c: Buffer, _e, cb) { into.push(c); cb(); } });
  const res = await execInMachine(svc, name, { ...req, argv: ['/bin/sh', '-c', SCRIPT, 'smol-exec', ...req.argv] }, { stdin: null, stdout: sink(chunks), stderr: sink(errs) }, o);
  const err = Buffer.concat(errs).toString().trim();
  if (res.code === 127) throw new NotFoundError(`exec failed: ${req.argv[0]}: command not found in machine "${name}"`, { where: name, hint: 'Give the full path, or check PATH in the guest (-e PATH=…).' });
  const pid = Number(Buffer.concat(chunks).toString().trim());
  if (res.code !== 0 || !Number.isInteger(pid) || pid <= 0) {
    throw new SmolError(`exec failed: could not start ${req.argv[0]} in the background in machine "${name}"${err ? `: ${err}` : ''}`, ExitCode.failure, { where: name, hint: 'The guest needs /bin/sh and mktemp (busybox or coreutils).' });
  }
  return { pid, log: `${DETACHED_LOG_DIR}/${pid}.log` };
}
