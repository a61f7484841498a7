import WSPipeBridge

// What users of websocat and wscat type, and what wspipe says back: the nearest option for
// a misspelled one, wspipe's equivalents of their flags, and wscat's URL without a scheme.
// Pure functions of the argument text; the parser decides when to use them.

/// Hints for what users of other tools type: the nearest option, websocat's flags.
enum Habits {
    /// "did you mean --timeout?" for a long option within two edits of a real one, and fewer
    /// edits than it has letters: '--ca' is not near '--sh', every letter of it changed.
    /// Options equally near are all named, in --help order ('--statc': "--stats or
    /// --static?"; naming only the first sent a --static user to --stats).
    static func suggestion(for name: String) -> String? {
        var letters = Substring(name)
        while letters.first == "-" { letters = letters.dropFirst() }
        let limit = min(2, letters.utf8.count - 1)
        guard limit >= 1 else { return nil }
        var nearest: [String] = [], best = limit + 1
        for option in Option.allCases {
            let distance = editDistance(name, option.longName, limit: limit)
            if distance < best { (nearest, best) = ([], distance) }
            if distance == best, distance <= limit, !nearest.contains(option.longName) { nearest.append(option.longName) }
        }
        guard !nearest.isEmpty else { return nil }
        let named = nearest.count == 1 ? nearest[0] : nearest.dropLast().joined(separator: ", ") + " or " + nearest[nearest.count - 1]
        return "did you mean \(named)?"
    }

    /// A long option written with one dash (`-timeout 3`, as in Go's and Java's tools), which
    /// the parser read as short flags until one failed: the long option it is, or is near.
    /// `near`: also the nearest long option (else only the one written exactly).
    static func singleDash(_ argument: String, near: Bool) -> String? {
        guard argument.utf8.count > 2 else { return nil }
        let name = "-" + (argument.split(separator: "=", maxSplits: 1).first.map(String.init) ?? argument)
        if Option.named(name) != nil { return "long options take two dashes: \(name)" }
        return near ? suggestion(for: name) : nil
    }

    /// `-timeout` (or `-timeout=3`): a long option's exact name after one dash, recognised
    /// before the word is split into short flags (it was "unknown option '-i'"), or a
    /// websocketd flag after one dash (`-maxforks`). nil for anything else (`-vb`,
    /// `-Hvalue`, `-tiemout`).
    static func singleDashLong(_ argument: String) -> (typed: String, hint: String)? {
        // -n, -vb, -H...: too short to be a long name (checked first: this runs for every
        // single-dash argument).
        guard argument.utf8.count > 3 else { return nil }
        let word = argument.split(separator: "=", maxSplits: 1).first.map(String.init) ?? argument
        guard word.utf8.count > 3 else { return nil }
        // websocketd's flags take one dash as well (Go's flag package): -maxforks 4.
        guard let hint = singleDash(argument, near: false) ?? foreignFlag("-" + word) else { return nil }
        return (word, hint)
    }

    /// Whether a positional argument is meant as a URL (a scheme, or wscat's HOST:PORT),
    /// rather than a program websocketd's way (`wspipe -l 8080 ./count.sh`).
    static func isURLLike(_ text: String) -> Bool {
        hasSchemeSeparator(Array(text.utf8)) || SchemelessAddress(text) != nil || text.hasPrefix("unix:")
    }

    /// websocat's address prefixes that wspipe spells as options.
    static func websocatAddress(_ text: String) -> String? {
        guard text.hasPrefix("autoreconnect:") else { return nil }
        let url = Diagnostics.redactedURL(String(text.dropFirst("autoreconnect:".count)))
        return "websocat's 'autoreconnect:\(url)' is wspipe --reconnect \(url)"
    }

    /// websocketd's `--port=N PROGRAM [ARGS]` (`port`: the inline value, else the next
    /// argument): wspipe's `-l N --exec PROGRAM [ARGS]`.
    static func websocketdPort(_ port: String?, after rest: ArraySlice<String>) -> String {
        var rest = rest
        let number = port ?? rest.popFirst() ?? "PORT"
        // The program: the first argument that is neither an option nor an option's value.
        while let first = rest.first, first.hasPrefix("-") {
            rest = rest.dropFirst()
            if !first.contains("="), let option = Option.named(first), option.takesValue { rest = rest.dropFirst() }
        }
        let shown = "--port\(port == nil ? " " : "=")\(number)"
        guard let program = rest.first, !isURLLike(program) else {
            return "websocketd's \(shown) is wspipe -l \(number) (with --exec PROGRAM to run a program for each client)"
        }
        let command = rest.map(shellWord).joined(separator: " ")
        return "websocketd's \(shown) \(command) is wspipe -l \(number) --exec \(command)"
    }

