#!/usr/bin/env bash
# tail-to-websocket.sh: stream the lines a log file gets to a WebSocket, as they come.
#
# Shows a command's output piped into wspipe: `tail -F LOG | wspipe --send-only URL`.
# Each line becomes one text message the moment tail prints it; --send-only means
# wspipe never writes stdout (a server's replies, if any, are dropped); when the input
# ends, wspipe makes sure the server has read every line, closes with 1000 and exits 0.
#
# To be runnable on its own, the script plays the application too: a background writer
# appends COUNT lines to a fresh log file, one every $TAIL_INTERVAL seconds (default
# 0.05), and `tail --pid` stops following once the writer is done, so the pipeline ends.
# In real use the pipeline runs for as long as the service does:
#   tail -n0 -F /var/log/app.log | wspipe --send-only --ping-interval 30 wss://logs.example/ingest
#
# Run it against the local collecting server, from the repository root:
#   .venv/bin/python examples/servers/collect_server.py --port 8769 &
#   examples/tail-to-websocket.sh [URL] [COUNT]
# URL defaults to $COLLECT_URL, else ws://127.0.0.1:8769/; COUNT to 10. The server prints
# the lines it receives (or appends them to its --output FILE).
#
# wspipe is $WSPIPE_BIN if set, else .build/release/wspipe or .build/debug/wspipe of this
# checkout, else wspipe from PATH.
# Exit status: wspipe's (0: every line was sent and the session closed cleanly).
set -u

url=${1:-${COLLECT_URL:-ws://127.0.0.1:8769/}}
count=${2:-10}
interval=${TAIL_INTERVAL:-0.05}

root=$(cd "$(dirname "$0")/.." && pwd)
if [ -n "${WSPIPE_BIN:-}" ]; then wspipe=$WSPIPE_BIN
elif [ -x "$root/.build/release/wspipe" ]; then wspipe=$root/.build/release/wspipe
elif [ -x "$root/.build/debug/wspipe" ]; then wspipe=$root/.build/debug/wspipe
else wspipe=wspipe
fi

work=$(mktemp -d) || exit 1
log=$work/app.log
: >"$log"

# The "application": appends COUNT lines to the log, then exits.
(
    for i in $(seq 1 "$count"); do
        printf 'event %d: user=u%d action=login\n' "$i" "$((i % 7))" >>"$log"
        sleep "$interval"
    done
) &
writer=$!
trap 'kill "$writer" 2>/dev/null; rm -rf "$work"' EXIT

# -n +1: from the first line; -F: follow the file by name (survives log rotation);
# --pid: stop once the writer has exited (after printing what it wrote); -s: check every
# 0.1 s instead of every second.
tail -n +1 -F -s 0.1 --pid="$writer" "$log" 2>/dev/null |
    "$wspipe" --send-only "$url"
status=${PIPESTATUS[1]}

if [ "$status" -eq 0 ]; then
    echo "tail-to-websocket: sent $(wc -l <"$log") lines" >&2
else
    echo "tail-to-websocket: wspipe exited with status $status" >&2
fi
exit "$status"
