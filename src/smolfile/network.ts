/**
 * Published ports (`-p`, `ports:`) and egress allow rules (`--allow`, `network.allow:`), parsed once into
 * the shapes the machine spec records, so `ls --json` shows exactly what the network layer enforces.
 */
import net from 'node:net';
import { z } from 'zod';

export interface PortMapping {
  /** Host address the port binds on; 127.0.0.1 unless given. */
  address: string;
  host: number;
  guest: number;
  protocol: 'tcp' | 'udp';
}

/**
 * An egress destination: `host` (the host itself, reached by the guest as 10.0.2.2, one port only),
 * an IPv4 address or CIDR, or a DNS name (the resolver answers it; its answers become allowed addresses).
 */
export interface AllowRule {
  kind: 'host' | 'cidr' | 'name';
  /** The CIDR (a bare address becomes /32), the lower-cased name, or "host". */
  dest: string;
  /** Every port when absent (TCP and UDP alike). */
  port?: number;
}

const portNumber = (what: string) => z.coerce.number({ error: `${what} must be a number` })
  .int(`${what} must be a whole number`).min(1, `${what} must be 1-65535`).max(65535, `${what} must be 1-65535`);

const PORT_RE = /^(?:(\d{1,3}(?:\.\d{1,3}){3}):)?(\d+):(\d+)(?:\/(tcp|udp))?$/i;

/** `[HOSTIP:]HOSTPORT:GUESTPORT[/tcp|/udp]`, Docker's -p form (IPv4 only). */
export function parsePortSpec(v: string): PortMapping | string {
  const m = PORT_RE.exec(v.trim());
  if (!m) return `"${v}" is not a port mapping; use [HOSTIP:]HOSTPORT:GUESTPORT[/tcp|/udp], e.g. 8080:80 or 0.0.0.0:8443:443/tcp`;
  const [, address = '127.0.0.1', hp, gp, proto = 'tcp'] = m;
  if (!net.isIPv4(address)) return `"${address}" in "${v}" is not an IPv4 address`;
  for (const [what, p] of [['host port', hp], ['guest port', gp]] as const) {
    const n = Number(p);
    if (!(n >= 1 && n <= 65535)) return `${what} ${p} in "${v}" is out of range (1-65535)`;
  }
  return { address, host: Number(hp), guest: Number(gp), protocol: proto.toLowerCase() as 'tcp' | 'udp' };
}

const portObjectSchema = z.object({
  host: portNumber('host'),
  guest: portNumber('guest'),
  address: z.ipv4({ error: 'address must be an IPv4 address' }).default('127.0.0.1'),
  protocol: z.enum(['tcp', 'udp']).default('tcp'),
}).strict();

/**
 * A Smolfile `ports:` entry: "8080:80" (the -p form) or { host, guest, address?, protocol? }. Dispatched by
 * type rather than a zod union, whose failure says only "Invalid input" when no branch matches.
 */
export const portSchema = z.unknown().transform((v, ctx): PortMapping => {
  if (typeof v === 'string' || typeof v === 'number') {
    const r = parsePortSpec(String(v));
    if (typeof r !== 'string') return r;
    ctx.addIssue({ code: 'custom', message: r });
    return z.NEVER;
  }
  const o = portObjectSchema.safeParse(v);
  if (o.success) return { address: o.data.address, host: o.data.host, guest: o.data.guest, protocol: o.data.protocol };
  for (const i of o.error.issues) ctx.addIssue({ code: 'custom', message: i.message, path: i.path });
  if (typeof v !== 'object' || v === null) ctx.addIssue({ code: 'custom', message: 'expected "HOSTPORT:GUESTPORT" or { host, guest }' });
  return z.NEVER;
});

/** Two mappings on one host port and protocol would fight over one socket. */
export const portsSchema = z.array(portSchema).superRefine((ports, ctx) => {
  const seen = new Map<string, number>();
  ports.forEach((p, i) => {
    const wildcard = p.address === '0.0.0.0';
    for (const [k, j] of seen) {
      const [a, hp, proto] = k.split('|');
      if (Number(hp) === p.host && proto === p.protocol && (a === p.address || wildcard || a === '0.0.0.0')) {
        ctx.addIssue({ code: 'custom', path: [i], message: `host port ${p.host}/${p.protocol} is published twice (entries ${j + 1} and ${i + 1})` });
      }
    }
    seen.set(`${p.address}|${p.host}|${p.protocol}`, i);
  });
});

