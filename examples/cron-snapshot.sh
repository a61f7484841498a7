#!/usr/bin/env bash
# cron-snapshot.sh: a cron job that asks a feed for one snapshot and stores the reply.
#
# Shows wspipe unattended, as a one-shot request: --send puts the request on the wire (no
# stdin needed; cron's is /dev/null) and -n 1 closes cleanly once the one reply is written
# (--require-count: a server that closes before replying is exit status 11, not 0);
# --timeout bounds the whole session, so a stuck server cannot hold the job (exit status
# 124, like timeout(1)); the token kept out of the command line (--bearer-file or
# WSPIPE_BEARER, never --bearer); a `case` on wspipe's exit status that tells "try again
# next run" from "a human must look"; the reply written to a temporary file and renamed,
# so readers never see half a snapshot; and flock(1), so a slow run never overlaps the
# next one.
#
# Run it against the local feed server, from the repository root:
#   .venv/bin/python examples/servers/feed_server.py --port 8765 &
#   examples/cron-snapshot.sh [URL] [OUTPUT]
# URL defaults to $FEED_URL, else ws://127.0.0.1:8765/; OUTPUT to $SNAPSHOT_FILE, else
# ./ticker-snapshot.json. The lock is $SNAPSHOT_LOCK, else OUTPUT.lock.
# With a server that wants a token (feed_server.py --token SECRET), put the token in
# $WSPIPE_BEARER, or in a file (mode 600) named by $FEED_TOKEN_FILE.
# $SNAPSHOT_TIME_LIMIT (seconds, default 30) bounds the whole run.
#
# A crontab line (every 5 minutes; stderr to a log):
#   */5 * * * * FEED_TOKEN_FILE=$HOME/.config/feed.token /path/to/examples/cron-snapshot.sh wss://feed.example/ws /var/lib/feed/ticker.json 2>>$HOME/feed-snapshot.log
#
# wspipe is $WSPIPE_BIN if set, else .build/release/wspipe or .build/debug/wspipe of this
# checkout, else wspipe from PATH.
# Exit status: 0 stored (or skipped because a run is still active); 75 (EX_TEMPFAIL) a
# temporary problem, the next run retries; 1 a problem that needs a human.
set -u

url=${1:-${FEED_URL:-ws://127.0.0.1:8765/}}
out=${2:-${SNAPSHOT_FILE:-./ticker-snapshot.json}}
lock=${SNAPSHOT_LOCK:-$out.lock}
limit=${SNAPSHOT_TIME_LIMIT:-30}
request='{"op":"snapshot","ch":"ticker"}'

root=$(cd "$(dirname "$0")/.." && pwd)
if [ -n "${WSPIPE_BIN:-}" ]; then wspipe=$WSPIPE_BIN
elif [ -x "$root/.build/release/wspipe" ]; then wspipe=$root/.build/release/wspipe
elif [ -x "$root/.build/debug/wspipe" ]; then wspipe=$root/.build/debug/wspipe
else wspipe=wspipe
fi

log() { printf '%s cron-snapshot: %s\n' "$(date -u +%Y-%m-%dT%H:%M:%SZ)" "$*" >&2; }

# One run at a time: hold an exclusive lock on fd 9 for as long as this script runs.
exec 9>>"$lock" || { log "cannot open lock file $lock"; exit 1; }
if ! flock -n 9; then
    log "previous run still active (lock $lock held); skipping"
    exit 0
fi

options=(--quiet --connect-timeout 10 --close-timeout 5)
if [ -n "${FEED_TOKEN_FILE:-}" ]; then
    options+=(--bearer-file "$FEED_TOKEN_FILE")
fi
# (WSPIPE_BEARER, if set, is read by wspipe itself.)

tmp=$(mktemp "$out.XXXXXX") || { log "cannot create a temporary file next to $out"; exit 1; }
trap 'rm -f "$tmp"' EXIT

# One request, one reply, a time limit: on expiry wspipe closes the connection cleanly
# and exits with 124; a server that closes before the reply gives 11.
"$wspipe" "${options[@]}" --send "$request" -n 1 --require-count --timeout "$limit" "$url" </dev/null >"$tmp"
status=$?

case $status in
    0)
        if ! jq -e 'has("price")' "$tmp" >/dev/null 2>&1; then
            log "the server closed without a usable reply: $(head -c 200 "$tmp")"
            exit 75
        fi
        mv -f "$tmp" "$out"
        log "stored $out: $(jq -c . "$out")"
        exit 0
        ;;
    3)   log "cannot connect to $url (wspipe status 3); retrying next run"; exit 75 ;;
    7)   log "connection lost (wspipe status 7); retrying next run"; exit 75 ;;
    124) log "no reply within $limit s; retrying next run"; exit 75 ;;
    11)  log "the server closed without a reply (wspipe status 11); retrying next run"; exit 75 ;;
    4)   log "TLS failure (wspipe status 4): check the certificate or --cacert"; exit 1 ;;
    5)   log "handshake refused (wspipe status 5): check the token and the URL"; exit 1 ;;
    6)   log "the server broke the WebSocket protocol (wspipe status 6)"; exit 1 ;;
    8)   log "the server closed with an error (wspipe status 8): see its reason above"; exit 1 ;;
    1|2) log "local or usage error (wspipe status $status): fix this script's setup"; exit 1 ;;
    129|130|143) log "interrupted by a signal (wspipe status $status)"; exit 75 ;;
    *)   log "unexpected wspipe status $status"; exit 1 ;;
esac
