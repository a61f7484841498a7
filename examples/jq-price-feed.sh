#!/usr/bin/env bash
# jq-price-feed.sh: subscribe to a JSON ticker feed and print each price with jq.
#
# Shows wspipe's main job: one request line goes to the server, --no-close keeps the
# session open after stdin ends (the feed comes after the request, and the server ends it
# with Close 1000), and every message the server sends comes out as one line for jq.
#
# Run it against the local feed server, from the repository root:
#   .venv/bin/python examples/servers/feed_server.py --port 8765 &
#   examples/jq-price-feed.sh                          # ws://127.0.0.1:8765/
#   examples/jq-price-feed.sh ws://127.0.0.1:9000/     # or: FEED_URL=ws://... examples/jq-price-feed.sh
#
# wspipe is $WSPIPE_BIN if set, else .build/release/wspipe or .build/debug/wspipe of this
# checkout, else wspipe from PATH.
# Exit status: wspipe's if it failed (see EXIT STATUS in man/wspipe.1), otherwise jq's.
set -u

url=${1:-${FEED_URL:-ws://127.0.0.1:8765/}}

root=$(cd "$(dirname "$0")/.." && pwd)
if [ -n "${WSPIPE_BIN:-}" ]; then wspipe=$WSPIPE_BIN
elif [ -x "$root/.build/release/wspipe" ]; then wspipe=$root/.build/release/wspipe
elif [ -x "$root/.build/debug/wspipe" ]; then wspipe=$root/.build/debug/wspipe
else wspipe=wspipe
fi

printf '%s\n' '{"op":"subscribe","ch":"ticker"}' |
    "$wspipe" --no-close "$url" |
    jq .price
status=("${PIPESTATUS[@]}")

if [ "${status[1]}" -ne 0 ]; then
    exit "${status[1]}"
fi
exit "${status[2]}"
