/**
 * Kernel parameter layouts from PTX text: each `.entry name ( .param … , … )` lists its parameters in
 * order, and the driver places each at the next offset that suits its alignment (the explicit
 * `.align N` of a byte-array aggregate, else the size of its scalar type).
 */
import { GpuError } from '../../../errors/index.js';
import { LAYOUT_FAILED, type ParamSlot } from './types.js';

const SCALAR: Record<string, number> = {
  '.b8': 1, '.u8': 1, '.s8': 1,
  '.b16': 2, '.u16': 2, '.s16': 2, '.f16': 2, '.bf16': 2,
  '.b32': 4, '.u32': 4, '.s32': 4, '.f32': 4, '.f16x2': 4, '.bf16x2': 4,
  '.b64': 8, '.u64': 8, '.s64': 8, '.f64': 8,
  '.b128': 16,
};
// Qualifiers of a pointer parameter (`.ptr .global .align 16`) describe what it points to, not the slot.
const POINTEE_SPACES = new Set(['.global', '.const', '.local', '.shared']);

const bad = (why: string) => new GpuError(`${LAYOUT_FAILED}PTX ${why}`);

/** Keeps string literals (a `.file` path may hold "//" or "/*") and drops comments. An unclosed
 *  string or comment runs to the end of its line or of the text, so hostile text cannot make the
 *  scan quadratic. */
function stripComments(text: string): string {
  return text.replace(/"(?:[^"\\\n]|\\.)*"?|\/\/[^\n]*|\/\*[\s\S]*?(?:\*\/|$)/g, (m) => (m.startsWith('"') ? m : ' '));
}

function slot(kernel: string, decl: string): { size: number; align: number } {
  const tokens = decl.match(/\.[A-Za-z0-9_]+|\[\s*\d*\s*\]|\d+|[A-Za-z_$%][\w$%]*/g) ?? [];
  if (tokens[0] !== '.param') throw bad(`parameter "${decl.trim()}" of ${kernel} is not a .param`);
  let align: number | undefined, unit: number | undefined, count = 1, pointer = false;
  for (let i = 1; i < tokens.length; i++) {
    const t = tokens[i];
    if (t === '.align') {
      const n = Number(tokens[++i]);
      if (!(n > 0 && (n & (n - 1)) === 0)) throw bad(`parameter "${decl.trim()}" of ${kernel} has a bad .align`);
      if (!pointer) align = n;
    } else if (t === '.ptr') pointer = true;
    else if (pointer && POINTEE_SPACES.has(t)) continue;
    else if (t in SCALAR) unit = SCALAR[t];
    else if (t.startsWith('[')) {
      count = Number(t.slice(1, -1).trim());
      if (!(count > 0)) throw bad(`parameter "${decl.trim()}" of ${kernel} is an array without a size`);
    } else if (t.startsWith('.')) throw bad(`parameter type ${t} of ${kernel} is not supported`);
  }
  if (unit === undefined) throw bad(`parameter "${decl.trim()}" of ${kernel} has no type`);
  return { size: unit * count, align: align ?? unit };
}

/** Every `.entry` of a PTX module with its parameters. Throws GpuError on a declaration it cannot size. */
export function ptxParams(text: string): Map<string, ParamSlot[]> {
  const out = new Map<string, ParamSlot[]>();
  // The closing parenthesis is optional in the pattern so that an unclosed list fails once, here,
  // instead of making the regex retry from every later `.entry`.
  const entry = /\.entry\s+([A-Za-z_$%][\w$%]*)\s*(?:\(([^)]*)(\)?))?/g;
  for (const m of stripComments(text).matchAll(entry)) {
    const kernel = m[1], list = (m[2] ?? '').trim();
    if (m[2] !== undefined && !m[3]) throw bad(`parameter list of ${kernel} is not closed`);
    let offset = 0;
    const slots: ParamSlot[] = [];
    for (const decl of list ? list.split(',') : []) {
      const { size, align } = slot(kernel, decl);
      offset = Math.ceil(offset / align) * align;
      slots.push({ offset, size });
      offset += size;
    }
    out.set(kernel, slots);
  }
  return out;
}
