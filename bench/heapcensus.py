#!/usr/bin/env python3
"""What one idle server connection holds on the heap, block by block: runs a server under
bench/heapcensus.c (LD_PRELOAD), opens `N` idle WebSocket connections with
bench/server_load.py (after 100 to warm up), and prints the live blocks that grew, per
allocating call stack, divided by N (blocks and usable bytes per connection).

    bench/heapcensus.py [--connections 1000] [--frames 4] -- .build/release/wspipe -l PORT --echo -q

PORT in the command is replaced by a free port. Counting, not timing (a backtrace per malloc)."""
import argparse, bisect, os, subprocess, sys, tempfile, time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RUNTIME = ("swift_slowAlloc", "swift_allocObject", "swift_allocBox", "_swift_allocObject", "swift::", "operator new",
           "_ContiguousArrayBuffer", "_allocateUninitialized", "__libc", "$ss", "_s")


def free_port():
    import socket
    s = socket.socket(); s.bind(("127.0.0.1", 0)); port = s.getsockname()[1]; s.close()
    return port


def symbols(binary):
    out = subprocess.run(["nm", "-n", "--defined-only", binary], capture_output=True, text=True).stdout
    table = []
    for line in out.splitlines():
        parts = line.split()
        if len(parts) == 3 and parts[1] in "tTwW":
            table.append((int(parts[0], 16), parts[2]))
    names = [name for _, name in table]
    demangled = subprocess.run(["swift", "demangle", "--simplified", "--compact"], input="\n".join(names),
                               capture_output=True, text=True).stdout.splitlines()
    if len(demangled) != len(names):
        demangled = names
    return [a for a, _ in table], demangled


def census(path):
    sites = {}
    for line in open(path):
        head, _, frames = line.partition("|")
        count, size, usable = map(int, head.split())
        sites[frames.strip()] = (count, size, usable)
    return sites


def dump(trigger, out, n):
    open(trigger, "w").close()
    while os.path.exists(trigger):
        time.sleep(0.05)
    time.sleep(0.1)
    return census(f"{out}.{n}")


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--connections", type=int, default=1000)
    parser.add_argument("--frames", type=int, default=4, help="frames of our own code shown per stack")
    parser.add_argument("command", nargs="+")
    args = parser.parse_args()
    work = tempfile.mkdtemp()
    shim = os.path.join(work, "heapcensus.so")
    subprocess.run(["cc", "-O2", "-shared", "-fPIC", "-o", shim, os.path.join(ROOT, "bench/heapcensus.c"), "-ldl", "-lpthread"],
                   check=True)
    port = free_port()
    command = [word.replace("PORT", str(port)) for word in args.command]
    trigger, out = os.path.join(work, "trigger"), os.path.join(work, "census")
    env = dict(os.environ, LD_PRELOAD=shim, CENSUS_TRIGGER=trigger, CENSUS_OUT=out)
    server = subprocess.Popen(command, env=env, stdin=subprocess.PIPE)  # --broadcast ends at end of input
    load = [sys.executable, os.path.join(ROOT, "bench/server_load.py"), "idle", str(port)]
    try:
        import socket
        for _ in range(200):
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                time.sleep(0.05)
        warm = subprocess.Popen(load + ["100"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        warm.stdout.readline()
        time.sleep(0.5)
        before = dump(trigger, out, 1)
        idle = subprocess.Popen(load + [str(args.connections)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        line = idle.stdout.readline().split()
        time.sleep(1)
        after = dump(trigger, out, 2)
        opened = int(line[1]) if len(line) == 2 else 0
        for child in (idle, warm):
            child.stdin.write("\n"); child.stdin.flush(); child.wait(timeout=60)
    finally:
        server.kill(); server.wait()
    if not opened:
        sys.exit("no connection opened")
    addresses, names = symbols(os.path.realpath(command[0]))
    binary = os.path.basename(command[0])

    def name(frame):
        obj, _, offset = frame.partition("+0x")
        if obj != binary or not offset:
            return frame
        i = bisect.bisect_right(addresses, int(offset, 16)) - 1
        return names[i] if i >= 0 else frame

    rows = []
    for stack, (count, size, usable) in after.items():
        c0, s0, u0 = before.get(stack, (0, 0, 0))
        if count - c0 <= 0 or (count - c0) * 10 < opened:
            continue
        frames = [name(f) for f in stack.split()]
        own = [f for f in frames if not f.startswith(RUNTIME) and "+0x" not in f][: args.frames]
        rows.append(((count - c0) / opened, (size - s0) / opened, (usable - u0) / opened, " < ".join(own)))
    rows.sort(key=lambda r: -r[2])
    print(f"{opened} connections; per connection: blocks, requested bytes, usable bytes, allocated by")
    for blocks, size, usable, where in rows:
        print(f"{blocks:6.2f} {size:8.1f} {usable:8.1f}  {where}")
    total = sum(r[2] for r in rows)
    print(f"total {sum(r[0] for r in rows):.2f} blocks, {sum(r[1] for r in rows):.1f} requested, {total:.1f} usable bytes "
          f"(+{sum(r[0] for r in rows) * 8:.0f} of malloc headers)")


if __name__ == "__main__":
    main()