    /// A program after -l (websocketd's `websocketd --port=8080 ./count.sh`): what to write.
    static func programAfterListen(_ listen: String, _ words: [String]) -> String {
        let command = words.map(shellWord).joined(separator: " ")
        return "-l takes no URL, and '\(words[0])' is not one; to run a program for each client, write "
            + "wspipe -l \(shellWord(listen)) --exec \(command)"
    }

    /// The client's `unix:/path` (as the server's -l unix:/path): `ws+unix:///path:/`, Host
    /// localhost, path /. nil for other text.
    static func unixSocketURL(_ text: String) -> String? {
        guard text.hasPrefix("unix:"), text.utf8.count > 5 else { return nil }
        var escaped = ""
        for character in text.dropFirst(5) {
            escaped += character == "%" ? "%25" : character == ":" ? "%3A" : String(character)
        }
        return "ws+unix://\(escaped):/"
    }

    /// `word` as a shell reads it back: as it is when it is safe, else in single quotes.
    static func shellWord(_ word: String) -> String {
        let safe = !word.isEmpty && word.utf8.allSatisfy { byte in
            (byte >= 0x30 && byte <= 0x39) || (byte | 0x20 >= 0x61 && byte | 0x20 <= 0x7A) || "_./:=@%+,-".utf8.contains(byte)
        }
        guard !safe else { return word }
        var quoted = "'"
        for character in word { quoted += character == "'" ? "'\\''" : String(character) }
        return quoted + "'"
    }

    /// websocat's, wscat's and websocketd's flags that wspipe does not have (or spells
    /// differently, when the nearest wspipe option would mislead), with what to write instead.
    static func foreignFlag(_ name: String) -> String? {
        switch name {
        case "-s":  // websocat's server mode, wscat's subprotocol
            return "websocat's -s PORT is wspipe -l PORT (standard input and output to one client at a time; "
                + "-l PORT --echo for an echo server); wscat's -s NAME is --protocol NAME"
        case "--server-mode":
            return "websocat's \(name) PORT is wspipe -l PORT (standard input and output to one client at a time; "
                + "-l PORT --echo for an echo server)"
        case "-E", "--exit-on-eof":
            return "websocat's \(name) is what wspipe does by default: the end of standard input closes the "
                + "connection, and the server's Close ends the session"
        case "--subprotocol":
            return "wscat's --subprotocol NAME is --protocol NAME"
        case "--auth", "--basic-auth":
            return "\(name == "--auth" ? "wscat" : "websocat")'s \(name) USER:PASSWORD is the URL's user information "
                + "in wspipe (wss://USER:PASSWORD@host/)"
        case "--no-check":
            return "wscat's --no-check is -k/--insecure"
        case "--ca":
            return "wscat's --ca FILE is --cacert FILE"
        case "-x", "--execute":
            return "wscat's \(name) TEXT is --send TEXT"
        case "--no-color":
            return "wscat's --no-color is NO_COLOR=1 (wspipe colours only its console, at a terminal)"
        case "-P", "--show-ping-pong":
            return "wscat's \(name) is -v (it shows each ping and pong on stderr); /ping in the console prints a round trip"
        case "--slash":
            return "wscat's --slash is always on in wspipe's console (at a terminal): /ping, /close, /binary; /help lists them"
        case "-w", "--wait":
            return "wscat's \(name) SECS is --linger SECS"
        case "-u", "--unidirectional":
            return "websocat's \(name) is --send-only"
        case "-U", "--unidirectional-reverse":
            return "websocat's \(name) is --receive-only"
        case "--address":
            return "websocketd's --address ADDR (with --port PORT) is wspipe -l ADDR:PORT (an IPv6 address in brackets: -l [::1]:8080)"
        case "--maxforks":
            return "websocketd's --maxforks N is --max-children N (programs at once, with --exec or --dir)"
        case "--loglevel":
            return "websocketd's --loglevel LEVEL is -v (each client and how it ended, on stderr: debug to info) "
                + "or -q (errors only: error, fatal)"
        case "--ssl", "--sslcert", "--sslkey":
            return "websocketd's --ssl --sslcert FILE --sslkey FILE is --cert FILE --key FILE (with -l: serve wss://)"
        case "--closems":
            return "websocketd's --closems MS is --close-grace SECS (how long a program may run on after its client left, "
                + "before SIGTERM)"
        case "--header-ws":
            return "websocketd's --header-ws 'Name: value' is --response-header 'Name: value' (a header of the 101 answer)"
        default:
            return nil
        }
    }

    /// websocat's `-` (its second address, standard input and output), alone or after short
    /// flags (`-b-`).
    static let websocatStdio = "websocat's '-' (standard input and output) is what wspipe always bridges: give the URL alone"

    /// -n's value when it is a URL: websocat's -n is --no-close.
    static func countTakenForURL(_ text: String, option: String) -> String? {
        let shown: String
        if let address = SchemelessAddress(text) {
            shown = address.shown
        } else if hasSchemeSeparator(Array(text.utf8)) {
            shown = Diagnostics.redactedURL(text)
        } else {
            return nil
        }
        return "-n/\(option) takes a number of messages, not the URL '\(shown)' "
            + "(websocat's -n is wspipe's --no-close, wscat's -n is -k)"
    }

