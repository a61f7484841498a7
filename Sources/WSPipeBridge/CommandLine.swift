import Glibc
import WebSocketCore
import WebSocketTransport

/// What the command line asks for.
public enum Command: Sendable {
    case help
    case version
    case run(BridgeConfiguration)
}

/// A command-line mistake; exit status 2.
public struct UsageError: Error, Equatable, CustomStringConvertible {
    public let message: String
    public init(_ message: String) { self.message = message }
    public var description: String { message }
}

/// Parses wspipe's arguments. Options and the URL may come in any order; `--name=value`
/// and `--name value` are equivalent, short flags combine (`-vb`), `-Hvalue` works, and
/// `--` ends the options.
public enum CommandLineParser {
    /// - Parameters:
    ///   - arguments: the arguments after the program name.
    ///   - environment: looks up environment variables (WSPIPE_BEARER).
    ///   - readFile: reads a file given to an option (--bearer-file); nil if unreadable.
    public static func parse(_ arguments: [String], environment: (String) -> String? = { _ in nil },
                             readFile: (String) -> [UInt8]? = readWholeFile) throws(UsageError) -> Command {
        var urlText: String?
        var options = ParsedOptions()
        var index = 0
        var onlyPositional = false

        func value(for name: String, inline: String?) throws(UsageError) -> String {
            if let inline { return inline }
            index += 1
            guard index < arguments.count else { throw UsageError("option \(name) needs a value") }
            return arguments[index]
        }

        while index < arguments.count {
            let argument = arguments[index]
            if onlyPositional || argument == "-" || !argument.hasPrefix("-") {
                guard urlText == nil else {
                    throw UsageError("more than one URL given ('\(redactURL(urlText ?? ""))' and '\(redactURL(argument))')")
                }
                urlText = argument
            } else if argument == "--" {
                onlyPositional = true
            } else if argument.hasPrefix("--") {
                var name = argument
                var inline: String?
                if let equals = argument.firstIndex(of: "=") {
                    name = String(argument[..<equals])
                    inline = String(argument[argument.index(after: equals)...])
                }
                guard let option = Option.byLongName[name] else {
                    throw UsageError("unknown option '\(name)'")
                }
                if option.takesValue {
                    try options.apply(option, value: value(for: name, inline: inline), readFile: readFile)
                } else {
                    guard inline == nil else { throw UsageError("option \(name) takes no value") }
                    try options.apply(option, value: nil, readFile: readFile)
                }
                if option == .help { return .help }
                if option == .version { return .version }
            } else {
                // One or more short flags: -vb, -H value, -Hvalue.
                var letters = Substring(argument.dropFirst())
                while let letter = letters.first {
                    letters = letters.dropFirst()
                    guard let option = Option.byShortName[letter] else { throw UsageError("unknown option '-\(letter)'") }
                    if option.takesValue {
                        let inline = letters.isEmpty ? nil : String(letters)
                        try options.apply(option, value: value(for: "-\(letter)", inline: inline), readFile: readFile)
                        break
                    }
                    try options.apply(option, value: nil, readFile: readFile)
                    if option == .help { return .help }
                    if option == .version { return .version }
                }
            }
            index += 1
        }

        guard let urlText else { throw UsageError("no URL given (usage: wspipe [options] ws://host[:port]/path)") }
        let url: WebSocketURL
        do {
            url = try WebSocketURL(parsing: urlText)
        } catch {
            throw UsageError(error.description)
        }
        return .run(try options.configuration(url: url, environment: environment, readFile: readFile))
    }

    /// A URL for messages, with any user:password removed.
    static func redactURL(_ text: String) -> String {
        let bytes = Array(text.utf8)
        guard let colon = bytes.firstIndex(of: UInt8(ascii: ":")), bytes[colon...].starts(with: Array("://".utf8)) else {
            return text
        }
        let start = colon + 3
        let authorityEnd = bytes[start...].firstIndex { $0 == UInt8(ascii: "/") || $0 == UInt8(ascii: "?") } ?? bytes.endIndex
        guard let at = bytes[start..<authorityEnd].lastIndex(of: UInt8(ascii: "@")) else { return text }
        return String(decoding: bytes[..<start], as: UTF8.self) + "[redacted]@" + String(decoding: bytes[(at + 1)...], as: UTF8.self)
    }
}

