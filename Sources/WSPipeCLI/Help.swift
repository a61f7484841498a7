import WSPipeBridge

/// What `--help` shows: the one screen, one category, or everything.
public enum HelpTopic: Sendable, Equatable {
    case summary
    case all
    case category(Option.Category)

    /// `all`, a category's name (any case), or an option's long name without its dashes
    /// (`--help echo`: the category --echo is in); nil for another word.
    init?(_ word: String) {
        let name = word.lowercased()
        if name == "all" {
            self = .all
        } else if let category = Option.Category(rawValue: name) ?? Option.named("--" + name)?.category {
            self = .category(category)
        } else {
            return nil
        }
    }

    /// The usage error for a word after --help that names no category.
    static func unknown(_ word: String) -> UsageError {
        UsageError("unknown help category '\(word.prefix(40))'; the categories are "
                   + Option.Category.allCases.map(\.rawValue).joined(separator: ", ") + ", and all", pointsAtHelp: false)
    }

    /// The text to print.
    var text: String {
        switch self {
        case .summary: return summaryHelpText
        case .all: return helpText
        case .category(let category): return helpSection(category) + "\nSee wspipe --help for the categories, man wspipe for details.\n"
        }
    }
}

/// `wspipe --help all`: every option in short, by category, made from the declarations
/// (`Option.allCases`). man/wspipe.1 says the same at length. Every line fits 80 columns.
public let helpText: String = {
    var text = helpIntroduction
    for category in Option.Category.allCases { text += helpSection(category) + "\n" }
    return text + helpTrailer
}()

/// `wspipe --help`: one 80x40 screen: usage, the options most runs use, the categories.
public let summaryHelpText: String = {
    var text = summaryIntroduction + "Options used most (more: wspipe --help CATEGORY):\n"
    for (option, description) in commonOptions { text += helpLines(left: "  " + heading(option), [description], column: 30) }
    text += "\nCategories (wspipe --help CATEGORY, or -h CATEGORY; all: every option):\n"
    let categories = Option.Category.allCases
    let half = (categories.count + 1) / 2
    for row in 0..<half {
        let left = entry(categories[row])
        let right = row + half < categories.count ? entry(categories[row + half]) : ""
        text += right.isEmpty ? "  \(left)\n" : "  " + left + String(repeating: " ", count: max(2, 38 - left.count)) + right + "\n"
    }
    return text + "\nExit status: 0 clean close, 2 usage error, 3 cannot connect; others in\n"
        + "wspipe --help all and man wspipe.\n"
}()

/// The options people reach for first, with a one-line description each (the category
/// text has the whole of it).
private let commonOptions: [(Option, String)] = [
    (.binary, "binary messages (default: a text message per line)"),
    (.jsonl, "JSON Lines both ways, with each message's type"),
    (.maxMessages, "close and exit after N received messages"),
    (.oneMessage, "send one message, print one reply, close"),
    (.timeout, "limit for the whole session (exit 124)"),
    (.header, "add a request header (repeatable)"),
    (.subprotocol, "offer a subprotocol (repeatable)"),
    (.bearerFile, "send the token in FILE as a bearer token"),
    (.insecure, "do not verify the server's TLS certificate"),
    (.reconnect, "reconnect after the connection is lost"),
    (.verbose, "show headers, pings and closes on stderr"),
    (.quiet, "errors only on stderr"),
    (.listen, "serve: stdin and stdout to one client at a time"),
    (.echo, "with -l: every message back to its client"),
    (.exec, "with -l: run PROGRAM [ARGS] for each client"),
]

private func entry(_ category: Option.Category) -> String {
    category.rawValue + String(repeating: " ", count: 13 - category.rawValue.count) + category.summary
}

/// One category: its title, its options and notes.
func helpSection(_ category: Option.Category) -> String {
    var text = "\(category.title)\n"
    for option in category.options { text += helpLines(left: "  " + heading(option), option.help) }
    for (left, description) in category.notes { text += helpLines(left: "  \(left)", [description]) }
    return text
}

