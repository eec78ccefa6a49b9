/**
 * Machine labels (Docker's `--label K=V` and `--filter label=…`): free-form key/value strings a user attaches
 * to a machine to find it again. Pure parsing and matching; the registry stores them (vm/store/machines.ts).
 */
import { z } from 'zod';
import { ValidationError, type Issue } from '../errors/index.js';

/** Docker accepts nearly any key; ours stay printable and shell-friendly so `ls --filter` needs no quoting. */
const LABEL_KEY = /^[A-Za-z0-9][A-Za-z0-9._/-]{0,127}$/;
const KEY_RULE = 'label keys are 1–128 letters, digits, ".", "_", "/" or "-", starting with a letter or digit';

export const labelValueSchema = z.string().max(1024, 'label values are at most 1024 characters').refine((v) => !/[\0\n]/.test(v), 'label values cannot hold newlines or NUL');
export const labelsSchema = z.record(z.string().regex(LABEL_KEY, KEY_RULE), z.union([labelValueSchema, z.number(), z.boolean()]).transform(String));

/** `--label K=V` (repeatable, later wins); `--label K` is K with an empty value, as in Docker. */
export function parseLabelFlags(list: readonly string[] | undefined, flag = '--label'): Record<string, string> {
  const out: Record<string, string> = {};
  const issues: Issue[] = [];
  for (const e of list ?? []) {
    const i = e.indexOf('=');
    const [k, v] = i < 0 ? [e, ''] : [e.slice(0, i), e.slice(i + 1)];
    if (!LABEL_KEY.test(k)) issues.push({ path: flag, message: `"${e}": ${KEY_RULE}` });
    else if (!labelValueSchema.safeParse(v).success) issues.push({ path: flag, message: `"${k}": ${labelValueSchema.safeParse(v).error?.issues[0]?.message}` });
    else out[k] = v;
  }
  if (issues.length) throw new ValidationError('invalid label', issues, { hint: 'Write labels as KEY=VALUE, e.g. --label team=infra.' });
  return out;
}

export interface LabelFilter { key: string; value?: string }

/** `--filter label=K` or `label=K=V` (repeatable; all must match, as in `docker ps`). */
export function parseFilters(list: readonly string[] | undefined): LabelFilter[] {
  return (list ?? []).map((f) => {
    const m = /^([a-z]+)=(.*)$/.exec(f);
    if (!m || m[1] !== 'label') {
      throw new ValidationError('invalid filter', [{ path: '--filter', message: `"${f}": the filters are label=KEY and label=KEY=VALUE` }], { hint: 'Example: smol machine ls --filter label=team=infra' });
    }
    const i = m[2].indexOf('=');
    const key = i < 0 ? m[2] : m[2].slice(0, i);
    if (!LABEL_KEY.test(key)) throw new ValidationError('invalid filter', [{ path: '--filter', message: `"${f}": ${KEY_RULE}` }]);
    return i < 0 ? { key } : { key, value: m[2].slice(i + 1) };
  });
}

export function matchesLabels(labels: Record<string, string>, filters: readonly LabelFilter[]): boolean {
  return filters.every((f) => Object.hasOwn(labels, f.key) && (f.value === undefined || labels[f.key] === f.value));
}
