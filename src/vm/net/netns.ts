/**
 * Egress machines (--net, --allow): each QEMU runs in its own network namespace, joined to the host by a veth
 * pair and NAT. QEMU's user-mode stack turns the guest's connections into sockets inside that namespace,
 * where the machine's nftables table (rules.ts) decides; the namespace has no route to the host's loopback,
 * and the host's table refuses new connections from any machine veth to the host or to another machine.
 * Alongside QEMU: dnsmasq (the guest's only resolver, answering allowed names), tcpdump on NFLOG (the denial
 * log), and socat forwarders for published ports (the host binds them; QEMU's hostfwd binds in the namespace)
 * and for `--allow host:PORT`. Everything is recorded in net.json so teardown finds it after a crash.
 */
import crypto from 'node:crypto';
import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { PrerequisiteError, SmolError } from '../../errors/index.js';
import type { AllowRule, PortMapping } from '../../smolfile/network.js';
import { run, spawnDaemon, which } from '../../util/exec.js';
import type { MachineLayout } from '../layout.js';
import { FORWARDER_LISTEN_MS } from '../limits.js';
import { enableForwarding, releaseForwarding } from './host-forwarding.js';
import { dnsmasqArgs, hostRuleset, HOST_IF_PREFIX, machineRuleset, NFLOG_GROUP, NS_IF_PREFIX } from './rules.js';

export interface NetState {
  ns: string;
  hostIf: string;
  hostAddr: string;
  nsAddr: string;
  /** Host-side helper processes (socat): not in the namespace, so `ip netns pids` does not find them. */
  hostPids: number[];
  createdAt: string;
}

export const netStateFile = (layout: Pick<MachineLayout, 'dir'>) => path.join(layout.dir, 'net.json');
export const denialLogFile = (layout: Pick<MachineLayout, 'dir'>) => path.join(layout.dir, 'net-denied.log');
export const dnsLogFile = (layout: Pick<MachineLayout, 'dir'>) => path.join(layout.dir, 'net-dns.log');

export interface EgressSpec { full: boolean; allow: readonly AllowRule[]; ports: readonly PortMapping[] }

/** Makes the namespace and its policy; QEMU is then launched inside it (`ip netns exec`). Undone on failure. */
export async function setupEgress(layout: MachineLayout, e: EgressSpec): Promise<NetState> {
  if (process.getuid?.() !== 0) {
    throw new PrerequisiteError('--net and --allow need root: each machine gets its own network namespace and nftables policy', {
      hint: 'Run smol as root (or with sudo). Published ports alone (-p) work without root.',
    });
  }
  for (const tool of ['ip', 'nft', 'dnsmasq', 'tcpdump', 'socat']) await requireTool(tool);
  const tag = crypto.createHash('sha256').update(layout.dir).digest('hex').slice(0, 8);
  const st: NetState = { ns: `smol-${tag}`, hostIf: `${HOST_IF_PREFIX}${tag}`, hostAddr: '', nsAddr: '', hostPids: [], createdAt: new Date().toISOString() };
  await teardownEgress(layout); // a machine killed with -9 before its teardown left these
  try {
    const addrs = await hostAddresses();
    const [hostAddr, nsAddr] = freeSubnet(addrs);
    Object.assign(st, { hostAddr, nsAddr });
    fs.writeFileSync(netStateFile(layout), JSON.stringify(st, null, 2));
    const nsIf = `${NS_IF_PREFIX}${tag}`;
    // two batches instead of eight ip runs: each start of a program costs tens of ms on a loaded host
    await run('ip', ['-batch', '-'], {
      input: [`netns add ${st.ns}`, `link add ${st.hostIf} type veth peer name ${nsIf} netns ${st.ns}`, `addr add ${hostAddr}/30 dev ${st.hostIf}`, `link set ${st.hostIf} up`].join('\n') + '\n',
    });
    await run('ip', ['-n', st.ns, '-batch', '-'], {
      input: [`addr add ${nsAddr}/30 dev ${nsIf}`, `link set ${nsIf} up`, 'link set lo up', `route add default via ${hostAddr}`].join('\n') + '\n',
    });
    // the namespace reaches the world through the host's routing; Docker and every VM manager do the same
    enableForwarding();
    await run('nft', ['-f', '-'], { input: `table inet smol\ndelete table inet smol\n${hostRuleset()}` });
    const upstream = dnsUpstream();
    await run('ip', ['netns', 'exec', st.ns, 'nft', '-f', '-'], {
      input: machineRuleset({ allow: e.allow, full: e.full, dnsUpstream: upstream, hostAddrs: [...addrs, hostAddr] }),
    });
    // QEMU's resolver (10.0.2.3) forwards to the first nameserver of the resolv.conf it sees: dnsmasq's
    const etc = path.join('/etc/netns', st.ns);
    fs.mkdirSync(etc, { recursive: true });
    fs.writeFileSync(path.join(etc, 'resolv.conf'), 'nameserver 127.0.0.1\n');
    for (const f of [denialLogFile(layout), dnsLogFile(layout)]) fs.closeSync(fs.openSync(f, 'a'));
    fs.chmodSync(dnsLogFile(layout), 0o666); // dnsmasq writes it after dropping to nobody
    await run('ip', ['netns', 'exec', st.ns, 'dnsmasq', ...dnsmasqArgs({ allow: e.allow, full: e.full, upstream, pidFile: path.join(layout.dir, 'dnsmasq.pid'), logFile: dnsLogFile(layout) })]);
    // -tttt: the date with the time; -q: one short line per packet; -l: each line as it comes
    await detached('ip', ['netns', 'exec', st.ns, 'tcpdump', '-i', `nflog:${NFLOG_GROUP}`, '-n', '-q', '-l', '-tttt'], denialLogFile(layout));
    for (const r of e.allow.filter((a) => a.kind === 'host')) await forwardHostPort(st, layout, r.port!);
    return st;
  } catch (err) {
    await teardownEgress(layout);
    throw err instanceof SmolError ? err : new SmolError(`network setup failed: ${(err as Error).message}`, undefined, { cause: err });
  }
}

