/** Every TypeScript fuzz target, by name (test/fuzz/corpus/<name>/ holds its seeds). */
import type { FuzzTarget } from '../lib/target.js';
import { agentFrames } from './agent-frames.js';
import { artifact } from './artifact.js';
import { cudaSession } from './cuda-session.js';
import { layers } from './layers.js';
import { blobGet, httpGet } from './registry-http.js';

export const TARGETS: readonly FuzzTarget[] = [agentFrames, cudaSession, artifact, layers, blobGet, httpGet];

export function targetByName(name: string): FuzzTarget {
  const t = TARGETS.find((x) => x.name === name);
  if (!t) throw new Error(`no fuzz target ${name}; targets: ${TARGETS.map((x) => x.name).join(', ')}`);
  return t;
}
