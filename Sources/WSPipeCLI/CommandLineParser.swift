import WebSocketCore
import WSPipeBridge

/// What the command line asks for.
public enum Command: Sendable {
    case help(HelpTopic)
    case version
    case run(BridgeConfiguration)
}

/// A command-line mistake; exit status 2. `pointsAtHelp` is false for mistakes that
/// `--help` cannot explain (an unreadable file named by an option).
public struct UsageError: Error, Equatable, CustomStringConvertible {
    public let message: String
    public let pointsAtHelp: Bool
    public init(_ message: String, pointsAtHelp: Bool = true) {
        self.message = message
        self.pointsAtHelp = pointsAtHelp
    }
    public var description: String { message }

    /// The --help category of the first option the message names (`--tls-min '9' is not
    /// ...`: tls), for "see wspipe --help tls"; nil when it names none ("no URL given").
    public var helpCategory: Option.Category? {
        let bytes = Array(message.utf8)
        var index = 0
        while index < bytes.count {
            let atWordStart = index == 0 || " ('/".utf8.contains(bytes[index - 1])
            guard atWordStart, bytes[index] == UInt8(ascii: "-") else {
                index += 1
                continue
            }
            var end = index + 1
            while end < bytes.count, bytes[end] == UInt8(ascii: "-") || (bytes[end] | 0x20 >= 0x61 && bytes[end] | 0x20 <= 0x7A)
                || (bytes[end] >= 0x30 && bytes[end] <= 0x39) { end += 1 }
            let word = String(decoding: bytes[index..<end], as: UTF8.self)
            let option = word.hasPrefix("--") ? Option.named(word)
                : end - index == 2 ? word.last.flatMap { Option.named(short: $0) } : nil
            if let option { return option.category }
            index = end
        }
        return nil
    }
}

