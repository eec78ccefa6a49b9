/**
 * Writes docs/openapi.json from the API's route table and zod schemas (the document `smol serve openapi` prints).
 * Usage: gen-openapi.ts [--check]   (--check: exit 1 when the checked-in file is stale, write nothing)
 */
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { openApiText } from '../src/cli/commands/serve.js';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const file = 'docs/openapi.json';
const want = openApiText();
const have = existsSync(path.join(root, file)) ? readFileSync(path.join(root, file), 'utf8') : '';

if (process.argv.includes('--check')) {
  if (have !== want) console.error(`stale generated file: ${file} (edit src/api/schemas or src/api/routes, then run: npm run gen:openapi)`);
  process.exit(have === want ? 0 : 1);
}
if (have !== want) {
  writeFileSync(path.join(root, file), want);
  console.log(`wrote ${file}`);
}
