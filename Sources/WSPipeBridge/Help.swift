/// The text of `wspipe --help`: every option in short. man/wspipe.1 says the same at length.
public let helpText = """
usage: wspipe [options] URL

Bridge stdin/stdout to a WebSocket server (RFC 6455). URL is ws://host[:port]/path or
wss://...; IPv6 literals in brackets (ws://[::1]:9000/); ws+unix:///run/app.sock:/path
(and wss+unix://) for a Unix socket. Options may follow the URL.

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
      --close-timeout SECS   give up ending after this long without progress (default 5)

Connection:
      --connect-timeout SECS limit for DNS + TCP + TLS + handshake (default 10)
      --max-message-size BYTES  largest message accepted; bigger ones close with 1009 (default 64M)
      --ping-interval SECS   send a ping every SECS seconds
      --ping-timeout SECS    fail (exit 7) when a written ping gets no pong within SECS;
                             alone, it also sends a ping every SECS seconds

Network (proxies from the environment unless --proxy; see NETWORK in the man page):
      --proxy URL            tunnel through this proxy: http://[user:pass@]host[:port], https://...,
                             socks5://... (names resolved here), socks5h://... (by the proxy);
                             an empty URL uses no proxy at all
      --socks5 HOST:PORT     the same as --proxy socks5://HOST:PORT
      --noproxy LIST         hosts that go direct (replaces no_proxy; '*': all)
      --unix-socket PATH     connect to this Unix socket; the URL still gives Host and path
      --connect-to HOST:PORT dial HOST:PORT instead; Host, SNI and certificate name stay the URL's
      --resolve HOST:PORT:ADDR[,ADDR...]  use these addresses for HOST:PORT instead of DNS
  -4, --ipv4                 IPv4 only
  -6, --ipv6                 IPv6 only (default: both, raced IPv6 first: happy eyeballs)
  -L, --location             follow redirects (301/302/303/307/308), never from wss:// to ws://;
                             credentials go only to the URL's own host and port
      --max-redirs N         follow at most N redirects with -L (default 5)

TLS:
  -k, --insecure             do not verify the server's TLS certificate
      --cacert FILE          trust the CA certificates in FILE (PEM) instead of the system store
      --cert FILE            client certificate (PEM; the file may hold the key too)
      --key FILE             the client certificate's private key (PEM; default: the --cert file)
      --key-pass-env VAR     the key's passphrase is in environment variable VAR
      --key-pass-file FILE   the key's passphrase is in FILE (one line)
      --tls-min VERSION      lowest TLS version accepted: 1.2 (default) or 1.3
      --sni NAME             TLS server name and certificate name (default: the URL's host)

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
  wss_proxy, https_proxy, all_proxy
                             proxy for wss:// URLs: the first one set (each also in upper case,
                             lower case first)
  ws_proxy, http_proxy, all_proxy
                             proxy for ws:// URLs (HTTP_PROXY is ignored when REQUEST_METHOD is set)
  no_proxy, NO_PROXY         hosts that go direct: names (with their subdomains), IP addresses,
                             CIDR blocks, optional :PORT, '*' for all; comma-separated
  SSL_CERT_FILE, SSL_CERT_DIR  system CA store locations (OpenSSL)

Exit status:
  0 clean close (or the stdout reader went away)   1 local input/output error
  2 usage error     3 cannot connect (also to the proxy) / connect timeout     4 TLS failure
  5 handshake rejected     6 server broke the protocol (we closed with 1002/1007/1009)
  7 connection lost without a closing handshake, or ping timeout
  8 server closed with a code other than 1000     124 --timeout expired
  9 the proxy refused or failed (CONNECT status not 2xx, SOCKS5 failure, proxy authentication)
  129/130/143 SIGHUP/SIGINT/SIGTERM

See man wspipe (man/wspipe.1) for details.
"""