/// Parses wspipe's arguments against `Option.allCases`. Options and the URL may come in
/// any order; `--name=value` and `--name value` are equivalent, short flags combine
/// (`-vb`), `-Hvalue` works, and `--` ends the options.
public enum CommandLineParser {
    /// - Parameters:
    ///   - arguments: the arguments after the program name.
    ///   - environment: looks up environment variables (WSPIPE_BEARER, proxies, key passphrase).
    ///   - readFile: reads a file given to an option (--bearer-file); nil if unreadable.
    ///   - note: a line for stderr about how an argument was taken (wscat's -c), shown
    ///     unless -q.
    /// - Throws: `UsageError` for the first mistake, in argument order.
    public static func parse(_ arguments: [String], environment: (String) -> String? = { _ in nil },
                             readFile: (String) -> [UInt8]? = readWholeFile,
                             note: (String) -> Void = { _ in }) throws(UsageError) -> Command {
        // The URL, or with -l what websocketd users give instead (a program and its arguments).
        var positionals: [String] = []
        // Each option's value is checked as it comes (the first mistake is reported); what
        // it sets is applied once the URL is known.
        var setters: [Option.Setter] = []
        var given: [String] = []
        var listenText = ""
        var index = 0
        var onlyPositional = false

        func value(for name: String, inline: String?) throws(UsageError) -> String {
            if let inline { return inline }
            index += 1
            guard index < arguments.count else { throw UsageError("option \(name) needs a value") }
            return arguments[index]
        }
        /// Takes in one option; a command (help, version) when the option is one.
        func take(_ option: Option, _ value: String) throws(UsageError) -> Command? {
            switch option.action {
            case .help: return .help(try helpTopic(inline: nil))
            case .version: return .version
            case .set(let handler):
                setters.append(try handler(value, option.longName))
                if !given.contains(option.longName) { given.append(option.longName) }
                if option == Option.listen { listenText = value }
            }
            return nil
        }
        /// What --help (or -h) asks for: a category or `all` after it (`--help=tls`, `-h tls`);
        /// the next argument only when it is a word, not a URL or an option (`URL --help`).
        func helpTopic(inline: String?) throws(UsageError) -> HelpTopic {
            guard let word = inline ?? (index + 1 < arguments.count ? arguments[index + 1] : nil) else { return .summary }
            if let topic = HelpTopic(word) { return topic }
            guard inline != nil || (!word.isEmpty && word.utf8.allSatisfy({ $0 | 0x20 >= 0x61 && $0 | 0x20 <= 0x7A })) else {
                return .summary
            }
            throw HelpTopic.unknown(word)
        }
        /// The URL (or a program after -l): websocat's and wscat's forms are named.
        func positional(_ text: String) throws(UsageError) {
            // websocat's stdio address, not a program's argument (`-l 8080 cat -`).
            if text == "-", positionals.allSatisfy(Habits.isURLLike) { throw UsageError("'-' is no URL; \(Habits.websocatStdio)") }
            if let first = positionals.first, Habits.isURLLike(first) || (!given.contains(Option.listen.longName) && Habits.isURLLike(text)) {
                throw UsageError("more than one URL given: '\(Diagnostics.redactedURL(first))' and "
                                 + "'\(Diagnostics.redactedURL(text))'")
            }
            if positionals.isEmpty, let hint = Habits.websocatAddress(text) { throw UsageError(hint) }
            positionals.append(text)
        }

        while index < arguments.count {
            let argument = arguments[index]
            if onlyPositional || argument == "-" || !argument.hasPrefix("-") {
                try positional(argument)
            } else if argument == "--" {
                onlyPositional = true
            } else if argument.hasPrefix("--") {
                var name = argument
                var inline: String?
                if let equals = argument.firstIndex(of: "=") {
                    name = String(argument[..<equals])
                    inline = String(argument[argument.index(after: equals)...])
                }
                if name == "--connect" {
                    // wscat's --connect URL: the URL needs no option.
                    try positional(try value(for: name, inline: inline))
                    note("wscat's --connect: the URL alone is enough")
                    index += 1
                    continue
                }
                guard let option = Option.named(name) else {
                    if name == "--port" {
                        throw UsageError("unknown option '--port'; " + Habits.websocketdPort(inline, after: arguments[(index + 1)...]))
                    }
                    let hint = Habits.foreignFlag(name) ?? Habits.suggestion(for: name)
                    throw UsageError("unknown option '\(name)'" + (hint.map { "; \($0)" } ?? ""))
                }
                if !option.takesValue && inline != nil && option.action.isHelp {
                    return .help(try helpTopic(inline: inline))
                }
                if !option.takesValue && inline != nil { throw UsageError("option \(name) takes no value") }
                let text = option.takesValue ? try value(for: name, inline: inline) : ""
                if let command = try take(option, text) { return command }
                if option == Option.exec {
                    // Everything after the program is its arguments, dashes included.
                    let rest = Array(arguments[(index + 1)...])
                    setters.append { $0.execArguments = rest }
                    break
                }
            } else if argument == "-c" {
                // wscat's -c URL: the URL needs no option.
                try positional(try value(for: "-c", inline: nil))
                note("wscat's -c: the URL alone is enough")
            } else if argument == "-port" || argument.hasPrefix("-port=") {
                // websocketd's -port (Go's flags take one dash): it was "did you mean --cert?".
                let inline = argument.count > 5 ? String(argument.dropFirst(6)) : nil
                throw UsageError("unknown option '-port'; " + Habits.websocketdPort(inline, after: arguments[(index + 1)...]))
            } else if let long = Habits.singleDashLong(argument) {
                // -timeout: a long option with one dash, named as typed (not split into -t -i ...).
                throw UsageError("unknown option '\(long.typed)'; \(long.hint)")
            } else {
                // One or more short flags: -vb, -H value, -Hvalue.
                var letters = Substring(argument.dropFirst())
                while let letter = letters.first {
                    letters = letters.dropFirst()
                    guard let option = Option.named(short: letter) else {
                        if letter == "-" { throw UsageError("'-' in '\(argument)' is no option; \(Habits.websocatStdio)") }
                        if let hint = Habits.foreignFlag("-\(letter)") { throw UsageError("unknown option '-\(letter)'; \(hint)") }
                        // -tiemout: near a long option; named as typed.
                        if let hint = Habits.singleDash(argument, near: true) {
                            throw UsageError("unknown option '\(argument.split(separator: "=", maxSplits: 1)[0])'; \(hint)")
                        }
                        throw UsageError("unknown option '-\(letter)'")
                    }
                    if option.takesValue {
                        let inline = letters.isEmpty ? nil : String(letters)
                        _ = try take(option, value(for: "-\(letter)", inline: inline))
                        break
                    }
                    if option.action.isHelp, !letters.isEmpty {
                        // -hv: help; -htls: the category.
                        return .help(HelpTopic(String(letters)) ?? .summary)
                    }
                    if let command = try take(option, "") { return command }
                }
            }
            index += 1
        }

        var schemeless: SchemelessAddress?
        let urlText = positionals.first
        let url: WebSocketURL
        if given.contains(Option.listen.longName) {
            if given.contains(Option.forwardListen.longName) { throw Settings.forwardListenWithServer }
            // A server has no URL; the configuration's is never used.
            if let urlText {
                if !Habits.isURLLike(urlText) { throw UsageError(Habits.programAfterListen(listenText, positionals)) }
                throw UsageError("a URL ('\(Diagnostics.redactedURL(urlText))') cannot be combined with -l/--listen")
            }
            url = WebSocketURL.unusedByServer
        } else {
            guard let urlText else { throw UsageError("no URL given; usage: wspipe [options] ws://host[:port]/path") }
            if positionals.count > 1 {
                throw UsageError("more than one URL given: '\(Diagnostics.redactedURL(urlText))' and "
                                 + "'\(Diagnostics.redactedURL(positionals[1]))'")
            }
            // wscat's localhost:8080: ws://, checked against credentials below.
            schemeless = SchemelessAddress(urlText)
            do {
                url = try WebSocketURL(parsing: schemeless?.url ?? Habits.unixSocketURL(urlText) ?? urlText)
            } catch {
                throw UsageError(error.description)
            }
        }
        var settings = Settings(config: BridgeConfiguration(url: url))
        settings.given = given
        for set in setters { set(&settings) }
        let config = try settings.finish(environment: environment, readFile: readFile)
        guard let schemeless, let urlText else { return .run(config) }
        return .run(try taking(schemeless, given: urlText, options: given, config))
    }

