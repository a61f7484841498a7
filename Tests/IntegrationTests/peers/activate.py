"""Passes listening sockets to a program the way systemd's socket activation does.

    activate.py [--tcp N] [--unix PATH] [--connected] [--pid self|parent|none] -- PROGRAM ARGS...

Makes N listening TCP sockets on 127.0.0.1:0 (default 1) and one listening Unix socket per
--unix, moves them to fds 3, 4, ... (inheritable), sets LISTEN_FDS to their count,
LISTEN_FDNAMES, and LISTEN_PID to the pid PROGRAM will have (this one: execve keeps the pid,
as systemd's forked child does before it execs), then execs PROGRAM. --connected passes a
connected TCP socket instead (what an Accept=yes unit gives). --pid parent sets LISTEN_PID
to another process (our parent's); --pid none sets no LISTEN_* at all (for `-l fd:3`).
"""
import argparse
import fcntl
import os
import socket


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--tcp", type=int, default=None)
    parser.add_argument("--unix", action="append", default=[])
    parser.add_argument("--connected", action="store_true")
    parser.add_argument("--pid", choices=["self", "parent", "none"], default="self")
    parser.add_argument("program", nargs=argparse.REMAINDER)
    args = parser.parse_args()
    program = args.program[1:] if args.program[:1] == ["--"] else args.program

    sockets = []
    if args.connected:
        server = socket.socket()
        server.bind(("127.0.0.1", 0))
        server.listen(1)
        client = socket.create_connection(server.getsockname())
        accepted, _ = server.accept()
        sockets.append(accepted)
        keep = [server, client]  # noqa: F841 (alive until exec)
    tcp = args.tcp if args.tcp is not None else (0 if args.unix or args.connected else 1)
    for _ in range(tcp):
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        s.listen(16)
        sockets.append(s)
    for path in args.unix:
        s = socket.socket(socket.AF_UNIX)
        s.bind(path)
        s.listen(16)
        sockets.append(s)

    # Out of the way first, so that moving one to fd 3+i cannot close another.
    high = [fcntl.fcntl(s.fileno(), fcntl.F_DUPFD, 100) for s in sockets]
    for i, fd in enumerate(high):
        os.dup2(fd, 3 + i, inheritable=True)
        os.close(fd)

    env = dict(os.environ)
    if args.pid != "none":
        env["LISTEN_PID"] = str(os.getpid() if args.pid == "self" else os.getppid())
        env["LISTEN_FDS"] = str(len(sockets))
        env["LISTEN_FDNAMES"] = ":".join(f"s{i}" for i in range(len(sockets)))
    os.execve(program[0], program, env)


main()
