import { describe, expect, it } from 'vitest';
import { looksLikeImageReference } from '../../../src/util/image-ref.js';

describe('image references vs paths', () => {
  it('takes what docker takes', () => {
    for (const r of ['debian:bookworm', 'python:3.12-slim', 'alpine', 'library/alpine:3.20', 'localhost:5000/x', 'ghcr.io/org/img:v1.2',
      `alpine@sha256:${'a'.repeat(64)}`, `reg.example:443/a/b:t@sha256:${'0'.repeat(64)}`]) expect(looksLikeImageReference(r), r).toBe(true);
  });
  it('leaves paths, tarballs and malformed names alone', () => {
    for (const r of ['./rootfs', '../x', '/abs/dir', '~/img', 'image.tar', 'img.tar.gz', 'Upper:case', 'a b', 'x:', `a@sha256:${'g'.repeat(64)}`]) expect(looksLikeImageReference(r), r).toBe(false);
  });
});
