#!/usr/bin/env bash
# jsonrpc-call.sh: one JSON-RPC 2.0 call over a WebSocket, the result on stdout.
#
# Shows a request/reply exchange without any wrapper: jq builds the request (so the
# parameters are real JSON, with no quoting surprises), --send sends it right after the
# handshake, --until-json id=N closes cleanly right after the reply with our id and
# --print-match-only prints only that one (notifications the server sends before it are
# not: try the server with --notifications 3), --timeout bounds the call, and jq picks the
# result or turns an error reply into a message and exit status 1.
# wspipe has no --jsonrpc option (websocat has one): this is all it takes.
#
# Run it against the local JSON-RPC server, from the repository root:
#   .venv/bin/python examples/servers/jsonrpc_server.py --port 8767 &
#   examples/jsonrpc-call.sh sum '[1,2,3]'                              # prints 6
#   examples/jsonrpc-call.sh subtract '{"minuend":10,"subtrahend":3}'    # prints 7
#   RPC_URL=ws://127.0.0.1:9000/ examples/jsonrpc-call.sh echo '{"a":[1,"x"]}'
# Arguments: METHOD [PARAMS], PARAMS being JSON (an array or an object; none: no
# "params"). The server is $RPC_URL, else ws://127.0.0.1:8767/; $RPC_TIMEOUT (seconds,
# default 10) bounds the call.
#
# wspipe is $WSPIPE_BIN if set, else .build/release/wspipe or .build/debug/wspipe of this
# checkout, else wspipe from PATH.
# Exit status: 0 the result was printed; 1 the server answered with an error (printed on
# stderr) or the reply is not a JSON-RPC response; 2 bad arguments; otherwise wspipe's
# status (3 cannot connect, 124 no reply in time, ...).
set -u

if [ $# -lt 1 ] || [ $# -gt 2 ]; then
    echo "usage: jsonrpc-call.sh METHOD [PARAMS-JSON]" >&2
    exit 2
fi
method=$1
params=${2:-}
url=${RPC_URL:-ws://127.0.0.1:8767/}
limit=${RPC_TIMEOUT:-10}
id=$$

root=$(cd "$(dirname "$0")/.." && pwd)
if [ -n "${WSPIPE_BIN:-}" ]; then wspipe=$WSPIPE_BIN
elif [ -x "$root/.build/release/wspipe" ]; then wspipe=$root/.build/release/wspipe
elif [ -x "$root/.build/debug/wspipe" ]; then wspipe=$root/.build/debug/wspipe
else wspipe=wspipe
fi

if [ -n "$params" ]; then
    request=$(jq -nc --arg method "$method" --argjson params "$params" --argjson id "$id" \
                 '{jsonrpc: "2.0", id: $id, method: $method, params: $params}' 2>/dev/null) ||
        { echo "jsonrpc-call: PARAMS is not JSON: $params" >&2; exit 2; }
else
    request=$(jq -nc --arg method "$method" --argjson id "$id" '{jsonrpc: "2.0", id: $id, method: $method}')
fi

reply=$("$wspipe" --quiet --receive-only --send "$request" --until-json "id=$id" --print-match-only \
             --require-count --timeout "$limit" "$url")
status=$?
if [ "$status" -ne 0 ]; then
    echo "jsonrpc-call: wspipe exited with status $status" >&2
    exit "$status"
fi

if ! printf '%s\n' "$reply" | jq -e --argjson id "$id" '.jsonrpc == "2.0" and .id == $id' >/dev/null 2>&1; then
    echo "jsonrpc-call: not a response to this call: $reply" >&2
    exit 1
fi
if printf '%s\n' "$reply" | jq -e 'has("error")' >/dev/null; then
    printf '%s\n' "$reply" | jq -r '"jsonrpc-call: error \(.error.code): \(.error.message)"' >&2
    exit 1
fi
printf '%s\n' "$reply" | jq -c '.result'
