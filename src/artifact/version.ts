/** smol's own version, recorded in every manifest; read from package.json so it cannot drift. */
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { projectRoot } from '../util/paths.js';

let cached: string | undefined;
export function smolVersion(): string {
  cached ??= (JSON.parse(readFileSync(path.join(projectRoot, 'package.json'), 'utf8')) as { version: string }).version;
  return cached;
}