/// Every option, with its names. The help text, the man page and this table list the same
/// set (a test checks the man page and --help against `Option.allCases`).
public enum Option: String, CaseIterable, Sendable {
    case text, binary, null, chunkSize, noClose, closeCode, closeReason, closeTimeout, connectTimeout
    case maxMessageSize, pingInterval, pingTimeout, header, subprotocol, origin, userAgent
    case bearer, bearerFile, cacert, insecure, verbose, quiet, help, version
    case proxy, noproxy, socks5, cert, key, keyPassEnv, keyPassFile, tlsMin, connectTo, sni, unixSocket, resolve
    case ipv4, ipv6, location, maxRedirs
    case jsonl, base64, timestamps, wholeInput, maxMessages, oneMessage, send, timeout, idleTimeout, linger
    case receiveOnly, sendOnly, stats

    public var longName: String {
        switch self {
        case .text: return "--text"
        case .binary: return "--binary"
        case .null: return "--null"
        case .chunkSize: return "--chunk-size"
        case .noClose: return "--no-close"
        case .closeCode: return "--close-code"
        case .closeReason: return "--close-reason"
        case .closeTimeout: return "--close-timeout"
        case .connectTimeout: return "--connect-timeout"
        case .maxMessageSize: return "--max-message-size"
        case .pingInterval: return "--ping-interval"
        case .pingTimeout: return "--ping-timeout"
        case .header: return "--header"
        case .subprotocol: return "--protocol"
        case .origin: return "--origin"
        case .userAgent: return "--user-agent"
        case .bearer: return "--bearer"
        case .bearerFile: return "--bearer-file"
        case .cacert: return "--cacert"
        case .insecure: return "--insecure"
        case .verbose: return "--verbose"
        case .quiet: return "--quiet"
        case .help: return "--help"
        case .version: return "--version"
        case .proxy: return "--proxy"
        case .noproxy: return "--noproxy"
        case .socks5: return "--socks5"
        case .cert: return "--cert"
        case .key: return "--key"
        case .keyPassEnv: return "--key-pass-env"
        case .keyPassFile: return "--key-pass-file"
        case .tlsMin: return "--tls-min"
        case .connectTo: return "--connect-to"
        case .sni: return "--sni"
        case .unixSocket: return "--unix-socket"
        case .resolve: return "--resolve"
        case .ipv4: return "--ipv4"
        case .ipv6: return "--ipv6"
        case .location: return "--location"
        case .maxRedirs: return "--max-redirs"
        case .jsonl: return "--jsonl"
        case .base64: return "--base64"
        case .timestamps: return "--timestamps"
        case .wholeInput: return "--whole-input"
        case .maxMessages: return "--max-messages"
        case .oneMessage: return "--one-message"
        case .send: return "--send"
        case .timeout: return "--timeout"
        case .idleTimeout: return "--idle-timeout"
        case .linger: return "--linger"
        case .receiveOnly: return "--receive-only"
        case .sendOnly: return "--send-only"
        case .stats: return "--stats"
        }
    }

    public var shortName: Character? {
        switch self {
        case .text: return "t"
        case .binary: return "b"
        case .null: return "0"
        case .header: return "H"
        case .insecure: return "k"
        case .verbose: return "v"
        case .quiet: return "q"
        case .help: return "h"
        case .version: return "V"
        case .ipv4: return "4"
        case .ipv6: return "6"
        case .location: return "L"
        case .maxMessages: return "n"
        case .oneMessage: return "1"
        default: return nil
        }
    }

