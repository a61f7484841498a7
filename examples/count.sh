#!/bin/sh
# A feed for `wspipe -l PORT --exec examples/count.sh`: one JSON line per tick for each
# client, from 1 to N, every $DELAY seconds (default 0.2). N is 10, or n from the query
# string (`ws://HOST:PORT/?n=3` counts to 3): the child gets the request in websocketd's
# CGI variables (QUERY_STRING, REMOTE_ADDR...). Exits 0 at the end: the client gets Close 1000.
count=10
case "$QUERY_STRING" in
    n=[0-9]*) count=${QUERY_STRING#n=}; count=${count%%&*} ;;
esac
i=1
while [ "$i" -le "$count" ]; do
    printf '{"n":%d,"of":%d,"price":%d.%02d,"client":"%s"}\n' "$i" "$count" $((100 + i)) $((i * 7 % 100)) "${REMOTE_ADDR:-?}"
    i=$((i + 1))
    [ "$i" -le "$count" ] && sleep "${DELAY:-0.2}"
done
exit 0
