/** The files routes' pure parts: guest path checks and the parsing of a guest's (hostile) listing. */
import { describe, expect, it } from 'vitest';
import { LIST_MAX_ENTRIES, parseListing } from '../../../src/api/files-io.js';
import { guestPathSchema } from '../../../src/api/schemas/files.js';

describe('guest paths', () => {
  it('takes absolute paths and refuses relative, .., NUL and over-long ones', () => {
    for (const ok of ['/', '/etc/hostname', '/a/..b/c', '/srv/app/']) expect(guestPathSchema.safeParse(ok).success, ok).toBe(true);
    for (const bad of ['', 'etc', './x', '/a/../b', '/..', '/a\0b', `/${'x'.repeat(4096)}`]) expect(guestPathSchema.safeParse(bad).success, bad).toBe(false);
  });
});

describe('parseListing', () => {
  it('reads type, size and mode from stat\'s raw hex mode', () => {
    const r = parseListing('81a4 12 ./b.txt\n41ed 4096 ./a\na1ff 7 ./l\n11b6 0 ./fifo\n');
    expect(r).toEqual({
      truncated: false,
      entries: [
        { name: 'a', type: 'dir', size: 4096, mode: '0755' },
        { name: 'b.txt', type: 'file', size: 12, mode: '0644' },
        { name: 'fifo', type: 'other', size: 0, mode: '0666' },
        { name: 'l', type: 'symlink', size: 7, mode: '0777' },
      ],
    });
  });

  it('drops lines a hostile guest mangled: no prefix, slashes, over-long names, split names', () => {
    const r = parseListing(['81a4 1 ./ok', 'garbage', '81a4 1 /abs', '81a4 1 ./a/b', `81a4 1 ./${'n'.repeat(256)}`, '81a4 1 ./first', 'half of a name', 'zz 1 ./bad'].join('\n'));
    expect(r.entries.map((e) => e.name)).toEqual(['first', 'ok']);
  });

  it('keeps at most LIST_MAX_ENTRIES and says it cut the rest', () => {
    const text = Array.from({ length: LIST_MAX_ENTRIES + 1 }, (_, i) => `81a4 1 ./f${i}`).join('\n');
    const r = parseListing(text);
    expect(r.entries.length).toBe(LIST_MAX_ENTRIES);
    expect(r.truncated).toBe(true);
  });
});
