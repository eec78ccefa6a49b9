/**
 * `smol run -d`: the throwaway machine's command runs under a supervisor process (a hidden `smol run
 * --supervise ID`) that outlives the CLI. The CLI creates the machine (so bad input fails before anything
 * runs), hands ownership to the supervisor, waits until the command has started, prints the name and returns.
 *
 * Files in the machine's directory: detached.json (the run's state, shown by `machine status`), output.log
 * (the command's stdout and stderr, shown by `machine logs`), supervisor.log (the supervisor's own errors).
 * With `rm` (the default) the machine and these files go when the command exits; without it the machine
 * stays stopped with its exit code until `smol machine rm`.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { ExitCode, InterruptedError, SmolError, type ExitCodeValue } from '../errors/index.js';
import type { Smolfile } from '../smolfile/schema.js';
import { spawnDaemon } from '../util/exec.js';
import type { ExecRequest } from './engine.js';
import { consoleMaxBytes } from './qemu/console-keeper.js';
import { exitCodeOf } from './exec.js';
import { checkPortsFree } from './net/ports.js';
import { pidAlive, type MachineRecord } from './store/machines.js';
import { RotatingLog } from './rotating-log.js';
import { runCreated } from './run.js';
import type { MachineService } from './service.js';
import { files, updateDetached, writeJson, type DetachedState } from './detach-state.js';

export interface DetachedRequest {
  req: ExecRequest;
  rm: boolean;
  timeoutMs?: number;
  bootTimeoutMs?: number;
  coldBoot?: boolean;
}

interface Report { ok: boolean; error?: { message: string; exitCode: number; where?: string; hint?: string } }

/**
 * Create the machine, start its supervisor and wait until the command runs. A failure before that (a boot
 * that fails, a port taken) removes the machine and throws the supervisor's error as it was.
 */
export async function startDetached(svc: MachineService, spec: Smolfile, r: DetachedRequest, o: { name?: string; supervisorArgv: (id: string, report: string) => string[]; signal?: AbortSignal }): Promise<MachineRecord> {
  await checkPortsFree(spec.ports ?? [], o.name);
  const rec = await svc.create(spec, { ephemeral: true, name: o.name });
  const f = files(svc.layout(rec).dir);
  // the report lives outside the machine directory: a failed supervisor removes that directory
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'smol-detach-'));
  const report = path.join(tmp, 'report.json');
  let pid: number | null = null;
  try {
    writeJson(f.request, r);
    writeJson(f.state, { command: r.req.argv, rm: r.rm, supervisorPid: null, state: 'booting', exitCode: null, error: null, startedAt: new Date().toISOString(), endedAt: null } satisfies DetachedState);
    const [file, ...args] = o.supervisorArgv(rec.id, report);
    pid = spawnDaemon(file, args, { outFile: f.supervisorLog });
    svc.store.update(rec.id, { ownerPid: pid });
    updateDetached(f.state, { supervisorPid: pid });
    for (;;) {
      if (fs.existsSync(report)) {
        const rep = JSON.parse(fs.readFileSync(report, 'utf8')) as Report;
        if (rep.ok) return svc.store.find(rec.id) ?? rec;
        const e = rep.error!;
        throw new SmolError(e.message, e.exitCode as ExitCodeValue, { where: e.where, hint: e.hint });
      }
      if (!pidAlive(pid)) {
        if (fs.existsSync(report)) continue; // it reported just before it exited
        const tail = fs.existsSync(f.supervisorLog) ? fs.readFileSync(f.supervisorLog, 'utf8').trim().split('\n').slice(-10).join('\n') : '';
        throw new SmolError(`run failed: the supervisor of machine "${rec.name}" exited before its command started`, ExitCode.internal, { where: rec.name, hint: tail || undefined });
      }
      if (o.signal?.aborted) {
        process.kill(pid, 'SIGTERM'); // it kills and removes its machine
        while (pidAlive(pid)) await new Promise((res) => setTimeout(res, 50));
        throw o.signal.reason instanceof InterruptedError ? o.signal.reason : new InterruptedError('interrupted');
      }
      await new Promise((res) => setTimeout(res, 50));
    }
  } catch (err) {
    // whatever the supervisor left (it removes its machine itself unless it died first)
    if (pid && pidAlive(pid)) try { process.kill(pid, 'SIGKILL'); } catch { /* gone */ }
    await svc.remove(rec.id, { force: true }).catch(() => undefined);
    throw err;
  } finally {
    fs.rmSync(tmp, { recursive: true, force: true });
  }
}

/** The supervisor's body: boot, run the command into output.log, record how it ended, remove or stop the machine. */
export async function superviseDetached(svc: MachineService, id: string, reportFile: string): Promise<void> {
  const rec = svc.store.get(id);
  const f = files(svc.layout(rec).dir);
  const r = JSON.parse(fs.readFileSync(f.request, 'utf8')) as DetachedRequest;
  const ctl = new AbortController();
  // `kill` of the supervisor (or the CLI's Ctrl-C while booting) ends the run like a Ctrl-C of `smol run`
  const stop = (code: 130 | 143) => ctl.abort(new InterruptedError(code === 130 ? 'interrupted' : 'terminated', code));
  process.on('SIGTERM', () => stop(143));
  process.on('SIGINT', () => stop(130));
  // the guest command decides how much it prints: the host keeps at most twice the console's cap of it
  const out = new RotatingLog(f.output, consoleMaxBytes());
  let reported = false;
  const report = (rep: Report) => {
    if (reported) return;
    reported = true;
    writeJson(reportFile, rep);
  };
  try {
    const res = await runCreated(svc, rec, r.req, {
      stdin: null, stdout: out, stderr: out, timeoutMs: r.timeoutMs, signal: ctl.signal,
      onStart: () => { updateDetached(f.state, { state: 'running' }); report({ ok: true }); },
    }, { bootTimeoutMs: r.bootTimeoutMs, coldBoot: r.coldBoot, signal: ctl.signal, keep: !r.rm });
    updateDetached(f.state, { state: 'exited', exitCode: exitCodeOf(res), endedAt: new Date().toISOString() });
  } catch (err) {
    const e = err instanceof SmolError ? err : new SmolError((err as Error).message ?? String(err), ExitCode.internal);
    report({ ok: false, error: { message: e.message, exitCode: e.exitCode, where: e.where, hint: e.hint } });
    updateDetached(f.state, { state: 'exited', error: e.message, endedAt: new Date().toISOString() });
    if (!(err instanceof SmolError)) process.stderr.write(`${(err as Error).stack ?? String(err)}\n`);
  } finally {
    out.end();
  }
}
