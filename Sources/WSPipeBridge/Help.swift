/// The text of `wspipe --help`: every option in short. man/wspipe.1 says the same at length.
public let helpText = """
usage: wspipe [options] URL

Bridge stdin/stdout to a WebSocket server (RFC 6455). URL is ws://host[:port]/path or
wss://...; IPv6 literals in brackets (ws://[::1]:9000/). Options may follow the URL.

Modes:
  -t, --text                 stdin lines -> text messages; each message -> stdout + newline (default)
  -b, --binary               stdin bytes -> binary messages; messages -> stdout raw
  -0, --null                 text mode with NUL instead of newline, both ways
      --chunk-size BYTES     binary mode: largest message made from stdin (default 64K)

Formats:
      --jsonl                JSON Lines both ways: {"type":"text","data":...}, {"type":"binary","base64":...},
                             {"type":"close","code":...,"reason":...}; stdin may also send {"type":"ping"}
      --timestamps           with --jsonl: add "ts" (Unix seconds) to each received line
      --base64               binary messages written as one base64 line each; with -b, stdin lines
                             are base64 and each becomes one binary message
      --whole-input          all of stdin up to EOF is ONE message (text, or binary with -b),
                             sent in frames of --chunk-size

Counts and time limits:
  -n, --max-messages N       close and exit after N received messages (like head -n; websocat's -n
                             means something else); stdin EOF then does not close
  -1, --one-message          send stdin's first message (or none), print one reply, close (-n 1)
      --send TEXT            send this text message right after the handshake, before stdin (repeatable)
      --timeout SECS         limit for the whole session: then a closing handshake and exit 124
      --idle-timeout SECS    close cleanly (exit 0) after SECS without a message either way
      --receive-only         never read stdin (for services and cron, where stdin is /dev/null)
      --send-only            never write stdout; end after stdin EOF and the closing handshake
      --stats                print a one-line JSON summary on stderr at exit

Ending:
      --no-close             stdin EOF does not close; run until the server closes (or a signal)
      --linger SECS          after stdin EOF, wait SECS (printing replies) before closing
      --close-code CODE      close code sent at stdin EOF (default 1000)
      --close-reason TEXT    close reason sent at stdin EOF (at most 123 bytes)
      --close-timeout SECS   wait this long for the server's Close and TCP close (default 5)

Connection:
      --connect-timeout SECS limit for DNS + TCP + TLS + handshake (default 10)
      --max-message-size BYTES  largest message accepted; bigger ones close with 1009 (default 64M)
      --ping-interval SECS   send a ping every SECS seconds
      --ping-timeout SECS    fail (exit 7) when a written ping gets no pong within SECS;
                             alone, it also sends a ping every SECS seconds
  -k, --insecure             do not verify the server's TLS certificate
      --cacert FILE          trust the CA certificates in FILE (PEM) instead of the system store

Request:
  -H, --header 'Name: value' add a request header (repeatable); a Host header replaces the default
      --protocol NAME        offer a subprotocol (repeatable); -v shows the one chosen
      --origin URL           send an Origin header
      --user-agent TEXT      User-Agent (default wspipe/\(wspipeVersion); empty: none)
      --bearer-file FILE     send 'Authorization: Bearer <token>' with the token read from FILE
      --bearer TOKEN         the same with the token on the command line (visible in ps and
                             shell history: prefer --bearer-file or WSPIPE_BEARER)
  URL user:password@         sends Basic authentication

Output:
  -v, --verbose              show handshake headers (secrets redacted), pings and closes on stderr
  -q, --quiet                errors only on stderr
  -h, --help                 this text
  -V, --version              print the version

Sizes take K, M, G suffixes (1024-based). Sizes and seconds must be positive.

Environment:
  WSPIPE_BEARER              bearer token when neither --bearer nor --bearer-file is given
  SSL_CERT_FILE, SSL_CERT_DIR  system CA store locations (OpenSSL)

Exit status:
  0 clean close (or the stdout reader went away)   1 local input/output error
  2 usage error     3 cannot connect / connect timeout     4 TLS failure
  5 handshake rejected     6 server broke the protocol (we closed with 1002/1007/1009)
  7 connection lost without a closing handshake, or ping timeout
  8 server closed with a code other than 1000     124 --timeout expired
  129/130/143 SIGHUP/SIGINT/SIGTERM

See man wspipe (man/wspipe.1) for details.
"""
