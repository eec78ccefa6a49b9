/**
 * YAML documents to plain values with aliases bounded: a "billion laughs" document (anchors of anchors)
 * is tiny as text and enormous once expanded. The yaml package stops expanding past `maxAliasCount`
 * (counted in nodes an alias stands for) and throws a ReferenceError; this names the file and makes it exit 65.
 */
import type { Document } from 'yaml';
import { ValidationError } from '../errors/index.js';

/** yaml's own default, stated so that a change in the package cannot loosen it. */
export const MAX_YAML_ALIAS_COUNT = 100;

export function yamlToJs(doc: Document, file: string): unknown {
  try {
    return doc.toJS({ maxAliasCount: MAX_YAML_ALIAS_COUNT });
  } catch (err) {
    // yaml reports alias problems (too many, or one naming no anchor) as ReferenceErrors, only at this step
    if (!(err instanceof ReferenceError)) throw err;
    if (!/excessive alias count/i.test(err.message)) throw new ValidationError(`${file} is not valid YAML: ${err.message}`, [], { where: file });
    throw new ValidationError(`${file} is invalid: its YAML aliases expand too far`, [{ path: '(root)', message: 'aliases (*name) that repeat anchors holding other aliases expand past what smol reads; write the values out' }], {
      where: file, hint: 'A few aliases of small values are fine; nested aliases that multiply (a "billion laughs" document) are refused.',
    });
  }
}