    public var takesValue: Bool {
        switch self {
        case .chunkSize, .closeCode, .closeReason, .closeTimeout, .connectTimeout, .maxMessageSize, .pingInterval,
             .pingTimeout, .header, .subprotocol, .origin, .userAgent, .bearer, .bearerFile, .cacert,
             .proxy, .noproxy, .socks5, .cert, .key, .keyPassEnv, .keyPassFile, .tlsMin, .connectTo, .sni, .unixSocket,
             .resolve, .maxRedirs,
             .maxMessages, .send, .timeout, .idleTimeout, .linger:
            return true
        default:
            return false
        }
    }

    static let byLongName = Dictionary(uniqueKeysWithValues: allCases.map { ($0.longName, $0) })
    static let byShortName = Dictionary(uniqueKeysWithValues: allCases.compactMap { option in
        option.shortName.map { ($0, option) }
    })
}

/// Option values as given, before they are combined into a configuration.
private struct ParsedOptions {
    var mode = BridgeConfiguration.Mode.text
    var null = false
    var chunkSize: Int?
    var noClose = false
    var closeCode: CloseCode?
    var closeReason: String?
    var closeTimeout: Double?
    var connectTimeout: Double?
    var maxMessageSize: UInt64?
    var pingInterval: Double?
    var pingTimeout: Double?
    var headers: [HTTPHeader] = []
    var subprotocols: [String] = []
    var origin: String?
    var userAgent: String?
    var bearer: String?
    var bearerFile: String?
    var caFile: String?
    var insecure = false
    var verbosity = 0
    var proxy: ProxySetting = .environment
    var noProxy: String?
    var certFile: String?
    var keyFile: String?
    var keyPassEnv: String?
    var keyPassFile: String?
    var tlsMin: TLSVersion?
    var connectTo: String?
    var sni: String?
    var unixSocket: String?
    var resolve: [ResolveOverride] = []
    var family = AddressFamily.any
    var location = false
    var maxRedirs: Int?
    var jsonl = false
    var base64 = false
    var timestamps = false
    var wholeInput = false
    var maxMessages: Int?
    var oneMessage = false
    var send: [String] = []
    var timeout: Double?
    var idleTimeout: Double?
    var linger: Double?
    var receiveOnly = false
    var sendOnly = false
    var stats = false

