/**
 * Published ports and the egress policy, on real QEMU, nftables, dnsmasq and namespaces. Every address is on
 * this machine: two test namespaces (one "allowed", one "denied", each with an HTTP server; the allowed one
 * also runs the upstream resolver the machines' dnsmasq forwards to) and servers on the host itself.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import crypto from 'node:crypto';
import dgram from 'node:dgram';
import fs from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { killQemuMentioning, root, scratchHome, smol } from '../../helpers/cli.js';
import { ciOrLong } from '../../helpers/long.js';

const isRoot = process.getuid?.() === 0;
const tools = ['ip', 'nft', 'dnsmasq', 'tcpdump', 'socat'].every((t) => spawnSync('sh', ['-c', `command -v ${t}`]).status === 0);

const tag = crypto.randomBytes(2).toString('hex');
const nsA = `smtn-${tag}a`;
const nsB = `smtn-${tag}b`;
const octet = 16 + crypto.randomInt(200);
const A = { host: `10.198.${octet}.1`, ns: `10.198.${octet}.2` };
const B = { host: `10.197.${octet}.1`, ns: `10.197.${octet}.2` };
const zone = `smtn-${tag}.test`;
/** The published-port download: many windows of the forwarder either way; TCG's guest-side sha256 is what 100 costs. */
const bigMiB = ciOrLong(16, 100);

let home: string;
let env: Record<string, string>;
let hostLoop: http.Server;
let hostAny: http.Server;
let loopPort: number;
let anyPort: number;
let hostAddr: string;
const children: ChildProcess[] = [];

const sh = (cmd: string) => {
  const r = spawnSync('sh', ['-c', cmd], { encoding: 'utf8' });
  if (r.status !== 0) throw new Error(`${cmd}: ${r.stderr}`);
  return r.stdout;
};

function serve(body: (url: string) => string, host: string): Promise<http.Server> {
  const s = http.createServer((req, res) => res.end(body(req.url ?? '/')));
  return new Promise((resolve) => s.listen(0, host, () => resolve(s)));
}

function testNamespace(ns: string, a: { host: string; ns: string }, text: string): void {
  sh(`ip netns add ${ns} && ip link add ${ns}h type veth peer name ${ns}n netns ${ns}`);
  sh(`ip addr add ${a.host}/24 dev ${ns}h && ip link set ${ns}h up`);
  sh(`ip -n ${ns} addr add ${a.ns}/24 dev ${ns}n && ip -n ${ns} link set ${ns}n up && ip -n ${ns} link set lo up && ip -n ${ns} route add default via ${a.host}`);
  const js = `require('http').createServer((q,r)=>r.end(${JSON.stringify(text)})).listen(8080,${JSON.stringify(a.ns)})`;
  const c = spawn('ip', ['netns', 'exec', ns, process.execPath, '-e', js], { stdio: 'ignore' });
  children.push(c);
}

async function until(url: string): Promise<void> {
  for (let i = 0; i < 100; i++) {
    try {
      if ((await fetch(url)).ok) return;
    } catch { /* not yet */ }
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`${url} never answered`);
}

/**
 * One guest `wget` per URL, all at once: its body, or `FAIL` (busybox wget's -T crashes; timeout(1) bounds it
 * instead). In parallel because a dropped connection waits out the whole timeout; each answer is one line.
 */
const probe = (urls: string[]) => `for u in ${urls.join(' ')}; do (b=$(timeout 8 wget -q -O- "$u" 2>/dev/null) && echo "$u $b" || echo "$u FAIL") & done; wait`;
const results = (out: string) => Object.fromEntries(out.trim().split('\n').filter((l) => l.startsWith('http')).map((l) => [l.split(' ')[0], l.split(' ').slice(1).join(' ')]));

const netnsList = () => sh('ip netns list');
let forwardingAtStart = '';

