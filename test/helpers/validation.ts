import { expect } from 'vitest';
import { ValidationError } from '../../src/errors/index.js';

/** The field issues a parse refuses with: it must throw a ValidationError. */
export function validationIssues(parse: () => unknown): { path: string; message: string }[] {
  try {
    parse();
  } catch (err) {
    expect(err).toBeInstanceOf(ValidationError);
    return (err as ValidationError).issues;
  }
  throw new Error('expected a ValidationError');
}
