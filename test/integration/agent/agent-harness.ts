/** Starts the real smol-agent on the host with --listen unix:… in a temp dir and connects a client. */
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { AgentClient, type ConnectOptions } from '../../../src/vm/agent/index.js';
import { buildPaths } from '../../../src/util/paths.js';
import { runCommand } from './build-agent.js';

export interface RunningAgent {
  dir: string;
  socket: string;
  proc: ChildProcess;
  stderr: () => string;
  stop(): Promise<void>;
}

export async function buildAgent(): Promise<string> {
  await runCommand('make', ['-s', '-C', path.join(buildPaths.root, '..', 'shims', 'agent'), `OUT=${buildPaths.root}`]);
  return buildPaths.agent;
}

/** extraArgs may use $DIR for the agent's temp dir; wrap prefixes the command (e.g. ['unshare', '--uts']). */
export async function startAgent(extraArgs: string[] = [], wrap: string[] = []): Promise<RunningAgent> {
  const dir = mkdtempSync(path.join(tmpdir(), 'smol-agent-'));
  const socket = path.join(dir, 'agent.sock');
  const args = ['--listen', `unix:${socket}`, ...extraArgs.map((a) => a.replaceAll('$DIR', dir))];
  const argv = [...wrap, buildPaths.agent, ...args];
  const proc = spawn(argv[0], argv.slice(1), { stdio: ['ignore', 'ignore', 'pipe'] });
  let err = '';
  proc.stderr?.on('data', (c: Buffer) => (err += c.toString()));
  for (let i = 0; i < 200 && !existsSync(socket); i++) await sleep(10);
  if (!existsSync(socket)) throw new Error(`agent did not listen: ${err}`);
  return {
    dir,
    socket,
    proc,
    stderr: () => err,
    async stop() {
      if (proc.exitCode === null && proc.signalCode === null) {
        const gone = new Promise((r) => proc.once('exit', r));
        proc.kill('SIGKILL');
        await gone;
      }
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** Connects, retrying briefly: the socket file appears at bind(), a moment before listen(). */
export async function connect(agent: RunningAgent, opts: ConnectOptions = {}): Promise<AgentClient> {
  for (let i = 0; ; i++) {
    try {
      return await AgentClient.connectUnix(agent.socket, { timeoutMs: 5000, ...opts });
    } catch (err) {
      if (i >= 50 || !/ECONNREFUSED/.test(String((err as Error).message))) throw err;
      await sleep(20);
    }
  }
}
