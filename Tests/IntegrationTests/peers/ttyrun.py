"""Runs a command with a pseudo-terminal as its stdin and "types" lines into it, like a
person at a terminal (not a peer: a helper of LocalInputTests).

    ttyrun.py [--socket] [--wait-echo] [--line TEXT]... [--eof] -- COMMAND ARGS...

Each --line TEXT is typed followed by Enter (the terminal is in its default canonical
mode, so the command reads one line per read). With --wait-echo the next line is typed
only after the previous one came back on the command's stdout (an echo server), which
shows the command sends a line as soon as it is typed. --eof types Ctrl-D at the start of
a line (end of input) at the end. The command's stdout is copied to ours; its stderr is
ours. With --socket, stdin is one end of a Unix stream socketpair instead (each line one
write; --eof shuts down our end for writing). Exits with the command's status (128 + N if killed by signal N); 99 if an echo did
not come within 10 s (the command is then killed).
"""
import argparse
import os
import pty
import select
import socket
import subprocess
import sys
import termios
import time


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--line", action="append", default=[])
    parser.add_argument("--wait-echo", action="store_true")
    parser.add_argument("--eof", action="store_true")
    parser.add_argument("--socket", action="store_true")
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args()
    command = args.command[1:] if args.command[:1] == ["--"] else args.command

    if args.socket:
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        master, slave = ours.detach(), theirs.detach()
    else:
        master, slave = pty.openpty()
        # No echo of typed characters back to the master: we do not read the master side.
        attributes = termios.tcgetattr(slave)
        attributes[3] &= ~termios.ECHO
        termios.tcsetattr(slave, termios.TCSANOW, attributes)
    child = subprocess.Popen(command, stdin=slave, stdout=subprocess.PIPE, close_fds=True)
    os.close(slave)
    output = bytearray()
    out_fd = child.stdout.fileno()

    def read_output(timeout):
        ready, _, _ = select.select([out_fd], [], [], timeout)
        if not ready:
            return False
        data = os.read(out_fd, 65536)
        if not data:
            return None
        output.extend(data)
        return True

    status = None
    for line in args.line:
        os.write(master, line.encode() + b"\n")
        if args.wait_echo:
            wanted = line.encode() + b"\n"
            deadline = time.monotonic() + 10
            while not output.endswith(wanted) and time.monotonic() < deadline:
                if read_output(max(0.0, deadline - time.monotonic())) is None:
                    break
            if not output.endswith(wanted):
                sys.stderr.write("ttyrun: no echo of %r within 10 s\n" % line)
                child.kill()
                status = 99
                break
    if status is None and args.eof and args.socket:
        socket.socket(fileno=os.dup(master)).shutdown(socket.SHUT_WR)
    elif status is None and args.eof:
        os.write(master, b"\x04")  # VEOF (Ctrl-D)
    while status is None:
        result = read_output(10)
        if result is None:
            break
    child.wait()
    if status is None:
        status = child.returncode if child.returncode >= 0 else 128 - child.returncode
    sys.stdout.buffer.write(bytes(output))
    sys.stdout.flush()
    os.close(master)
    sys.exit(status)


if __name__ == "__main__":
    main()
