import WSPipeBridge

/// The text of `wspipe --help`: every option in short, made from `Option.helpSections`.
/// man/wspipe.1 says the same at length.
public let helpText: String = {
    var text = helpIntroduction
    for section in Option.helpSections {
        text += "\(section.title)\n"
        for option in section.options {
            let short = option.shortName.map { "-\($0), " } ?? "    "
            text += helpLines(left: "  \(short)\(option.longName)" + (option.valueName.map { " \($0)" } ?? ""),
                              option.help)
        }
        for (left, description) in section.notes { text += helpLines(left: "  \(left)", [description]) }
        text += "\n"
    }
    return text + helpTrailer
}()

/// The left column (names) and the description: the description starts at column 30, or
/// two spaces after a longer left column; its further lines start at column 30.
private func helpLines(left: String, _ description: [String]) -> String {
    let column = 29
    let indent = String(repeating: " ", count: column)
    var text = left + (left.count < column ? String(repeating: " ", count: column - left.count) : "  ")
    text += description.joined(separator: "\n" + indent)
    return text + "\n"
}

private let helpIntroduction = """
usage: wspipe [options] URL

Bridge stdin/stdout to a WebSocket server (RFC 6455). URL is ws://host[:port]/path or
wss://...; IPv6 literals in brackets (ws://[::1]:9000/); ws+unix:///run/app.sock:/path
(and wss+unix://) for a Unix socket; HOST:PORT[/PATH] without a scheme is ws:// (refused
with credentials: they would go in clear). Options may follow the URL.


"""

private let helpTrailer = """
Sizes take K, M, G suffixes (1024-based). Sizes and seconds must be positive.

Environment:
  WSPIPE_BEARER              bearer token when neither --bearer nor --bearer-file is given
  WSPIPE_BUS_PASSWORD        the --bus password when neither its URL nor --bus-password-file has one
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
  5 handshake rejected (serving: the --bus refused our credentials)
  6 server broke the protocol (we closed with 1002/1007/1009)
  7 connection lost without a closing handshake, or ping timeout
  8 server closed with a code other than 1000     124 --timeout expired
  9 the proxy refused or failed (CONNECT status not 2xx, SOCKS5 failure, proxy authentication)
  10 the offline queue was full (--queue-policy fail)
  11 --require-count: the connection ended before -n's count (or -1's reply) came
  12 closed, but the server never confirmed reading every message (no pong at end of input)
  129/130/143 dies of SIGHUP/SIGINT/SIGTERM (a shell shows 128+N), every mode

See man wspipe (man/wspipe.1) for details.
"""
