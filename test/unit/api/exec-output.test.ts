/**
 * Buffered exec's answer against a hostile guest: control bytes cost 6 characters each in JSON, so two full
 * 64 MiB streams of them must be refused precisely rather than fail as V8's "Invalid string length".
 */
import { describe, expect, it } from 'vitest';
import { ApiError } from '../../../src/api/errors.js';
import { jsonEscapedLength, MAX_JSON_OUTPUT_CHARS, outputStrings } from '../../../src/api/routes/exec.js';

describe('buffered exec output as JSON', () => {
  it('bounds the escaped length from above', () => {
    for (const s of ['plain', 'a"b\\c\n\t\r', '\x01\x1f\x7f', 'é€😀', '\x08\x0c']) {
      expect(jsonEscapedLength(Buffer.from(s))).toBeGreaterThanOrEqual(JSON.stringify(s).length - 2);
    }
    expect(jsonEscapedLength(Buffer.from('\x01\x01'))).toBe(JSON.stringify('\x01\x01').length - 2);
  });

  it('keeps a normal text answer unchanged, up to two full 64 MiB streams of text', () => {
    expect(outputStrings(Buffer.from('hi\n'), Buffer.from('oops\n'), 'utf8')).toEqual({ stdout: 'hi\n', stderr: 'oops\n' });
    const text = Buffer.alloc(64 * 1024 * 1024, 'a');
    expect(outputStrings(text, text, 'utf8').stdout.length).toBe(text.length);
  });

  it('refuses control-byte output too long as JSON, pointing at base64, instead of a 500', () => {
    const hostile = Buffer.alloc(64 * 1024 * 1024, 1);
    let err: unknown;
    try { JSON.stringify(outputStrings(hostile, hostile, 'utf8')); } catch (e) { err = e; }
    expect(err).toBeInstanceOf(ApiError);
    expect(err).toMatchObject({ status: 413, code: 'payload_too_large' });
    expect((err as ApiError).hint).toMatch(/base64/);
    expect(jsonEscapedLength(hostile) * 2).toBeGreaterThan(MAX_JSON_OUTPUT_CHARS);
    expect(outputStrings(hostile, hostile, 'base64').stdout.length).toBe(Math.ceil(hostile.length / 3) * 4);
  });
});