    mutating func apply(_ option: Option, value: String?, readFile: (String) -> [UInt8]?) throws(UsageError) {
        let text = value ?? ""
        let name = option.longName
        switch option {
        case .text: mode = .text
        case .binary: mode = .binary
        case .null: null = true
        case .chunkSize:
            let size = try parseSize(text, option: name)
            guard size >= 1 && size <= 1 << 30 else { throw UsageError("\(name) must be between 1 byte and 1 GiB") }
            chunkSize = Int(size)
        case .noClose: noClose = true
        case .closeCode:
            guard let number = UInt16(text) else { throw UsageError("\(name) '\(text)' is not a number") }
            let code = CloseCode(number)
            guard code.isSendable else {
                throw UsageError("\(name) \(number) may not be sent (use 1000-1003, 1007-1014 or 3000-4999)")
            }
            closeCode = code
        case .closeReason:
            guard text.utf8.count <= ClosePayload.maximumReasonLength else {
                throw UsageError("\(name) is \(text.utf8.count) bytes; at most \(ClosePayload.maximumReasonLength) fit in a Close frame")
            }
            closeReason = text
        case .closeTimeout: closeTimeout = try parseSeconds(text, option: name)
        case .connectTimeout: connectTimeout = try parseSeconds(text, option: name)
        case .maxMessageSize:
            let size = try parseSize(text, option: name)
            guard size >= 1 else { throw UsageError("\(name) must be at least 1 byte") }
            maxMessageSize = size
        case .pingInterval: pingInterval = try parseSeconds(text, option: name)
        case .pingTimeout: pingTimeout = try parseSeconds(text, option: name)
        case .header:
            do {
                let header = try HTTPHeader(parsing: text)
                try ClientHandshake.validateUserHeaders([header])
                if header.hasName("Sec-WebSocket-Protocol") {
                    for item in HTTPText.list(header.value) {
                        try addSubprotocol(item, option: name)
                    }
                } else {
                    headers.append(header)
                }
            } catch {
                throw UsageError("-H '\(text.prefix(60))': \(error)")
            }
        case .subprotocol:
            try addSubprotocol(text, option: name)
        case .origin:
            try checkHeaderValue(text, option: name)
            origin = text
        case .userAgent:
            try checkHeaderValue(text, option: name)
            userAgent = text
        case .bearer:
            try checkToken(text, source: name)
            bearer = text
        case .bearerFile:
            bearerFile = text
        case .cacert:
            guard access(text, R_OK) == 0 else { throw UsageError("cannot read CA file '\(text)': \(String(cString: strerror(errno)))") }
            caFile = text
        case .insecure: insecure = true
        case .proxy:
            if text.isEmpty {
                proxy = .none
            } else {
                do {
                    proxy = .url(try ProxyURL(parsing: text))
                } catch {
                    throw UsageError("\(name): \(error)")
                }
            }
        case .socks5:
            let parsed: ProxyURL
            do {
                parsed = try ProxyURL(parsing: text, defaultKind: .socks5)
            } catch {
                throw UsageError("\(name): \(error)")
            }
            guard parsed.kind.isSOCKS else {
                throw UsageError("\(name) takes HOST:PORT or a socks5:// or socks5h:// URL (use --proxy for \(parsed.kind.rawValue)://)")
            }
            proxy = .url(parsed)
        case .noproxy: noProxy = text
        case .cert: certFile = try readableFile(text, option: name)
        case .key: keyFile = try readableFile(text, option: name)
        case .keyPassEnv:
            guard !text.isEmpty else { throw UsageError("\(name) needs the name of an environment variable") }
            keyPassEnv = text
        case .keyPassFile: keyPassFile = try readableFile(text, option: name)
        case .tlsMin:
            let normalized = text.lowercased().replacingPrefix("tlsv", "").replacingPrefix("tls", "")
            guard let version = TLSVersion(rawValue: normalized) else {
                throw UsageError("\(name) '\(text)' is not a TLS version (1.2 or 1.3)")
            }
            tlsMin = version
        case .connectTo:
            guard HostPort(parsing: text) != nil || HostPort(parsing: text, defaultPort: 1) != nil else {
                throw UsageError("\(name) '\(text)' is not HOST:PORT (an IPv6 address in brackets: [::1]:8443)")
            }
            connectTo = text
        case .sni:
            guard !text.isEmpty, text.utf8.count <= 253,
                  text.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7F && !"/?#@[]:,".utf8.contains($0) }) || IPAddress(text) != nil else {
                throw UsageError("\(name) '\(text)' is not a host name")
            }
            sni = text
        case .unixSocket:
            guard !text.isEmpty, text.utf8.count <= WebSocketURL.maximumUnixPathLength, !text.utf8.contains(0) else {
                throw UsageError("\(name) needs a socket path of 1 to \(WebSocketURL.maximumUnixPathLength) bytes")
            }
            unixSocket = text
        case .resolve:
            guard let entry = ResolveOverride(parsing: text) else {
                throw UsageError("\(name) '\(text)' is not HOST:PORT:ADDRESS[,ADDRESS...] (IP addresses)")
            }
            resolve.append(entry)
        case .ipv4: family = .ipv4
        case .ipv6: family = .ipv6
        case .location: location = true
        case .maxRedirs:
            guard let number = Int(text), number >= 0, number <= 1000 else {
                throw UsageError("\(name) '\(text)' is not a number from 0 to 1000")
            }
            maxRedirs = number
        case .verbose: verbosity = 1
        case .quiet: verbosity = -1
        case .help, .version: break
        case .jsonl: jsonl = true
        case .base64: base64 = true
        case .timestamps: timestamps = true
        case .wholeInput: wholeInput = true
        case .maxMessages:
            guard let count = Int(text), count >= 1 else { throw UsageError("\(name) '\(text)' is not a positive number of messages") }
            maxMessages = count
        case .oneMessage: oneMessage = true
        case .send: send.append(text)
        case .timeout: timeout = try parseSeconds(text, option: name)
        case .idleTimeout: idleTimeout = try parseSeconds(text, option: name)
        case .linger: linger = try parseSeconds(text, option: name)
        case .receiveOnly: receiveOnly = true
        case .sendOnly: sendOnly = true
        case .stats: stats = true
        }
    }

    /// Options that contradict each other are refused rather than one silently ignored.
    func checkCombinations() throws(UsageError) {
        func refuse(_ a: String, _ b: String, _ why: String) throws(UsageError) {
            throw UsageError("\(a) cannot be combined with \(b): \(why)")
        }
        if null && mode == .binary && !base64 {
            try refuse("-0/--null", "--binary", "binary mode has no separator (add --base64 for NUL-separated base64 lines)")
        }
        if jsonl {
            if mode == .binary { try refuse("--jsonl", "--binary", "--jsonl carries both message types") }
            if null { try refuse("--jsonl", "-0/--null", "JSON Lines are newline-separated") }
            if base64 { try refuse("--jsonl", "--base64", "--jsonl already encodes binary messages in base64") }
            if wholeInput { try refuse("--jsonl", "--whole-input", "--jsonl reads one message per line") }
        }
        if timestamps && !jsonl { throw UsageError("--timestamps needs --jsonl (it adds \"ts\" to each JSON line)") }
        if wholeInput && base64 { try refuse("--whole-input", "--base64", "--base64 reads one message per line") }
        if oneMessage && maxMessages != nil { try refuse("-1/--one-message", "-n/--max-messages", "-1 means -n 1") }
        if receiveOnly && sendOnly { try refuse("--receive-only", "--send-only", "nothing would be bridged") }
        if linger != nil {
            if noClose { try refuse("--linger", "--no-close", "--no-close never closes at the end of input") }
            if maxMessages != nil || oneMessage {
                try refuse("--linger", oneMessage ? "-1" : "-n", "with a message count, the end of input does not close")
            }
            if receiveOnly { try refuse("--linger", "--receive-only", "stdin is not read") }
        }
        if receiveOnly && wholeInput { try refuse("--whole-input", "--receive-only", "stdin is not read") }
    }

    mutating func addSubprotocol(_ name: String, option: String) throws(UsageError) {
        guard !name.isEmpty, name.utf8.allSatisfy({ byte in
            byte > 0x20 && byte < 0x7F && !"()<>@,;:\\\"/[]?={}".utf8.contains(byte)
        }) else {
            throw UsageError("\(option) '\(name)' is not a valid subprotocol name (an HTTP token)")
        }
        if !subprotocols.contains(name) { subprotocols.append(name) }
    }

    func configuration(url: WebSocketURL, environment: (String) -> String?,
                       readFile: (String) -> [UInt8]?) throws(UsageError) -> BridgeConfiguration {
        try checkCombinations()
        var config = BridgeConfiguration(url: url)
        config.mode = mode
        if null { config.separator = 0 }
        if let chunkSize { config.chunkSize = chunkSize }
        config.closeOnEndOfInput = !noClose
        if let closeCode { config.closeCode = closeCode }
        if let closeReason { config.closeReason = closeReason }
        if let closeTimeout { config.closeTimeout = closeTimeout }
        if let connectTimeout { config.connectTimeout = connectTimeout }
        if let maxMessageSize { config.maxMessageSize = maxMessageSize }
        config.pingInterval = pingInterval
        config.pingTimeout = pingTimeout
        config.headers = headers
        config.subprotocols = subprotocols
        config.origin = origin
        if let userAgent { config.userAgent = userAgent.isEmpty ? nil : userAgent }
        config.caFile = caFile
        config.insecure = insecure
        config.verbosity = verbosity
        try applyNetwork(to: &config, environment: environment, readFile: readFile)
        config.jsonLines = jsonl
        config.base64 = base64
        config.timestamps = timestamps
        config.wholeInput = wholeInput
        config.oneMessage = oneMessage
        config.maxMessages = oneMessage ? 1 : maxMessages
        config.sendMessages = send
        config.sessionTimeout = timeout
        config.idleTimeout = idleTimeout
        config.linger = linger
        config.receiveOnly = receiveOnly
        config.sendOnly = sendOnly
        config.stats = stats

        // Bearer token: --bearer, else --bearer-file, else $WSPIPE_BEARER.
        if let bearer {
            config.bearerToken = bearer
        } else if let bearerFile {
            guard let bytes = readFile(bearerFile) else {
                throw UsageError("cannot read --bearer-file '\(bearerFile)': \(whyUnreadable(bearerFile))")
            }
            guard UTF8Validator.isValid(bytes) else { throw UsageError("--bearer-file '\(bearerFile)' is not UTF-8 text") }
            let token = HTTPText.trimmed(String(decoding: bytes, as: UTF8.self), also: [0x0A, 0x0D])
            try checkToken(token, source: "--bearer-file '\(bearerFile)'")
            config.bearerToken = token
        } else if let token = environment("WSPIPE_BEARER"), !token.isEmpty {
            try checkToken(token, source: "WSPIPE_BEARER")
            config.bearerToken = token
        }
        return config
    }
}

