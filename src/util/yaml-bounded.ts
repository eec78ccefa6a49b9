/**
 * YAML for documents a user names but may not have written (a Smolfile or rollout manifest from a repository):
 * the work of reading one is bounded before it starts. The yaml package keeps ~0.5-1.5 KB per token and
 * compares every pair of keys in a map, so 8 MiB of "1," took 3.9 GB and a 33,000-key map 10 s. Here:
 * - tokens are counted first with yaml's own lexer (cheap: 8 MiB in 0.3 s, constant memory);
 * - duplicate keys are found in one pass instead of yaml's pairwise check;
 * - aliases are bounded: a "billion laughs" document (anchors of anchors) is tiny as text and enormous
 *   expanded. yaml stops past `maxAliasCount` with a ReferenceError; this names the file and exits 65.
 */
import { createRequire } from 'node:module';
import type { Document, LineCounter } from 'yaml';
import { ValidationError } from '../errors/index.js';

// loaded on first use: yaml takes ~35 ms to load and most commands never read YAML
const yaml = () => createRequire(import.meta.url)('yaml') as typeof import('yaml');

/** yaml's own default, stated so that a change in the package cannot loosen it. */
export const MAX_YAML_ALIAS_COUNT = 100;
/** At most ~400 MB and ~2 s to read (measured near the limit: 14,500 samples of 500 bytes 390 MB; 82,000 one-character scalars 190 MB). */
export const MAX_YAML_TOKENS = 250_000;

/** parseDocument, refusing a text with more than MAX_YAML_TOKENS tokens; duplicate keys are errors, as in yaml. */
export function parseYamlBounded(text: string, file: string, lineCounter: LineCounter, prettyErrors = false): Document {
  const y = yaml();
  let tokens = 0;
  for (const _ of new y.Lexer().lex(text)) {
    if (++tokens > MAX_YAML_TOKENS) {
      throw new ValidationError(`${file} is too large to read: more than ${MAX_YAML_TOKENS} YAML tokens`, [], {
        where: file, hint: 'Make it smaller: a rollout\'s samples can be split into several rollouts, or made with "generate".',
      });
    }
  }
  const doc = y.parseDocument(text, { lineCounter, prettyErrors, uniqueKeys: false });
  if (doc.errors.length) return doc;
  // an explicit stack: a deeply nested document must not overflow this walk either
  const stack: unknown[] = [doc.contents];
  while (stack.length) {
    const node = stack.pop();
    if (y.isMap(node)) {
      const seen = new Set<unknown>();
      for (const pair of node.items) {
        const key = y.isScalar(pair.key) ? pair.key.value : undefined;
        if (key !== undefined && seen.has(key)) {
          const at = (pair.key as { range?: [number, number] }).range ?? [0, 0];
          const err = new y.YAMLParseError([at[0], at[1]], 'DUPLICATE_KEY', `Map keys must be unique ("${String(key)}" twice)`);
          err.linePos = [lineCounter.linePos(at[0])];
          doc.errors.push(err);
          return doc;
        }
        seen.add(key);
        stack.push(pair.value);
      }
    } else if (y.isSeq(node)) stack.push(...node.items);
  }
  return doc;
}

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
