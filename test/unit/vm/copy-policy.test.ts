/** The rules a tree from a guest is held to on the host (#31.1, #31.3). */
import { describe, expect, it } from 'vitest';
import { entryComponents, hostMode, linkStaysInside as inside } from '../../../src/vm/copy-policy.js';

const linkStaysInside = (at: string[], target: string, links: Map<string, string>) => inside(at, target, (p) => links.get(p.join('/')));

describe('entryComponents', () => {
  it('keeps paths below the root and refuses absolute ones and any ..', () => {
    expect(entryComponents('./a/b/')).toEqual(['a', 'b']);
    expect(entryComponents('a//./b')).toEqual(['a', 'b']);
    expect(entryComponents('./')).toEqual([]);
    for (const bad of ['/etc/passwd', '../x', 'a/../../x', 'a/..', 'a/../b', 'a\0b']) expect(entryComponents(bad), bad).toBeNull();
  });
});

describe('hostMode', () => {
  it('drops setuid and setgid, keeps sticky on directories only', () => {
    expect(hostMode(0o4755, false)).toBe(0o755);
    expect(hostMode(0o6755, false)).toBe(0o755);
    expect(hostMode(0o1644, false)).toBe(0o644);
    expect(hostMode(0o2775, true)).toBe(0o775);
    expect(hostMode(0o1777, true)).toBe(0o1777);
    expect(hostMode(0o100600, false)).toBe(0o600);
  });
});

describe('linkStaysInside', () => {
  const none = new Map<string, string>();
  const at = (p: string) => p.split('/');
  it('keeps relative links that resolve below the root', () => {
    expect(linkStaysInside(at('link'), 'sub/secret', none)).toBe(true);
    expect(linkStaysInside(at('a/b/link'), '../../c', none)).toBe(true);
    expect(linkStaysInside(at('a/link'), './x/../y', none)).toBe(true);
  });
  it('refuses absolute targets and climbs above the root', () => {
    expect(linkStaysInside(at('esc'), '/etc', none)).toBe(false);
    expect(linkStaysInside(at('a/link'), '../../x', none)).toBe(false);
    expect(linkStaysInside(at('link'), '..', none)).toBe(false);
  });
  it('follows the tree\'s own links as the kernel would, not lexically', () => {
    // b -> . ; a -> b/b/b/../../.. is "." lexically but three levels above the root when resolved
    const links = new Map([['b', '.']]);
    expect(linkStaysInside(at('a'), 'b/b/b/../../..', links)).toBe(false);
    expect(linkStaysInside(at('a'), 'b/b/x', links)).toBe(true);
    // d -> deep/er ; up -> d/../.. climbs from deep, one level: still inside
    const deep = new Map([['d', 'deep/er']]);
    expect(linkStaysInside(at('up'), 'd/../..', deep)).toBe(true);
    expect(linkStaysInside(at('up'), 'd/../../..', deep)).toBe(false);
    // a link through a link that leaves leaves too
    expect(linkStaysInside(at('x'), 'esc/y', new Map([['esc', '/etc']]))).toBe(false);
  });
  it('treats a loop as leading nowhere', () => {
    const loop = new Map([['p', 'q'], ['q', 'p']]);
    expect(linkStaysInside(at('p'), 'q', loop)).toBe(false);
  });
});
