/**
 * Text a guest wrote, made safe to print on the user's terminal. A guest is root in its VM and writes any
 * bytes it likes to its console or its output; printed raw, escape sequences act on the host's terminal:
 * OSC 52 sets the clipboard, OSC 0/2 the window title, others move the cursor to hide or fake lines.
 * Every C0 and C1 control but newline and tab, DEL, and the bidirectional overrides (which reorder what is
 * shown) is printed as a visible escape (`\x1b`, `\u009b`), so the text still reads and nothing acts.
 * Colours (SGR) are escaped too: telling a harmless sequence from a harmful one means parsing them all.
 */
import { StringDecoder } from 'node:string_decoder';

// C0 but \t and \n, DEL, C1, ALM, LRM/RLM, LRE..RLO, LRI..PDI
// eslint-disable-next-line no-control-regex
const UNSAFE = /[\x00-\x08\x0b-\x1f\x7f\u0080-\u009f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]/g;

const visible = (c: string): string => {
  const n = c.charCodeAt(0);
  return n < 0x80 ? `\\x${n.toString(16).padStart(2, '0')}` : `\\u${n.toString(16).padStart(4, '0')}`;
};

/** `s` with every unsafe character shown as an escape; "\r\n" (a serial console's line end) becomes "\n". */
export function terminalSafe(s: string): string {
  return s.replace(/\r\n/g, '\n').replace(UNSAFE, visible);
}

/**
 * The same for a stream of bytes: a UTF-8 character or a "\r\n" split across two reads is handled as one.
 * `write` returns what may be printed now; `end` the rest.
 */
export class TerminalSafeDecoder {
  private readonly utf8 = new StringDecoder('utf8');
  private heldCr = false;

  write(chunk: Buffer): string {
    return this.safe(this.utf8.write(chunk), false);
  }

  end(): string {
    return this.safe(this.utf8.end(), true);
  }

  private safe(text: string, last: boolean): string {
    let s = this.heldCr ? `\r${text}` : text;
    this.heldCr = !last && s.endsWith('\r');
    if (this.heldCr) s = s.slice(0, -1);
    return terminalSafe(s);
  }
}