/// "-n, --max-messages N", "    --timeout SECS".
private func heading(_ option: Option) -> String {
    let short = option.shortName.map { "-\($0), " } ?? "    "
    return "\(short)\(option.longName)" + (option.valueName.map { " \($0)" } ?? "")
}

/// The left column (names) and the description, wrapped to 80 columns: the description
/// starts at `column` + 1, or on the next line after a longer left column.
private func helpLines(left: String, _ description: [String], column: Int = 29) -> String {
    let indent = String(repeating: " ", count: column)
    var lines: [String] = []
    var line = left + (left.count <= column - 2 ? String(repeating: " ", count: column - left.count) : "")
    if left.count > column - 2 {
        lines.append(line)
        line = indent
    }
    var empty = true
    for word in description.joined(separator: " ").split(separator: " ") {
        if !empty && line.count + 1 + word.count > 80 {
            lines.append(line)
            line = indent
            empty = true
        }
        line += (empty ? "" : " ") + word
        empty = false
    }
    lines.append(line)
    return lines.joined(separator: "\n") + "\n"
}

private let summaryIntroduction = """
usage: wspipe [options] URL             send stdin to URL, print its replies
       wspipe -l [ADDR:]PORT [options]  serve (see wspipe --help server)

URL: ws://host[:port]/path, wss://..., ws+unix:///run/app.sock:/path, or
HOST:PORT[/PATH] (ws://). Options may follow the URL.
At a terminal it is a console: a prompt, line editing, history, /help.


"""

private let helpIntroduction = """
usage: wspipe [options] URL
       wspipe -l [ADDR:]PORT [options]

Bridge stdin/stdout to a WebSocket server (RFC 6455). URL is
ws://host[:port]/path or wss://...; IPv6 literals in brackets
(ws://[::1]:9000/); for a Unix socket ws+unix:///run/app.sock:/path (and
wss+unix://) or unix:/run/app.sock; HOST:PORT[/PATH] without a scheme is ws://
(refused with credentials: they would go in clear). Options may follow the URL.
-l serves instead (SERVER in the man page). At a terminal (stdin and stdout)
wspipe is a console: a prompt, line editing, history, /commands (CONSOLE).


"""

private let helpTrailer = """
Sizes take K, M, G suffixes (1024-based). Sizes and seconds must be positive.

Environment:
  WSPIPE_BEARER              bearer token when neither --bearer nor
                             --bearer-file is given
  WSPIPE_BUS_PASSWORD        the --bus password when neither its URL nor
                             --bus-password-file has one
  wss_proxy, https_proxy, all_proxy
                             proxy for wss:// URLs: the first one set (each also
                             in upper case, lower case first)
  ws_proxy, http_proxy, all_proxy
                             proxy for ws:// URLs (HTTP_PROXY is ignored when
                             REQUEST_METHOD is set)
  no_proxy, NO_PROXY         hosts that go direct: names (with their
                             subdomains), IP addresses, CIDR blocks, optional
                             :PORT, '*' for all; comma-separated
  SSL_CERT_FILE, SSL_CERT_DIR  system CA store locations (OpenSSL)

Exit status:
  0 clean close (or the stdout reader went away)   1 local input/output error
  2 usage error   3 cannot connect (also to the proxy) / connect timeout
  4 TLS failure
  5 handshake rejected (serving: the --bus refused our credentials)
  6 server broke the protocol (we closed with 1002/1007/1009)
  7 connection lost without a closing handshake, or ping timeout
  8 server closed with a code other than 1000     124 --timeout expired
  9 the proxy refused or failed (CONNECT status not 2xx, SOCKS5 failure, proxy
    authentication)
  10 the offline queue was full (--queue-policy fail)
  11 --require-count: the connection ended before -n's count (or -1's reply)
     came
  12 closed, but the server never confirmed reading every message (no pong at
     end of input)
  13 an --expect missed: no match within --expect-timeout, or the server closed
  129/130/143 dies of SIGHUP/SIGINT/SIGTERM (a shell shows 128+N), every mode

See man wspipe (man/wspipe.1) for details.
"""
