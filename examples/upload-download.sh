#!/usr/bin/env bash
# upload-download.sh: upload a file as ONE binary message, download it again, and check
# both ways with SHA-256.
#
# Shows whole-input messages: --binary --whole-input sends all of stdin, up to its end,
# as a single binary message (in fragments of --chunk-size on the wire, reassembled by
# the server; never split into several messages, nothing dropped), which is what an
# upload endpoint expects. -1 (--one-message) sends that one message, prints the one
# reply and closes; -n 1 --receive-only reads one message without sending any. The bytes
# come back exactly: NUL, CR, LF and bytes that are not UTF-8 included.
#
# Run it against the local storage server, from the repository root:
#   .venv/bin/python examples/servers/storage_server.py --port 8768 &
#   examples/upload-download.sh [URL] [FILE]
# URL is the server's base, defaulting to $STORAGE_URL, else ws://127.0.0.1:8768/; the
# file goes to URL/upload/NAME and comes back from URL/download/NAME. Without FILE a
# 5 MiB file of random bytes is made and sent. $CHUNK_SIZE sets the size of the upload's
# fragments (--chunk-size, default 64K).
#
# wspipe is $WSPIPE_BIN if set, else .build/release/wspipe or .build/debug/wspipe of this
# checkout, else wspipe from PATH.
# Exit status: 0 both checksums match; 1 one differs (or a local problem); wspipe's status
# if wspipe failed.
set -u

base=${1:-${STORAGE_URL:-ws://127.0.0.1:8768/}}
base=${base%/}
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
    head -c $((5 * 1024 * 1024)) /dev/urandom >"$file" || exit 1
fi
if [ ! -r "$file" ]; then
    echo "upload-download: cannot read $file" >&2
    exit 1
fi
name=$(basename "$file" | tr -c 'A-Za-z0-9._-' '_')
local_sum=$(sha256sum <"$file" | cut -d' ' -f1)
size=$(wc -c <"$file")

# Upload: the whole file as one binary message; the reply is one JSON text message
# (written raw in binary mode, without a newline).
reply=$("$wspipe" --binary --whole-input --chunk-size "$chunk" --one-message --timeout 60 \
                 "$base/upload/$name" <"$file")
status=$?
if [ "$status" -ne 0 ]; then
    echo "upload-download: upload failed, wspipe exited with status $status" >&2
    exit "$status"
fi
stored_bytes=$(printf '%s' "$reply" | jq -r '.bytes')
stored_sum=$(printf '%s' "$reply" | jq -r '.sha256')
printf 'uploaded   %s  %s bytes (server: %s bytes)\n' "$local_sum" "$size" "$stored_bytes"
if [ "$stored_sum" != "$local_sum" ]; then
    echo "upload-download: the server stored different bytes: $reply" >&2
    exit 1
fi

# Download: one binary message, written raw.
"$wspipe" --binary --receive-only -n 1 --timeout 60 "$base/download/$name" >"$work/downloaded"
status=$?
if [ "$status" -ne 0 ]; then
    echo "upload-download: download failed, wspipe exited with status $status" >&2
    exit "$status"
fi
downloaded_sum=$(sha256sum <"$work/downloaded" | cut -d' ' -f1)
printf 'downloaded %s  %s bytes\n' "$downloaded_sum" "$(wc -c <"$work/downloaded")"
if [ "$downloaded_sum" = "$local_sum" ]; then
    echo "checksums match"
    exit 0
fi
echo "checksums DIFFER" >&2
exit 1