extension ParsedOptions {
    /// Proxies, dial overrides, client certificate, redirects.
    func applyNetwork(to config: inout BridgeConfiguration, environment: (String) -> String?,
                      readFile: (String) -> [UInt8]?) throws(UsageError) {
        var network = DialOptions()
        network.proxy = proxy
        network.noProxy = noProxy
        for name in ProxySelection.variableNames {
            if let value = environment(name) { network.environment[name] = value }
        }
        if let unixSocket {
            guard config.url.unixSocketPath == nil else {
                throw UsageError("--unix-socket cannot be combined with a ws+unix:// URL, which names its socket already")
            }
            config.url.unixSocketPath = unixSocket
        }
        if let connectTo {
            guard config.url.unixSocketPath == nil else {
                throw UsageError("--connect-to cannot be combined with a Unix socket")
            }
            network.connectTo = HostPort(parsing: connectTo) ?? HostPort(parsing: connectTo, defaultPort: config.url.port)
        }
        network.serverName = sni
        network.connect = ConnectOptions(family: family, overrides: resolve)
        if let tlsMin { network.minimumTLSVersion = tlsMin }

        if keyFile != nil || keyPassEnv != nil || keyPassFile != nil, certFile == nil {
            throw UsageError("--key, --key-pass-env and --key-pass-file need --cert")
        }
        if keyPassEnv != nil && keyPassFile != nil {
            throw UsageError("give the key's passphrase with --key-pass-env or --key-pass-file, not both")
        }
        if let certFile {
            var password: [UInt8]?
            if let keyPassEnv {
                guard let value = environment(keyPassEnv), !value.isEmpty else {
                    throw UsageError("--key-pass-env: the environment variable \(keyPassEnv) is not set or empty")
                }
                password = Array(value.utf8)
            } else if let keyPassFile {
                guard var bytes = readFile(keyPassFile) else { throw UsageError("cannot read --key-pass-file '\(keyPassFile)': \(whyUnreadable(keyPassFile))") }
                // One line end at the end is the file's, not the passphrase's.
                if bytes.last == 0x0A { bytes.removeLast() }
                if bytes.last == 0x0D { bytes.removeLast() }
                guard !bytes.isEmpty else { throw UsageError("--key-pass-file '\(keyPassFile)' is empty") }
                password = bytes
            }
            network.clientCertificate = ClientCertificate(certificateFile: certFile, keyFile: keyFile ?? certFile,
                                                          keyPassword: password)
        }
        config.network = network
        config.followRedirects = location
        if let maxRedirs { config.maxRedirects = maxRedirs }
    }
}

