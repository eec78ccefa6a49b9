/**
 * The nftables rulesets of the egress policy, as pure functions of their inputs (unit-tested, and what
 * docs/network.md describes). Two tables:
 *  - the host's `inet smol` table, the same for every machine: a machine's veth may not open connections to
 *    the host itself (any of its addresses), to another machine's veth, or to link-local; its traffic out is
 *    masqueraded. It is the backstop for addresses the per-machine set below did not know at start.
 *  - the machine's own table inside its network namespace, where QEMU's user-mode stack opens the guest's
 *    connections as ordinary sockets: only what the policy allows leaves, the rest is logged (NFLOG) and
 *    refused. The guest cannot touch either: it only ever talks to QEMU.
 */
import type { AllowRule } from '../../smolfile/network.js';

/** Host-side veth names start with this; the host table matches them by wildcard. */
export const HOST_IF_PREFIX = 'smolh-';
export const NS_IF_PREFIX = 'smoln-';
/** Per-machine /30s are carved from this /16. */
export const NET_BASE = '10.213.0.0/16';
export const NFLOG_GROUP = 1;
/** dnsmasq drops to this user; only its sockets may reach the upstream resolver. */
export const DNS_USER = 'nobody';

export function hostRuleset(): string {
  return `table inet smol {
  chain input {
    type filter hook input priority filter - 5; policy accept;
    iifname "${HOST_IF_PREFIX}*" ct state established,related accept
    iifname "${HOST_IF_PREFIX}*" drop
  }
  chain forward {
    type filter hook forward priority filter - 5; policy accept;
    iifname "${HOST_IF_PREFIX}*" oifname "${HOST_IF_PREFIX}*" drop
    oifname "${HOST_IF_PREFIX}*" ct state established,related accept
    oifname "${HOST_IF_PREFIX}*" drop
  }
  chain postrouting {
    type nat hook postrouting priority srcnat; policy accept;
    ip saddr ${NET_BASE} oifname != "${HOST_IF_PREFIX}*" masquerade
  }
}
`;
}

export interface MachineRulesInput {
  /** Empty with full egress (--net). */
  allow: readonly AllowRule[];
  full: boolean;
  /** The upstream resolver dnsmasq forwards to (null: none). */
  dnsUpstream: string | null;
  /** The host's own IPv4 addresses at start, veth included. */
  hostAddrs: readonly string[];
}

export const nameSet = (i: number) => `name${i}`;

/** The ruleset inside a machine's namespace (`nft -f`), replacing any earlier one. */
export function machineRuleset(i: MachineRulesInput): string {
  const sets: string[] = [];
  const allows: string[] = [];
  i.allow.forEach((r, n) => {
    const port = r.port === undefined ? '' : ` meta l4proto { tcp, udp } th dport ${r.port}`;
    if (r.kind === 'cidr') allows.push(`ip daddr ${r.dest}${port} accept`);
    else if (r.kind === 'name') {
      // dnsmasq adds each address it answers for the name (--nftset), for as long as the answer's TTL allows and then some
      sets.push(`  set ${nameSet(n)} { type ipv4_addr; flags timeout; timeout 1h; }`);
      allows.push(`ip daddr @${nameSet(n)}${port} accept`);
    }
    // host:PORT goes through a forwarder on the namespace's loopback (accepted with lo)
  });
  const lines = [
    'ct state established,related accept',
    'oif "lo" accept',
    'meta nfproto ipv6 drop', // the guest has no IPv6 (ipv6=off); this is the namespace's own link-local chatter
    ...(i.dnsUpstream ? [`meta skuid "${DNS_USER}" ip daddr ${i.dnsUpstream} meta l4proto { tcp, udp } th dport 53 accept`] : []),
    ...(i.hostAddrs.length ? [`ip daddr { ${i.hostAddrs.join(', ')} } jump deny`] : []),
    ...allows,
    'ip daddr 169.254.0.0/16 jump deny',
    i.full && i.allow.length === 0 ? 'accept' : 'jump deny',
  ];
  return `table inet smolvm
delete table inet smolvm
table inet smolvm {
${sets.join('\n')}${sets.length ? '\n' : ''}  chain deny {
    log group ${NFLOG_GROUP}
    meta l4proto tcp reject with tcp reset
    reject
  }
  chain output {
    type filter hook output priority filter; policy accept;
${lines.map((l) => `    ${l}`).join('\n')}
  }
}
`;
}

/** dnsmasq's arguments: forward allowed names (all with full egress), answer the rest NXDOMAIN. */
export function dnsmasqArgs(o: { allow: readonly AllowRule[]; full: boolean; upstream: string | null; pidFile: string; logFile: string }): string[] {
  const a = [
    '--conf-file=/dev/null', '--no-resolv', '--no-hosts', '--no-poll', '--bind-interfaces', '--listen-address=127.0.0.1', '--port=53',
    `--user=${DNS_USER}`, `--pid-file=${o.pidFile}`, '--log-queries', `--log-facility=${o.logFile}`, '--cache-size=500',
  ];
  const names = o.allow.flatMap((r, n) => (r.kind === 'name' ? [{ r, n }] : []));
  if (o.full && o.allow.length === 0) {
    if (o.upstream) a.push(`--server=${o.upstream}`);
  } else {
    for (const { r, n } of names) {
      if (o.upstream) a.push(`--server=/${r.dest}/${o.upstream}`);
      a.push(`--nftset=/${r.dest}/4#inet#smolvm#${nameSet(n)}`);
    }
    a.push('--address=/#/'); // every other name: NXDOMAIN
  }
  return a;
}