const NAME_RE = /^(?=.{1,253}$)([a-z0-9_]([a-z0-9_-]{0,61}[a-z0-9])?)(\.[a-z0-9_]([a-z0-9_-]{0,61}[a-z0-9])?)*\.?$/i;

/** `HOST[:PORT]` or `CIDR[:PORT]`; HOST is `host`, an IPv4 address or a DNS name. */
export function parseAllowSpec(v: string): AllowRule | string {
  const s = v.trim();
  const m = /^(.*?)(?::(\d+))?$/.exec(s)!;
  const [, dest, portStr] = m;
  const port = portStr === undefined ? undefined : Number(portStr);
  if (port !== undefined && !(port >= 1 && port <= 65535)) return `port ${portStr} in "${v}" is out of range (1-65535)`;
  const usage = 'use HOST[:PORT] or CIDR[:PORT], e.g. api.example.com:443, 10.1.0.0/16, host:5432';
  if (!dest) return `"${v}" names no destination; ${usage}`;
  if (dest.toLowerCase() === 'host') {
    if (port === undefined) return `"${v}": the host is allowed one port at a time; use host:PORT (the guest reaches it as 10.0.2.2:PORT)`;
    return { kind: 'host', dest: 'host', port };
  }
  const cidr = /^(\d{1,3}(?:\.\d{1,3}){3})(?:\/(\d{1,2}))?$/.exec(dest);
  if (cidr) {
    const bits = cidr[2] === undefined ? 32 : Number(cidr[2]);
    if (!net.isIPv4(cidr[1]) || bits > 32) return `"${dest}" in "${v}" is not an IPv4 address or CIDR`;
    return { kind: 'cidr', dest: `${networkOf(cidr[1], bits)}/${bits}`, ...(port === undefined ? {} : { port }) };
  }
  if (dest.includes(':') || dest.includes('[')) return `"${v}": IPv6 destinations are not supported (guests have IPv4 only)`;
  if (!NAME_RE.test(dest) || /^[\d.]+$/.test(dest)) return `"${dest}" in "${v}" is not a host name, address or CIDR; ${usage}`;
  return { kind: 'name', dest: dest.toLowerCase().replace(/\.$/, ''), ...(port === undefined ? {} : { port }) };
}

function networkOf(ip: string, bits: number): string {
  const n = ip.split('.').reduce((a, o) => (a << 8) | Number(o), 0) >>> 0;
  const masked = bits === 0 ? 0 : (n & (~0 << (32 - bits))) >>> 0;
  return [24, 16, 8, 0].map((s) => (masked >>> s) & 255).join('.');
}

export const allowSchema = z.string().transform((v, ctx) => {
  const r = parseAllowSpec(v);
  if (typeof r === 'string') {
    ctx.addIssue({ code: 'custom', message: r });
    return z.NEVER;
  }
  return r;
});

export const networkSchema = z.object({
  /** Egress only to these destinations (implies networking); empty: `net` decides (all or nothing). */
  allow: z.array(allowSchema).default([]),
}).strict();

/** How a machine's NIC is wired: none, published ports only (no way out), or egress (full or allow-listed). */
export type NetMode = 'none' | 'ports' | 'egress';

export function netModeOf(spec: { net: boolean; ports?: readonly PortMapping[]; network?: { allow: readonly AllowRule[] } }): NetMode {
  if (spec.net || (spec.network?.allow.length ?? 0) > 0) return 'egress';
  return (spec.ports?.length ?? 0) > 0 ? 'ports' : 'none';
}

export const formatPort = (p: PortMapping) => `${p.address}:${p.host}->${p.guest}/${p.protocol}`;
export const formatAllow = (r: AllowRule) => `${r.dest}${r.port === undefined ? '' : `:${r.port}`}`;