/// `path` if it is a readable file; a usage error naming the option otherwise.
private func readableFile(_ path: String, option: String) throws(UsageError) -> String {
    guard access(path, R_OK) == 0 else { throw UsageError("cannot read \(option) file '\(path)': \(String(cString: strerror(errno)))") }
    return path
}

private func checkToken(_ token: String, source: String) throws(UsageError) {
    guard !token.isEmpty else { throw UsageError("\(source): the bearer token is empty") }
    guard token.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7F }) else {
        throw UsageError("\(source): the bearer token contains spaces, control or non-ASCII characters")
    }
}

private func checkHeaderValue(_ value: String, option: String) throws(UsageError) {
    guard value.utf8.allSatisfy({ $0 == 0x09 || ($0 >= 0x20 && $0 != 0x7F) }) else {
        throw UsageError("\(option) contains CR, LF or another control character")
    }
}

/// "65536", "64K", "64KiB", "1M", "1MiB", "1G" (binary multiples) as bytes.
func parseSize(_ text: String, option: String) throws(UsageError) -> UInt64 {
    var digits = Substring(text)
    var multiplier: UInt64 = 1
    for (suffix, factor) in [("KiB", UInt64(1) << 10), ("MiB", 1 << 20), ("GiB", 1 << 30),
                             ("K", 1 << 10), ("M", 1 << 20), ("G", 1 << 30)] where text.hasSuffix(suffix) {
        digits = digits.dropLast(suffix.count)
        multiplier = factor
        break
    }
    guard let number = UInt64(digits) else {
        throw UsageError("\(option) '\(text)' is not a size (bytes, or with K, M, G suffixes)")
    }
    let (bytes, overflow) = number.multipliedReportingOverflow(by: multiplier)
    guard !overflow else { throw UsageError("\(option) '\(text)' is too large") }
    return bytes
}