describe.skipIf(!isRoot || !tools)('published ports and egress policy (needs root, ip, nft, dnsmasq, tcpdump, socat)', () => {
  beforeAll(async () => {
    forwardingAtStart = fs.readFileSync('/proc/sys/net/ipv4/ip_forward', 'utf8');
    home = scratchHome('net');
    testNamespace(nsA, A, 'allowed-ok');
    testNamespace(nsB, B, 'denied-ok');
    hostAddr = sh("ip -4 -o addr show scope global | awk '{print $4}' | cut -d/ -f1").split('\n').find((x) => x && !x.startsWith('10.213.') && !x.startsWith('10.19')) ?? A.host;
    // the upstream resolver, in the allowed namespace: names for both test hosts and one for the host itself
    sh(`ip netns exec ${nsA} dnsmasq --conf-file=/dev/null --no-resolv --no-hosts --bind-interfaces --listen-address=${A.ns} --pid-file=${home}/updns.pid `
      + `--address=/ok.${zone}/${A.ns} --address=/no.${zone}/${B.ns} --address=/host.${zone}/${hostAddr}`);
    env = { SMOL_NET_DNS: A.ns };
    hostLoop = await serve(() => 'host-loopback-secret', '127.0.0.1');
    hostAny = await serve(() => 'host-any-secret', '0.0.0.0');
    loopPort = (hostLoop.address() as AddressInfo).port;
    anyPort = (hostAny.address() as AddressInfo).port;
    await until(`http://${A.ns}:8080/`);
    await until(`http://${B.ns}:8080/`);
  });

  afterAll(async () => {
    if (home) {
      const ls = await smol(['machine', 'ls', '--json'], { home });
      for (const m of (JSON.parse(ls.stdout || '[]') as { name: string }[])) await smol(['machine', 'rm', '-f', m.name], { home });
      killQemuMentioning(home);
      try { process.kill(Number(fs.readFileSync(path.join(home, 'updns.pid'), 'utf8')), 'SIGTERM'); } catch { /* gone */ }
    }
    for (const c of children) c.kill('SIGKILL');
    hostLoop?.close();
    hostAny?.close();
    for (const ns of [nsA, nsB]) spawnSync('ip', ['netns', 'del', ns]);
    for (const ns of [nsA, nsB]) spawnSync('ip', ['link', 'del', `${ns}h`]);
    if (home) fs.rmSync(home, { recursive: true, force: true });
  });

  it(`publishes a guest port on 127.0.0.1 without --net: real httpd, ${bigMiB} MiB with matching sha256, no way out`, async () => {
    const port = await freePort();
    const c = await smol(['machine', 'create', 'pub', '--mem', '512M', '-p', `${port}:80`, '--start', '--json'], { home, env, timeoutMs: 180_000 });
    expect(c.code, c.stderr).toBe(0);
    expect(JSON.parse(c.stdout).ports).toEqual([{ address: '127.0.0.1', host: port, guest: 80, protocol: 'tcp' }]);
    const prep = await smol(['machine', 'exec', 'pub', '--', 'sh', '-c',
      `mkdir -p /srv && mount -t tmpfs -o size=200m tmpfs /srv && echo hello-guest > /srv/index.html && dd if=/dev/urandom of=/srv/big bs=1M count=${bigMiB} 2>/dev/null && httpd -p 80 -h /srv && sha256sum /srv/big | cut -d" " -f1`], { home, timeoutMs: 120_000 });
    expect(prep.code, prep.stderr).toBe(0);
    expect(await (await fetch(`http://127.0.0.1:${port}/`)).text()).toBe('hello-guest\n');
    const big = Buffer.from(await (await fetch(`http://127.0.0.1:${port}/big`)).arrayBuffer());
    expect(big.length).toBe(bigMiB * 2 ** 20);
    expect(crypto.createHash('sha256').update(big).digest('hex')).toBe(prep.stdout.trim());
    // published on loopback only: not on the host's other addresses
    await expect(fetch(`http://${hostAddr}:${port}/`, { signal: AbortSignal.timeout(3_000) })).rejects.toThrow();
    // publishing is a way in, not out: the guest reaches neither the host's loopback nor anything else
    const out = await smol(['machine', 'exec', 'pub', '--', 'sh', '-c', probe([`http://10.0.2.2:${loopPort}/`, `http://${A.ns}:8080/`])], { home });
    expect(results(out.stdout)).toEqual({ [`http://10.0.2.2:${loopPort}/`]: 'FAIL', [`http://${A.ns}:8080/`]: 'FAIL' });
    const st = await smol(['machine', 'status', 'pub'], { home });
    expect(st.stdout).toMatch(new RegExp(`ports +127\\.0\\.0\\.1:${port}->80/tcp`));

    // the same host port again: refused before anything is made, naming the port, exit 67
    const before = JSON.parse((await smol(['machine', 'ls', '--json'], { home })).stdout) as unknown[];
    const busy = await smol(['run', '-p', `${port}:8080`, '--', 'true'], { home, env });
    expect(busy.code).toBe(67);
    expect(busy.stderr).toContain(`host port ${port}/tcp`);
    const busy2 = await smol(['machine', 'create', 'pub2', '-p', `${port}:80`, '--start'], { home, env });
    expect(busy2.code).toBe(67);
    expect(JSON.parse((await smol(['machine', 'ls', '--json'], { home })).stdout)).toHaveLength(before.length);
    expect((await smol(['machine', 'rm', '-f', 'pub'], { home })).code).toBe(0);
  }, 400_000);

  it('--net: egress to outside hosts, never to the host (loopback, its addresses, names for them), link-local or another machine', async () => {
    const port = await freePort();
    const m1 = await smol(['machine', 'create', 'web', '--net', '-p', `${port}:80`, '--start'], { home, env, timeoutMs: 180_000 });
    expect(m1.code, m1.stderr).toBe(0);
    const webNs = JSON.parse(fs.readFileSync(path.join(await machineDir('web'), 'net.json'), 'utf8')) as { ns: string; nsAddr: string };
    expect(netnsList()).toContain(webNs.ns);
    await smol(['machine', 'exec', 'web', '--', 'sh', '-c', 'mkdir -p /srv && echo web-guest > /srv/index.html && httpd -p 80 -h /srv'], { home });
    // published under --net too (the host-side forwarder into the machine's namespace)
    expect(await (await fetch(`http://127.0.0.1:${port}/`)).text()).toBe('web-guest\n');

    const urls = {
      outsideA: `http://${A.ns}:8080/`, outsideB: `http://${B.ns}:8080/`, byName: `http://ok.${zone}:8080/`,
      loopback: `http://10.0.2.2:${loopPort}/`, hostAny: `http://${hostAddr}:${anyPort}/`, hostVeth: `http://${A.host}:${anyPort}/`,
      hostByName: `http://host.${zone}:${anyPort}/`, linkLocal: 'http://169.254.169.254/', otherMachine: `http://${webNs.nsAddr}:${port}/`,
      otherPublished: `http://10.0.2.2:${port}/`,
    };
    // the first run with a NIC saves a boot snapshot (if none yet); the probe run below restores it, then gets its namespace
    expect((await smol(['run', '--net', '--', 'true'], { home, env, timeoutMs: 180_000 })).code).toBe(0);
    const smolNamespaces = () => netnsList().split('\n').filter((l) => l.startsWith('smol-')).length;
    const nsBefore = smolNamespaces();
    const r = await smol(['run', '--net', '--', 'sh', '-c', probe(Object.values(urls))], { home, env, timeoutMs: 180_000 });
    expect(r.code, r.stderr).toBe(0);
    expect(smolNamespaces()).toBe(nsBefore); // the run's namespace went with its machine
    const got = results(r.stdout);
    expect(got[urls.outsideA]).toBe('allowed-ok');
    expect(got[urls.outsideB]).toBe('denied-ok');
    expect(got[urls.byName]).toBe('allowed-ok'); // DNS works
    for (const k of ['loopback', 'hostAny', 'hostVeth', 'hostByName', 'linkLocal', 'otherMachine', 'otherPublished'] as const) expect([k, got[urls[k]]]).toEqual([k, 'FAIL']);
    // the host really serves those: refusal is the policy, not a dead server
    expect(await (await fetch(`http://${hostAddr}:${anyPort}/`)).text()).toBe('host-any-secret');

    expect((await smol(['machine', 'rm', '-f', 'web'], { home })).code).toBe(0);
    expect(netnsList()).not.toContain(webNs.ns);
    expect(sh('ip -o link show')).not.toContain(`smolh-${webNs.ns.slice(5)}`);
  }, 400_000);

  it('--allow: only the allowed name and host port; DNS answers allowed names only; refusals are listed by logs --net', async () => {
    const c = await smol(['machine', 'create', 'agent', '--allow', `ok.${zone}:8080`, '--allow', `host:${loopPort}`, '--start'], { home, env, timeoutMs: 180_000 });
    expect(c.code, c.stderr).toBe(0);
    const urls = [`http://ok.${zone}:8080/`, `http://${B.ns}:8080/`, `http://no.${zone}:8080/`, `http://10.0.2.2:${loopPort}/`, `http://10.0.2.2:${anyPort}/`, `http://${hostAddr}:${anyPort}/`];
    const r = await smol(['machine', 'exec', 'agent', '--', 'sh', '-c', probe(urls)], { home });
    expect(results(r.stdout)).toEqual({
      [urls[0]]: 'allowed-ok', [urls[1]]: 'FAIL', [urls[2]]: 'FAIL', [urls[3]]: 'host-loopback-secret', [urls[4]]: 'FAIL', [urls[5]]: 'FAIL',
    });
    // root in the guest changes nothing: the policy lives in the host's namespaces, not in the guest
    const root = await smol(['machine', 'exec', 'agent', '--', 'sh', '-c', `ip route add ${B.ns} via 10.0.2.2 2>/dev/null; echo "nameserver ${A.ns}" > /etc/resolv.conf; ${probe([`http://${B.ns}:8080/`, `http://no.${zone}:8080/`])}`], { home });
    expect(Object.values(results(root.stdout))).toEqual(['FAIL', 'FAIL']);
    await new Promise((r2) => setTimeout(r2, 1_000)); // tcpdump writes each line as it comes; give it a moment
    const logs = await smol(['machine', 'logs', 'agent', '--net', '--json'], { home });
    const denied = JSON.parse(logs.stdout) as { time: string; protocol: string; destination: string; port: number | null }[];
    expect(denied).toContainEqual(expect.objectContaining({ protocol: 'tcp', destination: B.ns, port: 8080 }));
    expect(denied).toContainEqual(expect.objectContaining({ protocol: 'tcp', destination: hostAddr, port: anyPort }));
    expect(denied).toContainEqual(expect.objectContaining({ protocol: 'dns', destination: `no.${zone}` }));
    expect(denied.every((d) => !Number.isNaN(Date.parse(d.time)))).toBe(true);
    const text = await smol(['machine', 'logs', 'agent', '--net'], { home });
    expect(text.stdout).toMatch(new RegExp(`tcp +${B.ns.replace(/\./g, '\\.')} +8080`));
  }, 400_000);

  it('fork: the clone gets its own namespace and policy but not the parent\'s host port; rm takes all of it', async () => {
    const port = await freePort();
    const smolNs = () => netnsList().split('\n').filter((l) => l.startsWith('smol-')).map((l) => l.split(' ')[0]).sort();
    const nsAtStart = smolNs();
    const c = await smol(['machine', 'create', 'fk', '--net', '-p', `${port}:80`, '--forkable', '--start'], { home, env, timeoutMs: 180_000 });
    expect(c.code, c.stderr).toBe(0);
    await smol(['machine', 'exec', 'fk', '--', 'sh', '-c', 'mkdir -p /srv && echo parent > /srv/index.html && httpd -p 80 -h /srv'], { home });
    const parentNs = smolNs().filter((n) => !nsAtStart.includes(n));
    const f = await smol(['fork', 'fk', '--count', '1'], { home, env, timeoutMs: 180_000 });
    expect(f.code, f.stderr).toBe(0);
    expect(await (await fetch(`http://127.0.0.1:${port}/`)).text()).toBe('parent\n');
    const ls = JSON.parse((await smol(['machine', 'ls', '--json'], { home })).stdout) as { name: string; parent: string | null; ports: unknown[]; state: string }[];
    const clone = ls.find((m) => m.parent === 'fk')!;
    expect(clone).toMatchObject({ state: 'running', ports: [] });
    // the parent's, the clone's, and the next fork's spare: each QEMU in a namespace of its own
    expect(smolNs().filter((n) => !nsAtStart.includes(n) && !parentNs.includes(n)).length).toBeGreaterThanOrEqual(1);
    const probeOut = await smol(['machine', 'exec', clone.name, '--', 'sh', '-c', probe([`http://${A.ns}:8080/`, `http://10.0.2.2:${loopPort}/`])], { home });
    expect(results(probeOut.stdout)).toEqual({ [`http://${A.ns}:8080/`]: 'allowed-ok', [`http://10.0.2.2:${loopPort}/`]: 'FAIL' });
    expect((await smol(['machine', 'rm', '--cascade', '-f', 'fk'], { home })).code).toBe(0);
    expect(smolNs()).toEqual(nsAtStart);
  }, 400_000);

  it('a UDP port without --net: a real echo server in the guest answers through it; the guest still has no way out', async () => {
    const port = await freePort();
    // busybox has no UDP listener: a static C one, copied in
    const echo = path.join(home, 'udp-echo');
    const cc = spawnSync('gcc', ['-static', '-O2', '-o', echo, path.join(root, 'test/fixtures/udp-echo.c')], { encoding: 'utf8' });
    expect(cc.status, cc.stderr).toBe(0);
    const c = await smol(['machine', 'create', 'udp', '-p', `${port}:7/udp`, '--start', '--json'], { home, env, timeoutMs: 180_000 });
    expect(c.code, c.stderr).toBe(0);
    expect(JSON.parse(c.stdout).ports).toEqual([{ address: '127.0.0.1', host: port, guest: 7, protocol: 'udp' }]);
    expect((await smol(['machine', 'cp', echo, 'udp:/udp-echo'], { home })).code).toBe(0);
    expect((await smol(['machine', 'exec', '-d', 'udp', '--', '/udp-echo', '7'], { home })).code).toBe(0);
    const sock = dgram.createSocket('udp4');
    const replies: string[] = [];
    sock.on('message', (m) => replies.push(m.toString()));
    // datagrams may be lost before the server binds: resend each until its answer comes, as a UDP client does
    for (let i = 0; i < 20; i++) {
      const want = `echo:datagram-${i}-${'x'.repeat(i * 50)}`;
      for (let t = 0; t < 50 && !replies.includes(want); t++) {
        sock.send(want.slice(5), port, '127.0.0.1');
        await new Promise((r) => setTimeout(r, 100));
      }
      expect(replies).toContain(want);
    }
    sock.close();
    const out = await smol(['machine', 'exec', 'udp', '--', 'sh', '-c', probe([`http://${A.ns}:8080/`, `http://10.0.2.2:${loopPort}/`])], { home });
    expect(results(out.stdout)).toEqual({ [`http://${A.ns}:8080/`]: 'FAIL', [`http://10.0.2.2:${loopPort}/`]: 'FAIL' });
    expect((await smol(['machine', 'rm', '-f', 'udp'], { home })).code).toBe(0);
  }, 300_000);

  it('rejects bad -p and --allow values with exit 65, naming the flag', async () => {
    const p = await smol(['run', '-p', '80', '--', 'true'], { home });
    expect(p.code).toBe(65);
    expect(p.stderr).toContain('--publish');
    const a = await smol(['run', '--allow', 'host', '--', 'true'], { home });
    expect(a.code).toBe(65);
    expect(a.stderr).toContain('host:PORT');
  });

  it('after the host\'s last egress machine goes, the host table is gone and forwarding is as it was found', async () => {
    const ls = JSON.parse((await smol(['machine', 'ls', '--json'], { home })).stdout) as { name: string }[];
    for (const m of ls) expect((await smol(['machine', 'rm', '-f', m.name], { home })).code).toBe(0);
    expect(fs.readdirSync('/sys/class/net').filter((n) => n.startsWith('smolh-'))).toEqual([]);
    expect(spawnSync('nft', ['list', 'table', 'inet', 'smol']).status).not.toBe(0);
    expect(fs.readFileSync('/proc/sys/net/ipv4/ip_forward', 'utf8')).toBe(forwardingAtStart);
    // and the next egress machine sets both up again
    const r = await smol(['run', '--net', '--', 'sh', '-c', probe([`http://${A.ns}:8080/`])], { home, env });
    expect(results(r.stdout)).toEqual({ [`http://${A.ns}:8080/`]: 'allowed-ok' });
    expect(fs.readFileSync('/proc/sys/net/ipv4/ip_forward', 'utf8')).toBe(forwardingAtStart);
    expect(spawnSync('nft', ['list', 'table', 'inet', 'smol']).status).not.toBe(0);
  }, 200_000);

  async function machineDir(name: string): Promise<string> {
    return (JSON.parse((await smol(['machine', 'status', name, '--json'], { home })).stdout) as { dir: string }).dir;
  }
});

function freePort(): Promise<number> {
  const s = http.createServer();
  return new Promise((resolve) => s.listen(0, '127.0.0.1', () => {
    const { port } = s.address() as AddressInfo;
    s.close(() => resolve(port));
  }));
}
