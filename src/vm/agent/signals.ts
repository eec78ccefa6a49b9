/** Linux signal numbers (the guest is Linux whatever the host is), by name and back. */
const NAMES = [
  'HUP', 'INT', 'QUIT', 'ILL', 'TRAP', 'ABRT', 'BUS', 'FPE', 'KILL', 'USR1', 'SEGV', 'USR2', 'PIPE', 'ALRM', 'TERM',
  'STKFLT', 'CHLD', 'CONT', 'STOP', 'TSTP', 'TTIN', 'TTOU', 'URG', 'XCPU', 'XFSZ', 'VTALRM', 'PROF', 'WINCH', 'IO',
  'PWR', 'SYS',
];

/** 'SIGINT', 'INT', 'int' or 2 → 2. Throws RangeError for anything else. */
export function signalNumber(sig: string | number): number {
  if (typeof sig === 'number') {
    if (Number.isInteger(sig) && sig >= 1 && sig <= 64) return sig;
  } else {
    const name = sig.toUpperCase().replace(/^SIG/, '');
    const i = NAMES.indexOf(name);
    if (i >= 0) return i + 1;
    const rt = /^RTMIN\+(\d+)$/.exec(name);
    if (rt && 34 + Number(rt[1]) <= 64) return 34 + Number(rt[1]);
  }
  throw new RangeError(`unknown signal ${JSON.stringify(sig)}`);
}

/** 2 → 'SIGINT'; real-time signals as 'SIGRTMIN+n'. */
export function signalName(n: number): string {
  if (n >= 1 && n <= NAMES.length) return `SIG${NAMES[n - 1]}`;
  if (n >= 34 && n <= 64) return `SIGRTMIN+${n - 34}`;
  return `SIG${n}`;
}