/** Published ports of an egress machine: the host binds them (socat) and forwards to QEMU's hostfwd in the namespace. */
export async function publishPorts(layout: MachineLayout, st: NetState, ports: readonly PortMapping[]): Promise<void> {
  for (const p of ports) {
    const args = p.protocol === 'tcp'
      ? [`TCP4-LISTEN:${p.host},bind=${p.address},reuseaddr,fork`, `TCP4:${st.nsAddr}:${p.host}`]
      : [`UDP4-RECVFROM:${p.host},bind=${p.address},fork`, `UDP4-SENDTO:${st.nsAddr}:${p.host}`];
    const pid = await detached('socat', args);
    recordHostPid(layout, st, pid);
    if (p.protocol === 'tcp') await waitListening(p.address === '0.0.0.0' ? '127.0.0.1' : p.address, p.host, pid);
  }
}

/** `--allow host:PORT`: the guest's 10.0.2.2:PORT is the namespace's loopback, bridged to the host's over a unix socket. */
async function forwardHostPort(st: NetState, layout: MachineLayout, port: number): Promise<void> {
  fs.mkdirSync(layout.runDir, { recursive: true });
  const sock = path.join(layout.runDir, `host-${port}.sock`);
  recordHostPid(layout, st, await detached('socat', [`UNIX-LISTEN:${sock},fork,unlink-early`, `TCP4:127.0.0.1:${port}`]));
  await detached('ip', ['netns', 'exec', st.ns, 'socat', `TCP4-LISTEN:${port},bind=127.0.0.1,reuseaddr,fork`, `UNIX-CONNECT:${sock}`]);
}

function recordHostPid(layout: MachineLayout, st: NetState, pid: number): void {
  st.hostPids.push(pid);
  fs.writeFileSync(netStateFile(layout), JSON.stringify(st, null, 2));
}

export function readNetState(layout: Pick<MachineLayout, 'dir'>): NetState | null {
  try {
    return JSON.parse(fs.readFileSync(netStateFile(layout), 'utf8')) as NetState;
  } catch {
    return null;
  }
}

/**
 * Everything setupEgress made, idempotently: the namespace's processes, the namespace (its veth goes with it),
 * host forwarders; and after the host's last machine, the host table and forwarding as they were found.
 */
