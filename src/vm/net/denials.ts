/**
 * The denial log of an egress machine: what its policy refused. Connections come from tcpdump reading the
 * namespace's NFLOG group (one line per refused packet: `2026-12-04 13:59:24.678239 IP 10.213.1.2.41748 >
 * 10.199.1.2.8081: tcp 0`); names from dnsmasq's query log (`config foo.example is NXDOMAIN`).
 */
import fs from 'node:fs';
import type { MachineLayout } from '../layout.js';
import { denialLogFile, dnsLogFile } from './netns.js';

export interface Denial {
  time: string;
  protocol: 'tcp' | 'udp' | 'icmp' | 'dns' | 'other';
  destination: string;
  port: number | null;
}

const PACKET = /^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d+) IP (\S+) > (\S+?):? (tcp|UDP|ICMP)?/;
const DNS = /^(\w{3} +\d+ \d\d:\d\d:\d\d) dnsmasq\[\d+\]: config (\S+) is NXDOMAIN/;

export function parsePacketLine(line: string): Denial | null {
  const m = PACKET.exec(line);
  if (!m) return null;
  const [, time, , dst, proto] = m;
  const protocol = proto === 'tcp' ? 'tcp' : proto === 'UDP' ? 'udp' : proto === 'ICMP' ? 'icmp' : 'other';
  // tcpdump writes address.port for TCP/UDP, the bare address otherwise
  const parts = dst.split('.');
  const hasPort = parts.length === 5 && (protocol === 'tcp' || protocol === 'udp');
  return {
    time: new Date(time.replace(' ', 'T').slice(0, 23)).toISOString(), protocol,
    destination: hasPort ? parts.slice(0, 4).join('.') : dst, port: hasPort ? Number(parts[4]) : null,
  };
}

/** Both logs stamp local time. dnsmasq's syslog-style stamp has no year: the current one (a log read across New Year may be off by one). */
export function parseDnsLine(line: string, year = new Date().getUTCFullYear()): Denial | null {
  const m = DNS.exec(line);
  if (!m) return null;
  const t = new Date(`${m[1]} ${year}`); // local time, like dnsmasq's
  return { time: Number.isNaN(t.getTime()) ? m[1] : t.toISOString(), protocol: 'dns', destination: m[2], port: 53 };
}

/** Refused connections and names, oldest first. A name asked for twice (A and AAAA) is one entry. */
export function readDenials(layout: Pick<MachineLayout, 'dir'>): Denial[] {
  const read = (f: string) => (fs.existsSync(f) ? fs.readFileSync(f, 'utf8').split('\n') : []);
  const out: Denial[] = [];
  for (const l of read(denialLogFile(layout))) {
    const d = parsePacketLine(l);
    if (d) out.push(d);
  }
  let last = '';
  for (const l of read(dnsLogFile(layout))) {
    const d = parseDnsLine(l);
    const key = d && `${d.time}|${d.destination}`;
    if (d && key !== last) out.push(d);
    if (key) last = key;
  }
  return out.sort((a, b) => a.time.localeCompare(b.time));
}
