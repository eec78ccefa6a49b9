#!/usr/bin/env python3
"""Runs a command on a real pseudo-terminal, as a person's terminal would, and reports the terminal's
mode while the command runs. Prints one JSON line: {"icanon": bool, "echo": bool, "output": str, "code": int}.
  pty-probe.py MARKER INPUT -- command...
Waits for MARKER in the output, reads the line discipline's ICANON/ECHO flags, types INPUT, then
collects output until the command exits (at most 60 s). PTY_SIZE=ROWSxCOLS sets the window (default 24x80)."""
import fcntl, json, os, pty, select, struct, sys, termios, time

def read_more(fd):
    """The next chunk of output, or None once the terminal is closed."""
    try:
        return os.read(fd, 65536) or None
    except OSError:
        return None

def main():
    marker, typed = sys.argv[1].encode(), sys.argv[2].encode()
    argv = sys.argv[sys.argv.index('--') + 1:]
    pid, fd = pty.fork()
    if pid == 0:
        os.execvp(argv[0], argv)
    rows, cols = (int(n) for n in os.environ.get('PTY_SIZE', '24x80').split('x'))  # 0x0: a console that reports no size
    fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack('HHHH', rows, cols, 0, 0))
    out, state, deadline, reaped = b'', None, time.time() + 60, None
    while time.time() < deadline:
        done, st = os.waitpid(pid, os.WNOHANG)
        if done:
            reaped = st
            break
        if select.select([fd], [], [], 0.1)[0]:
            chunk = read_more(fd)
            if chunk is None:
                break
            out += chunk
        if state is None and marker in out:
            time.sleep(0.5)  # let anything that would flip the mode back (a spinner's stop) do so
            lflag = termios.tcgetattr(fd)[3]
            state = {'icanon': bool(lflag & termios.ICANON), 'echo': bool(lflag & termios.ECHO)}
            os.write(fd, typed)
    while reaped is not None and select.select([fd], [], [], 0.1)[0]:  # what it wrote just before it exited
        chunk = read_more(fd)
        if chunk is None:
            break
        out += chunk
    done, status = (pid, reaped) if reaped is not None else os.waitpid(pid, os.WNOHANG)
    if not done:
        os.kill(pid, 9)
        _, status = os.waitpid(pid, 0)
    print(json.dumps({**(state or {'icanon': None, 'echo': None}), 'output': out.decode('utf-8', 'replace')[-4000:],
                      'code': os.waitstatus_to_exitcode(status)}))

main()
