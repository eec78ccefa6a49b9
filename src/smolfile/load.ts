/** Reads a Smolfile and maps schema errors back to YAML line numbers so users can find them. */
import path from 'node:path';
import { createRequire } from 'node:module';
import type { Node } from 'yaml';
import { NotFoundError, ValidationError, type Issue } from '../errors/index.js';
import { readCapped, sizeLabel } from '../util/read-capped.js';
import { parseYamlBounded, yamlToJs } from '../util/yaml-bounded.js';
import { smolfileSchema, type Smolfile } from './schema.js';
import { isTomlSmolfile, parseSmolvmToml } from './toml.js';

export interface LoadedSmolfile { file: string; dir: string; spec: Smolfile }

/** A machine's declaration is a page or two; a larger file is a mistake or an attack on the parser (docs/exit-codes.md). */
export const SMOLFILE_MAX_BYTES = 256 * 1024;

const tooLarge = (file: string, where = file) => new ValidationError(`${file} is larger than ${sizeLabel(SMOLFILE_MAX_BYTES)}`, [], {
  where, hint: 'A Smolfile declares one machine; keep long scripts in files the machine reads (a volume or its image).',
});

// yaml takes ~35 ms to load, and most commands (smol run without -s) never read a Smolfile
const yaml = () => createRequire(import.meta.url)('yaml') as typeof import('yaml');

function nodeAt(root: Node | null, p: PropertyKey[]): Node | null {
  let node: Node | null = root;
  for (const key of p) {
    if (yaml().isMap(node)) {
      const pair = node.items.find((it) => (it.key as { value?: unknown })?.value === key);
      node = (pair?.value as Node | undefined) ?? (pair?.key as Node | undefined) ?? null;
    } else if (yaml().isSeq(node) && typeof key === 'number') {
      node = (node.items[key] as Node | undefined) ?? null;
    } else return node;
  }
  return node;
}

function keyNode(root: Node | null, parent: PropertyKey[], key: string): Node | null {
  const n = nodeAt(root, parent);
  if (!yaml().isMap(n)) return null;
  return (n.items.find((it) => (it.key as { value?: unknown })?.value === key)?.key as Node | undefined) ?? null;
}

export function parseSmolfile(text: string, file = 'Smolfile'): Smolfile {
  if (Buffer.byteLength(text) > SMOLFILE_MAX_BYTES) throw tooLarge(file);
  const lc = new (yaml().LineCounter)();
  const doc = parseYamlBounded(text, file, lc);
  const line = (n: Node | null | undefined) => (n?.range ? lc.linePos(n.range[0]).line : undefined);
  // smolvm's TOML Smolfile loads wherever a YAML one does (toml.ts maps it)
  if (isTomlSmolfile(file, text, () => !doc.errors.length && yaml().isMap(doc.contents))) return parseTomlSmolfile(text, file);
  if (doc.errors.length) {
    const e = doc.errors[0];
    const pos = e.linePos?.[0];
    throw new ValidationError(`${file} is not valid YAML: ${e.message.split('\n')[0]}`, [], { where: pos ? `${file}:${pos.line}` : file });
  }
  const raw = yamlToJs(doc, file) ?? {};
  const res = smolfileSchema.safeParse(raw);
  if (res.success) return res.data;
  const issues: Issue[] = [];
  for (const i of res.error.issues) {
    if (i.code === 'unrecognized_keys') {
      for (const k of i.keys) {
        const ln = line(keyNode(doc.contents as Node, i.path, k));
        const at = [...i.path, k].join('.');
        issues.push({ path: `${file}:${ln ?? '?'} ${at}`, message: `unknown key "${k}"; see Smolfile.example for the fields` });
      }
      continue;
    }
    const ln = line(nodeAt(doc.contents as Node, i.path));
    issues.push({ path: `${file}:${ln ?? '?'} ${i.path.join('.') || '(root)'}`, message: i.message });
  }
  throw new ValidationError(`${file} is invalid`, issues, { where: file, hint: 'Fix the fields listed above; every field is documented in Smolfile.example.' });
}

/** A TOML Smolfile: mapped to the YAML shape, then held to the same schema (its errors name the smol key). */
export function parseTomlSmolfile(text: string, file = 'Smolfile.toml'): Smolfile {
  const res = smolfileSchema.safeParse(parseSmolvmToml(text, file));
  if (res.success) return res.data;
  throw new ValidationError(`${file} is invalid`, res.error.issues.map((i) => ({ path: `${file} ${i.path.join('.') || '(root)'}`, message: i.message })), {
    where: file, hint: 'Fix the values listed above (smol names them by its own keys; docs/smolfile-toml.md maps them to smolvm\'s).',
  });
}

/** The Smolfile's text, read no further than SMOLFILE_MAX_BYTES (a named /dev/zero or FIFO cannot fill memory). */
export function readSmolfileText(file: string, hint = 'Pass an existing file with -s, or copy Smolfile.example.'): string {
  let text: string | null;
  try {
    text = readCapped(file, SMOLFILE_MAX_BYTES);
  } catch {
    throw new NotFoundError(`Smolfile not found: ${file}`, { hint });
  }
  if (text === null) throw tooLarge(file);
  return text;
}

export function loadSmolfile(file: string): LoadedSmolfile {
  const abs = path.resolve(file);
  return { file: abs, dir: path.dirname(abs), spec: parseSmolfile(readSmolfileText(abs), path.basename(abs)) };
}
