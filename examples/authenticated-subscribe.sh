#!/usr/bin/env bash
# authenticated-subscribe.sh: log in, wait for the answer, subscribe, print N prices.
#
# Shows a conversation (man wspipe: CONVERSATIONS): the server drops a subscription sent
# before its login answer, so the preamble waits for it: --send the login, --expect-json
# the answer (at most --expect-timeout seconds: else exit 13 and a line naming the step),
# then --send the subscription; --until-json ends the run cleanly right after the Nth
# price. With --reconnect the whole preamble would run again after every reconnection.
# jq keeps the prices.
#
# Run it against the local feed, from the repository root:
#   .venv/bin/python examples/servers/feed_server.py --port 8765 --login demo --count 100 --interval 0.1 &
#   examples/authenticated-subscribe.sh 5          # prints 5 prices
# Arguments: [COUNT] (default 5). The server is $FEED_URL, else ws://127.0.0.1:8765/;
# the key $FEED_KEY (default "demo").
#
# wspipe is $WSPIPE_BIN if set, else .build/release/wspipe or .build/debug/wspipe of this
# checkout, else wspipe from PATH.
# Exit status: wspipe's (0 the prices came; 13 the login or the subscription was not
# answered in time; 3 cannot connect, ...).
set -u -o pipefail

count=${1:-5}
url=${FEED_URL:-ws://127.0.0.1:8765/}
key=${FEED_KEY:-demo}

root=$(cd "$(dirname "$0")/.." && pwd)
if [ -n "${WSPIPE_BIN:-}" ]; then wspipe=$WSPIPE_BIN
elif [ -x "$root/.build/release/wspipe" ]; then wspipe=$root/.build/release/wspipe
elif [ -x "$root/.build/debug/wspipe" ]; then wspipe=$root/.build/debug/wspipe
else wspipe=wspipe
fi

login=$(jq -nc --arg key "$key" '{op: "auth", key: $key}')
"$wspipe" --quiet --receive-only \
    --send "$login" --expect-json event=authenticated --expect-timeout 5 \
    --send '{"op":"subscribe","ch":"ticker"}' \
    --until-json "seq=$count" "$url" |
    jq -c 'select(.seq) | .price'
