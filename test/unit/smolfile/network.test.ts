import { describe, expect, it } from 'vitest';
import { parseSmolfile } from '../../../src/smolfile/load.js';
import { mergeSpec } from '../../../src/smolfile/merge.js';
import { netModeOf, parseAllowSpec, parsePortSpec } from '../../../src/smolfile/network.js';
import { ValidationError } from '../../../src/errors/index.js';

describe('port mappings', () => {
  it('reads Docker\'s -p forms, binding 127.0.0.1 unless told', () => {
    expect(parsePortSpec('8080:80')).toEqual({ address: '127.0.0.1', host: 8080, guest: 80, protocol: 'tcp' });
    expect(parsePortSpec('0.0.0.0:5353:53/udp')).toEqual({ address: '0.0.0.0', host: 5353, guest: 53, protocol: 'udp' });
    expect(parsePortSpec('10.1.2.3:443:8443/TCP')).toEqual({ address: '10.1.2.3', host: 443, guest: 8443, protocol: 'tcp' });
  });

  it('says what is wrong with a bad one', () => {
    expect(parsePortSpec('80')).toMatch(/HOSTPORT:GUESTPORT/);
    expect(parsePortSpec('70000:80')).toMatch(/host port 70000 .* out of range/);
    expect(parsePortSpec('8080:0')).toMatch(/guest port 0/);
    expect(parsePortSpec('999.1.1.1:80:80')).toMatch(/not an IPv4 address/);
    expect(parsePortSpec('8080:80/sctp')).toMatch(/HOSTPORT:GUESTPORT/);
  });

  it('takes ports: in a Smolfile as strings or strict objects, and refuses one host port twice', () => {
    const s = parseSmolfile('ports:\n  - "8080:80"\n  - { host: 9000, guest: 9000, protocol: udp }\n');
    expect(s.ports).toEqual([
      { address: '127.0.0.1', host: 8080, guest: 80, protocol: 'tcp' },
      { address: '127.0.0.1', host: 9000, guest: 9000, protocol: 'udp' },
    ]);
    expect(() => parseSmolfile('ports:\n  - { host: 1, guest: 2, extra: 3 }\n')).toThrow(ValidationError);
    try {
      parseSmolfile('ports: ["8080:80", "0.0.0.0:8080:81"]\n');
      expect.unreachable();
    } catch (e) {
      expect((e as ValidationError).issues).toEqual([{ path: 'Smolfile:1 ports.1', message: 'host port 8080/tcp is published twice (entries 1 and 2)' }]);
    }
    expect(parseSmolfile('ports: ["8080:80", "8080:80/udp"]\n').ports).toHaveLength(2);
  });

  it('names the exact fault of a bad entry, not zod\'s "Invalid input"', () => {
    const issues = (text: string) => {
      try {
        parseSmolfile(text);
      } catch (e) {
        return (e as ValidationError).issues.map((i) => `${i.path}: ${i.message}`);
      }
      return expect.unreachable();
    };
    expect(issues('ports: ["99999:1"]\n')).toEqual(['Smolfile:1 ports.0: host port 99999 in "99999:1" is out of range (1-65535)']);
    expect(issues('ports:\n  - { host: 8080, guest: 0 }\n')).toEqual(['Smolfile:2 ports.0.guest: guest must be 1-65535']);
    expect(issues('ports: [true]\n').join()).toMatch(/ports\.0: .*HOSTPORT:GUESTPORT/);
  });
});

describe('egress allow rules', () => {
  it('reads names, addresses, CIDRs and host:PORT', () => {
    expect(parseAllowSpec('API.example.com:443')).toEqual({ kind: 'name', dest: 'api.example.com', port: 443 });
    expect(parseAllowSpec('10.1.2.3')).toEqual({ kind: 'cidr', dest: '10.1.2.3/32' });
    expect(parseAllowSpec('10.1.2.3/16:5432')).toEqual({ kind: 'cidr', dest: '10.1.0.0/16', port: 5432 });
    expect(parseAllowSpec('host:5432')).toEqual({ kind: 'host', dest: 'host', port: 5432 });
  });

  it('refuses what it cannot enforce', () => {
    expect(parseAllowSpec('host')).toMatch(/host:PORT/);
    expect(parseAllowSpec('10.0.0.0/33')).toMatch(/not an IPv4 address or CIDR/);
    expect(parseAllowSpec('example.com:99999')).toMatch(/out of range/);
    expect(parseAllowSpec('[::1]:80')).toMatch(/IPv6/);
    expect(parseAllowSpec('bad_host!')).toMatch(/not a host name/);
  });

  it('network.allow in a Smolfile is strict, and flags add to it', () => {
    const s = parseSmolfile('network:\n  allow: ["pypi.org:443"]\n');
    expect(s.network.allow).toEqual([{ kind: 'name', dest: 'pypi.org', port: 443 }]);
    expect(() => parseSmolfile('network:\n  allow: []\n  deny: []\n')).toThrow(ValidationError);
    const m = mergeSpec(s, undefined, { allow: [{ kind: 'cidr', dest: '10.0.0.0/8' }], ports: [{ address: '127.0.0.1', host: 1, guest: 2, protocol: 'tcp' }] });
    expect(m.network.allow).toHaveLength(2);
    expect(netModeOf(m)).toBe('egress');
  });

  it('decides the network mode: none, ports only, or egress', () => {
    const none = parseSmolfile('');
    expect(netModeOf(none)).toBe('none');
    expect(netModeOf(parseSmolfile('ports: ["1:2"]'))).toBe('ports');
    expect(netModeOf(parseSmolfile('net: true'))).toBe('egress');
  });
});