    /// A URL without a scheme is ws://, in clear: refused when credentials would go with it,
    /// and when the rest of the command line asks for TLS (a TLS option, port 443), which
    /// ws:// would not use.
    private static func taking(_ address: SchemelessAddress, given text: String, options: [String],
                               _ config: BridgeConfiguration) throws(UsageError) -> BridgeConfiguration {
        let credentials = address.hasUserInfo ? (address.hasPassword ? "user:password@" : "user@ (Basic authentication)")
            : config.client.bearerToken != nil ? "a bearer token"
            : config.client.headers.first(where: \.isSensitive).map { "-H \($0.name)" }
        if let credentials {
            throw UsageError("'\(address.shown)' has no scheme, and \(credentials) would go with it in clear as ws://: "
                             + "write wss://, or ws:// to send it unencrypted on purpose")
        }
        if let tls = Option.tls.first(where: { options.contains($0.longName) }) {
            throw UsageError("'\(address.shown)' has no scheme, and \(tls.longName) is for TLS, which ws:// does not use: "
                             + "write wss://")
        }
        if config.client.url.port == 443 {
            throw UsageError("'\(address.shown)' has no scheme, and port 443 is wss://'s: write wss://, "
                             + "or ws:// for WebSocket without TLS on that port on purpose")
        }
        var config = config
        config.client.schemeTakenFrom = text
        return config
    }
}

extension Option.Action {
    var isHelp: Bool {
        if case .help = self { return true }
        return false
    }
}