    /// Levenshtein distance of `a` and `b`, or `limit + 1` once it must exceed `limit`.
    static func editDistance(_ a: String, _ b: String, limit: Int) -> Int {
        let a = Array(a.utf8), b = Array(b.utf8)
        guard abs(a.count - b.count) <= limit else { return limit + 1 }
        guard !a.isEmpty, !b.isEmpty else { return max(a.count, b.count) }
        var previous = Array(0...b.count)
        var current = previous
        for i in 1...a.count {
            current[0] = i
            for j in 1...b.count {
                current[j] = min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1))
            }
            // Every path goes through this row: past the limit here, past it at the end.
            if current.allSatisfy({ $0 > limit }) { return limit + 1 }
            swap(&previous, &current)
        }
        return min(previous[b.count], limit + 1)
    }
}

/// wscat's `HOST:PORT[/PATH]` without a scheme (HOST a name, IPv4 or `[IPv6]`, PORT
/// digits), which wspipe takes as `ws://HOST:PORT/PATH`. `userInfo` is set when the text
/// has `user:password@` before the host: then it is not taken (credentials in clear).
struct SchemelessAddress: Equatable {
    /// `ws://HOST:PORT/PATH`, still to be parsed as a URL.
    let url: String
    let hasUserInfo: Bool
    /// The user information is `user:password@`, not only `user@`.
    let hasPassword: Bool
    /// The text for messages: user information as `[redacted]@`.
    let shown: String

    init?(_ text: String) {
        let bytes = Array(text.utf8)
        guard !bytes.isEmpty else { return nil }
        // The authority ends where a URL's does: at the path, the query or a fragment.
        let pathStart = bytes.firstIndex {
            $0 == UInt8(ascii: "/") || $0 == UInt8(ascii: "?") || $0 == UInt8(ascii: "#")
        } ?? bytes.endIndex
        // A scheme's "://" ends at the path's first slash; one further on (a query's
        // ?next=http://...) is not a scheme.
        guard !hasSchemeSeparator(Array(bytes[..<min(pathStart + 2, bytes.endIndex)])) else { return nil }
        var hostStart = bytes.startIndex
        if let at = bytes[..<pathStart].lastIndex(of: UInt8(ascii: "@")) { hostStart = at + 1 }
        let authority = bytes[hostStart..<pathStart]  // without the user information
        guard let colon = authority.lastIndex(of: UInt8(ascii: ":")) else { return nil }
        let host = authority[..<colon], port = authority[(colon + 1)...]
        guard !port.isEmpty, port.count <= 5, port.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }),
              SchemelessAddress.isHost(host) else { return nil }
        let rest = String(decoding: bytes[pathStart...], as: UTF8.self)
        let path = bytes[pathStart...].first == UInt8(ascii: "/") ? rest : "/" + rest  // localhost:8080?x=1
        url = "ws://" + String(decoding: bytes[hostStart..<pathStart], as: UTF8.self) + path
        hasUserInfo = hostStart != bytes.startIndex
        hasPassword = bytes[..<hostStart].contains(UInt8(ascii: ":"))
        shown = (hasUserInfo ? "[redacted]@" : "") + String(decoding: bytes[hostStart...], as: UTF8.self)
    }

    /// A name or IPv4 address (letters, digits, '-', '.', starting with a letter or digit),
    /// or an IPv6 address in brackets.
    private static func isHost(_ host: ArraySlice<UInt8>) -> Bool {
        guard let first = host.first else { return false }
        func isAlphanumeric(_ byte: UInt8) -> Bool {
            (byte >= 0x30 && byte <= 0x39) || (byte | 0x20 >= 0x61 && byte | 0x20 <= 0x7A)
        }
        if first == UInt8(ascii: "[") {
            guard host.count > 2, host.last == UInt8(ascii: "]") else { return false }
            return host.dropFirst().dropLast().allSatisfy { isAlphanumeric($0) || $0 == UInt8(ascii: ":") || $0 == UInt8(ascii: ".") }
        }
        return isAlphanumeric(first) && host.allSatisfy { isAlphanumeric($0) || $0 == UInt8(ascii: "-") || $0 == UInt8(ascii: ".") }
    }
}

/// Whether `bytes` hold "://". A scan of bytes: String.contains(String) would be the run's
/// first use of _StringProcessing, 170,000 instructions at every start (see Options.swift).
func hasSchemeSeparator(_ bytes: [UInt8]) -> Bool {
    guard bytes.count >= 3 else { return false }
    for index in 0...(bytes.count - 3)
    where bytes[index] == UInt8(ascii: ":") && bytes[index + 1] == UInt8(ascii: "/") && bytes[index + 2] == UInt8(ascii: "/") {
        return true
    }
    return false
}