/// A positive number of seconds ("5", "0.25").
func parseSeconds(_ text: String, option: String) throws(UsageError) -> Double {
    guard let seconds = Double(text), seconds.isFinite, seconds > 0 else {
        throw UsageError("\(option) '\(text)' is not a positive number of seconds")
    }
    guard seconds <= 1e9 else { throw UsageError("\(option) '\(text)' is too large (at most 1e9 seconds)") }
    return seconds
}

/// Why `readWholeFile` gave nothing for `path`, in words (for the error message).
func whyUnreadable(_ path: String) -> String {
    let fd = open(path, O_RDONLY | O_CLOEXEC)
    guard fd >= 0 else { return String(cString: strerror(errno)) }
    defer { close(fd) }
    var info = stat()
    if fstat(fd, &info) == 0 {
        if info.st_mode & S_IFMT == S_IFDIR { return "it is a directory" }
        if info.st_size > 1 << 20 { return "it is larger than 1 MiB" }
    }
    return "read error"
}

/// The whole file at `path` (at most 1 MiB), or nil if it cannot be read.
public func readWholeFile(_ path: String) -> [UInt8]? {
    let fd = open(path, O_RDONLY | O_CLOEXEC)
    guard fd >= 0 else { return nil }
    defer { close(fd) }
    var bytes: [UInt8] = []
    var chunk = [UInt8](repeating: 0, count: 4096)
    while true {
        let n = chunk.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
        if n < 0 && errno == EINTR { continue }
        if n < 0 { return nil }
        if n == 0 { return bytes }
        bytes += chunk[0..<n]
        if bytes.count > 1 << 20 { return nil }
    }
}

extension String {
    func replacingPrefix(_ prefix: String, _ replacement: String) -> String {
        hasPrefix(prefix) ? replacement + dropFirst(prefix.count) : self
    }
}
