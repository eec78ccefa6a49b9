/**
 * Hosts simulated by network namespaces: each host is a namespace with one interface on a private /24,
 * plugged into a bridge that lives in a namespace of its own (the "switch"), so nothing touches the root
 * namespace's interfaces, routes or firewall, and cutting a host off (`cut`) is `ip link set … down` on its
 * switch port: the host keeps its address and its open sockets, and its packets go nowhere, as when a
 * cloud host's network splits. Needs root and iproute2 (CI and the dev machines run as root).
 */
import { execFileSync, spawn, spawnSync } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { findPgBin } from './postgres.js';

export interface Host { name: string; ns: string; addr: string; port: string; exec: string[] }
export interface Lan { hosts: Record<string, Host>; cut(name: string): void; mend(name: string): void; destroy(): void }

const ip = (...args: string[]) => execFileSync('ip', args, { stdio: 'pipe' });

/** Why namespaces cannot be made here, or null when they can. */
export function netnsUnavailableReason(): string | null {
  if (process.getuid?.() !== 0) return 'network namespaces need root';
  if (spawnSync('sh', ['-c', 'command -v ip']).status !== 0) return 'iproute2 (ip) not installed';
  return null;
}

/** Hosts `names` on 10.231.X.0/24 (X random per LAN, so two test files never collide), host i at .(i+1). */
export function makeLan(names: string[]): Lan {
  const tag = crypto.randomBytes(3).toString('hex');
  const subnet = `10.231.${crypto.randomInt(256)}`;
  const sw = `smsw-${tag}`;
  const made: string[] = [];
  const hosts: Record<string, Host> = {};
  const destroy = () => {
    for (const ns of made.reverse()) spawnSync('ip', ['netns', 'del', ns]);
    made.length = 0;
  };
  try {
    ip('netns', 'add', sw);
    made.push(sw);
    ip('-n', sw, 'link', 'add', 'br0', 'type', 'bridge');
    ip('-n', sw, 'link', 'set', 'br0', 'up');
    names.forEach((name, i) => {
      const ns = `smh-${tag}-${i}`;
      const port = `p${i}`;
      ip('netns', 'add', ns);
      made.push(ns);
      ip('-n', ns, 'link', 'add', 'eth0', 'type', 'veth', 'peer', 'name', port, 'netns', sw);
      ip('-n', sw, 'link', 'set', port, 'master', 'br0', 'up');
      ip('-n', ns, 'addr', 'add', `${subnet}.${i + 1}/24`, 'dev', 'eth0');
      ip('-n', ns, 'link', 'set', 'eth0', 'up');
      ip('-n', ns, 'link', 'set', 'lo', 'up');
      hosts[name] = { name, ns, addr: `${subnet}.${i + 1}`, port, exec: ['ip', 'netns', 'exec', ns] };
    });
  } catch (err) {
    destroy();
    throw err;
  }
  process.once('exit', destroy);
  return {
    hosts,
    cut: (name) => { ip('-n', sw, 'link', 'set', hosts[name].port, 'down'); },
    mend: (name) => { ip('-n', sw, 'link', 'set', hosts[name].port, 'up'); },
    destroy,
  };
}

export interface NsPg {
  /** The URL other hosts use: TCP to the host's address. */
  url: string;
  /** The same database over its Unix socket, for the test process itself (sockets are files, not in any netns). */
  socketUrl: string;
  /** `pg_ctl restart -m fast`: every connection is closed, the server is down for a moment, then back. */
  restart(): void;
  stop(): void;
}

/**
 * A throwaway PostgreSQL (as test/helpers/postgres.ts) started inside `host`'s namespace, listening on its
 * address: the GPU host's database, reached by the other hosts across the switch.
 */
export function startPostgresIn(host: Host): NsPg {
  const bin = findPgBin();
  if (!bin) throw new Error('PostgreSQL not installed');
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'smol-nspg-'));
  const uid = Number(execFileSync('id', ['-u', 'postgres']).toString());
  const gid = Number(execFileSync('id', ['-g', 'postgres']).toString());
  fs.chmodSync(dir, 0o700);
  fs.chownSync(dir, uid, gid);
  const data = path.join(dir, 'data');
  const pgCtl = (...args: string[]) => execFileSync('ip', ['netns', 'exec', host.ns, 'runuser', '-u', 'postgres', '--', path.join(bin, 'pg_ctl'), '-D', data, ...args], { stdio: 'pipe' });
  execFileSync('runuser', ['-u', 'postgres', '--', path.join(bin, 'initdb'), '-D', data, '-A', 'trust', '-U', 'smol', '--no-sync', '-E', 'UTF8'], { stdio: 'pipe' });
  // trust from the LAN too: the test's hosts are the only ones on it
  fs.appendFileSync(path.join(data, 'pg_hba.conf'), `host all all ${host.addr.replace(/\.\d+$/, '.0')}/24 trust\n`);
  pgCtl('-l', path.join(dir, 'log'), '-w', '-t', '30', 'start', '-o', `-p 5432 -h ${host.addr} -k ${dir} -F -c max_connections=100`);
  let stopped = false;
  const stop = () => {
    if (stopped) return;
    stopped = true;
    try { pgCtl('-m', 'immediate', '-w', 'stop'); } catch { /* already gone */ }
    fs.rmSync(dir, { recursive: true, force: true });
  };
  process.once('exit', stop);
  return {
    url: `postgres://smol@${host.addr}:5432/postgres`,
    socketUrl: `postgres://smol@/postgres?host=${encodeURIComponent(dir)}&port=5432`,
    restart: () => { pgCtl('-l', path.join(dir, 'log'), '-m', 'fast', '-w', '-t', '30', 'restart'); },
    stop,
  };
}

export interface NsRegistry { host: string; stop(): void }

/**
 * Debian's docker-registry (as test/helpers/registry.ts) inside `host`'s namespace on its address, port 5000:
 * the registry the other hosts pull from across the switch. Plain HTTP, so its clients list `host` in
 * SMOL_INSECURE_REGISTRIES. Ready once it logs that it listens (the test process cannot connect into the namespace).
 */
export async function startRegistryIn(host: Host): Promise<NsRegistry> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'smol-nsreg-'));
  const addr = `${host.addr}:5000`;
  fs.writeFileSync(path.join(dir, 'config.yml'), ['version: 0.1', 'log:', '  level: info', 'storage:', '  filesystem:', `    rootdirectory: ${path.join(dir, 'data')}`,
    'http:', `  addr: ${addr}`, ''].join('\n'));
  const child = spawn('ip', ['netns', 'exec', host.ns, '/usr/bin/docker-registry', 'serve', path.join(dir, 'config.yml')], { stdio: ['ignore', 'ignore', 'pipe'] });
  let stopped = false;
  const stop = () => {
    if (stopped) return;
    stopped = true;
    child.kill('SIGKILL');
    fs.rmSync(dir, { recursive: true, force: true });
  };
  process.once('exit', stop);
  let log = '';
  let ready = false;
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => { stop(); reject(new Error(`docker-registry did not start on ${addr}: ${log.slice(-500)}`)); }, 15_000);
    child.stderr!.on('data', (d: Buffer) => {
      if (ready) return; // its access log after that is not kept
      log += d.toString();
      if (log.includes(`listening on ${addr}`)) { ready = true; clearTimeout(timer); resolve(); }
    });
    child.once('exit', (code) => { clearTimeout(timer); if (!ready) reject(new Error(`docker-registry exited ${code}: ${log.slice(-500)}`)); });
  });
  return { host: addr, stop };
}
