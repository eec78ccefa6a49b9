import os from 'node:os';
import { describe, expect, it } from 'vitest';
import { shmHasRoom } from '../../../src/vm/layout.js';

describe('shmHasRoom (RAM files for snapshots and forkable machines)', () => {
  it('needs the guest memory free in the shm dir', () => {
    expect(shmHasRoom(1, os.tmpdir())).toBe(true);
    expect(shmHasRoom(2 ** 40, os.tmpdir())).toBe(false);
  });
  it('is false when the dir does not exist', () => {
    expect(shmHasRoom(1, '/nonexistent/shm')).toBe(false);
  });
});
