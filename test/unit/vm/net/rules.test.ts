import { describe, expect, it } from 'vitest';
import { dnsmasqArgs, hostRuleset, machineRuleset } from '../../../../src/vm/net/rules.js';
import { parseDnsLine, parsePacketLine } from '../../../../src/vm/net/denials.js';

const lines = (s: string) => s.split('\n').map((l) => l.trim()).filter(Boolean);

describe('egress rulesets', () => {
  it('full egress: the host and link-local are refused and logged, everything else leaves', () => {
    const r = lines(machineRuleset({ allow: [], full: true, dnsUpstream: '10.9.9.9', hostAddrs: ['192.0.2.2', '10.213.0.1'] }));
    const out = r.slice(r.indexOf('type filter hook output priority filter; policy accept;') + 1);
    expect(out).toEqual([
      'ct state established,related accept', 'oif "lo" accept', 'meta nfproto ipv6 drop',
      'meta skuid "nobody" ip daddr 10.9.9.9 meta l4proto { tcp, udp } th dport 53 accept',
      'ip daddr { 192.0.2.2, 10.213.0.1 } jump deny', 'ip daddr 169.254.0.0/16 jump deny', 'accept', '}', '}',
    ]);
    expect(r).toContain('log group 1');
  });

  it('an allow list: each rule accepts, names through a set dnsmasq fills, and the rest is refused', () => {
    const r = lines(machineRuleset({
      allow: [{ kind: 'cidr', dest: '10.1.0.0/16', port: 443 }, { kind: 'name', dest: 'pypi.org' }, { kind: 'host', dest: 'host', port: 5432 }],
      full: false, dnsUpstream: null, hostAddrs: [],
    }));
    expect(r).toContain('ip daddr 10.1.0.0/16 meta l4proto { tcp, udp } th dport 443 accept');
    expect(r).toContain('set name1 { type ipv4_addr; flags timeout; timeout 1h; }');
    expect(r).toContain('ip daddr @name1 accept');
    expect(r.at(-3)).toBe('jump deny');
    expect(r.join('\n')).not.toContain('skuid');
  });

  it('the host table refuses new connections from machine veths to the host and to each other', () => {
    const r = lines(hostRuleset());
    expect(r).toContain('iifname "smolh-*" ct state established,related accept');
    expect(r).toContain('iifname "smolh-*" drop');
    expect(r).toContain('iifname "smolh-*" oifname "smolh-*" drop');
    expect(r).toContain('ip saddr 10.213.0.0/16 oifname != "smolh-*" masquerade');
  });

  it('dnsmasq answers allowed names only (NXDOMAIN for the rest), or forwards all with full egress', () => {
    const o = { pidFile: '/p', logFile: '/l', upstream: '10.9.9.9' };
    const allow = dnsmasqArgs({ ...o, full: false, allow: [{ kind: 'name', dest: 'pypi.org', port: 443 }, { kind: 'cidr', dest: '1.2.3.4/32' }] });
    expect(allow).toEqual(expect.arrayContaining(['--server=/pypi.org/10.9.9.9', '--nftset=/pypi.org/4#inet#smolvm#name0', '--address=/#/', '--no-resolv']));
    const full = dnsmasqArgs({ ...o, full: true, allow: [] });
    expect(full).toContain('--server=10.9.9.9');
    expect(full).not.toContain('--address=/#/');
  });
});

describe('denial log lines', () => {
  it('reads tcpdump -q -tttt lines from NFLOG', () => {
    expect(parsePacketLine('2026-12-04 13:59:24.678239 IP 10.213.161.74.41748 > 10.199.1.2.8081: tcp 0')).toMatchObject({ protocol: 'tcp', destination: '10.199.1.2', port: 8081 });
    expect(parsePacketLine('2026-12-04 13:59:24.678239 IP 10.213.161.74.41748 > 10.199.1.2.53: UDP, length 30')).toMatchObject({ protocol: 'udp', destination: '10.199.1.2', port: 53 });
    expect(parsePacketLine('listening on nflog:1, link-type NFLOG')).toBeNull();
  });

  it('reads dnsmasq\'s refused names', () => {
    expect(parseDnsLine('Dec  4 13:59:24 dnsmasq[2698]: config foo.example is NXDOMAIN', 2026)).toMatchObject({ protocol: 'dns', destination: 'foo.example', port: 53 });
    expect(parseDnsLine('Dec  4 13:59:24 dnsmasq[2698]: query[A] foo.example from 127.0.0.1')).toBeNull();
  });
});