export async function teardownEgress(layout: Pick<MachineLayout, 'dir'>): Promise<void> {
  const st = readNetState(layout);
  if (!st) return;
  for (const pid of st.hostPids) {
    // only a socat that is still ours: a recycled pid is someone else's
    try {
      const cmd = fs.readFileSync(`/proc/${pid}/cmdline`, 'utf8');
      if (cmd.startsWith('socat') && (cmd.includes(st.nsAddr) || cmd.includes('/host-'))) process.kill(pid, 'SIGKILL');
    } catch { /* gone */ }
  }
  if (fs.existsSync(`/run/netns/${st.ns}`)) {
    const pids = (await run('ip', ['netns', 'pids', st.ns], { allowFailure: true })).stdout.split('\n').map(Number).filter((n) => n > 1);
    for (const pid of pids) try { process.kill(pid, 'SIGKILL'); } catch { /* gone */ }
    await run('ip', ['netns', 'del', st.ns], { allowFailure: true });
  }
  await run('ip', ['link', 'del', st.hostIf], { allowFailure: true });
  fs.rmSync(path.join('/etc/netns', st.ns), { recursive: true, force: true });
  if (releaseForwarding()) await run('nft', ['delete', 'table', 'inet', 'smol'], { allowFailure: true });
  fs.rmSync(netStateFile(layout), { force: true });
}

async function requireTool(tool: string): Promise<void> {
  if (!(await which(tool)) && !(await which(`/usr/sbin/${tool}`)) && !(await which(`/sbin/${tool}`))) {
    throw new PrerequisiteError(`${tool} not found: --net, --allow and UDP published ports need iproute2, nftables, dnsmasq, tcpdump and socat`, { hint: 'Run scripts/setup.sh as root (or: apt-get install iproute2 nftables dnsmasq-base tcpdump socat).' });
  }
}

/** A free /30 in 10.213.0.0/16, picked at random so concurrent starts rarely collide, checked against the host's addresses. */
function freeSubnet(hostAddrs: readonly string[]): [string, string] {
  const used = new Set(hostAddrs);
  for (let tries = 0; tries < 64; tries++) {
    const i = crypto.randomInt(1, 16384);
    const base = `10.213.${i >> 6}.${(i & 63) * 4}`;
    const [a, b, c] = base.split('.');
    const o = Number(base.split('.')[3]);
    const host = `${a}.${b}.${c}.${o + 1}`;
    if (!used.has(host)) return [host, `${a}.${b}.${c}.${o + 2}`];
  }
  throw new SmolError('network setup failed: no free /30 left in 10.213.0.0/16');
}

async function hostAddresses(): Promise<string[]> {
  const out = (await run('ip', ['-4', '-o', 'addr', 'show'])).stdout;
  return [...new Set([...out.matchAll(/inet (\d+\.\d+\.\d+\.\d+)\//g)].map((m) => m[1]).filter((a) => !a.startsWith('127.')))];
}

/** SMOL_NET_DNS, else the host's first IPv4 nameserver that is not loopback (a namespace cannot reach the host's). */
export function dnsUpstream(): string | null {
  if (process.env.SMOL_NET_DNS) return process.env.SMOL_NET_DNS;
  try {
    const m = [...fs.readFileSync('/etc/resolv.conf', 'utf8').matchAll(/^\s*nameserver\s+(\d+\.\d+\.\d+\.\d+)\s*$/gm)].map((x) => x[1]);
    return m.find((a) => !a.startsWith('127.')) ?? null;
  } catch {
    return null;
  }
}

// async so a failure to start lands in setupEgress's clean-up like every other step
async function detached(file: string, args: string[], outFile?: string): Promise<number> {
  return spawnDaemon(file, args, { outFile });
}

async function waitListening(host: string, port: number, pid: number): Promise<void> {
  const deadline = Date.now() + FORWARDER_LISTEN_MS;
  while (Date.now() < deadline) {
    if (!fs.existsSync(`/proc/${pid}`)) break;
    const ok = await new Promise<boolean>((resolve) => {
      const s = net.connect({ host, port }, () => { s.destroy(); resolve(true); });
      s.once('error', () => resolve(false));
    });
    if (ok) return;
    await new Promise((r) => setTimeout(r, 30));
  }
  throw new SmolError(`publishing host port ${port} failed: the forwarder did not start listening (is the port taken?)`);
}
