#!/usr/bin/env bash
# subscribe-read-n.sh: subscribe to a feed, read exactly N messages, and stop.
#
# Shows a counted session, the shape of most "give me the next few updates" requests:
# --send puts the subscription on the wire right after the handshake (no stdin needed:
# --receive-only never reads it, so this runs the same from cron, systemd or a terminal);
# -n N closes the connection cleanly (Close 1000, exit status 0) once N messages have
# been written, like `head -n N`, however many more the server would send; --timeout
# bounds the whole session (exit status 124 if the N messages do not come in time).
# If the server ends the feed first (Close 1000), the messages it sent are printed and
# the status is 0 too.
#
# Note: websocat's -n means --no-close; wspipe's -n counts messages.
#
# Run it against the local feed server, from the repository root:
#   .venv/bin/python examples/servers/feed_server.py --port 8765 --count 10 &
#   examples/subscribe-read-n.sh [URL] [N]
# URL defaults to $FEED_URL, else ws://127.0.0.1:8765/; N to 3. Prints one compact JSON
# object per message ({"seq":1,"price":100.12}) with jq.
#
# wspipe is $WSPIPE_BIN if set, else .build/release/wspipe or .build/debug/wspipe of this
# checkout, else wspipe from PATH.
# Exit status: wspipe's if it failed (see EXIT STATUS in man/wspipe.1), otherwise jq's.
set -u

url=${1:-${FEED_URL:-ws://127.0.0.1:8765/}}
count=${2:-3}
limit=${SUBSCRIBE_TIME_LIMIT:-30}

root=$(cd "$(dirname "$0")/.." && pwd)
if [ -n "${WSPIPE_BIN:-}" ]; then wspipe=$WSPIPE_BIN
elif [ -x "$root/.build/release/wspipe" ]; then wspipe=$root/.build/release/wspipe
elif [ -x "$root/.build/debug/wspipe" ]; then wspipe=$root/.build/debug/wspipe
else wspipe=wspipe
fi

"$wspipe" --receive-only --send '{"op":"subscribe","ch":"ticker"}' \
          -n "$count" --timeout "$limit" "$url" |
    jq -c '{seq, price}'
status=("${PIPESTATUS[@]}")

if [ "${status[0]}" -ne 0 ]; then
    echo "subscribe-read-n: wspipe exited with status ${status[0]}" >&2
    exit "${status[0]}"
fi
exit "${status[1]}"
