#!/usr/bin/env bash
# binary-transfer.sh: send a file through an echo server with --binary and check that
# exactly the same bytes came back.
#
# Shows binary mode: stdin goes out as binary messages (at most --chunk-size bytes each),
# and every message received is written raw with nothing added, so standard output is the
# byte-exact concatenation of the payloads. NUL, CR, LF and bytes that are not UTF-8 all
# survive; nothing is translated or re-encoded.
#
# Run it against the local echo server, from the repository root:
#   .venv/bin/python examples/servers/echo_server.py --port 8766 &
#   examples/binary-transfer.sh [URL] [FILE]
# URL defaults to $ECHO_URL, else ws://127.0.0.1:8766/. Without FILE a 3 MiB file of
# random bytes is made and sent. $CHUNK_SIZE sets --chunk-size (default 64K).
#
# wspipe is $WSPIPE_BIN if set, else .build/release/wspipe or .build/debug/wspipe of this
# checkout, else wspipe from PATH.
# Exit status: 0 the checksums match; 1 they differ (or a local problem); wspipe's status
# if wspipe failed.
set -u

url=${1:-${ECHO_URL:-ws://127.0.0.1:8766/}}
file=${2:-}
chunk=${CHUNK_SIZE:-64K}

root=$(cd "$(dirname "$0")/.." && pwd)
if [ -n "${WSPIPE_BIN:-}" ]; then wspipe=$WSPIPE_BIN
elif [ -x "$root/.build/release/wspipe" ]; then wspipe=$root/.build/release/wspipe
elif [ -x "$root/.build/debug/wspipe" ]; then wspipe=$root/.build/debug/wspipe
else wspipe=wspipe
fi

work=$(mktemp -d) || exit 1
trap 'rm -rf "$work"' EXIT
if [ -z "$file" ]; then
    file=$work/random.bin
    head -c $((3 * 1024 * 1024)) /dev/urandom >"$file" || exit 1
fi
if [ ! -r "$file" ]; then
    echo "binary-transfer: cannot read $file" >&2
    exit 1
fi

"$wspipe" --binary --chunk-size "$chunk" "$url" <"$file" >"$work/received"
status=$?
if [ "$status" -ne 0 ]; then
    echo "binary-transfer: wspipe exited with status $status" >&2
    exit "$status"
fi

sent=$(sha256sum <"$file" | cut -d' ' -f1)
received=$(sha256sum <"$work/received" | cut -d' ' -f1)
printf 'sent     %s  %s bytes\n' "$sent" "$(wc -c <"$file")"
printf 'received %s  %s bytes\n' "$received" "$(wc -c <"$work/received")"
if [ "$sent" = "$received" ]; then
    echo "checksums match"
    exit 0
fi
echo "checksums DIFFER" >&2
exit 1
