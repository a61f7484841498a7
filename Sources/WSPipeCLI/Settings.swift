import Glibc
import WebSocketCore
import WebSocketEngine
import WebSocketTransport
import WSPipeBridge
import WSPipeBus

/// The configuration as the options build it, with the few values that can only be
/// combined once every option is read (files to read, the URL's own socket and port).
struct Settings {
    var config: BridgeConfiguration
    var bearerFile: String?
    /// --cert, --key, --key-pass-env, --key-pass-file, --client-ca.
    var tls = TLSFiles()
    var connectTo: String?
    var unixSocket: String?
    /// --no-deflate, the --deflate-* tuning options given and the offer they make.
    var compression = DeflateChoice()
    // Server mode (-l): see ServerSettings.swift.
    var listen: ListenAddress?
    /// -l localhost:PORT: 127.0.0.1, and [::1] where the host has it.
    var listenLocalhost = false
    var policy = HandshakePolicy()
    var requireBearer = false
    var maxClients: Int?
    /// --max-clients-per-ip, --max-handshakes-per-ip, --ipv6-prefix (applied when one of the first two is set).
    var addressLimits = AddressLimitSettings()
    var ipv6PrefixBits: Int?
    /// --rate-limit, --byte-rate, --rate-limit-action.
    var rates = MessageRateSettings()
    var handshakeTimeout: Double?
    var oneshot = false
    var reusePort = false
    /// --metrics-public: the metrics without a token on a non-loopback listener.
    var metricsPublic = false
    /// --trust-proxy, --proxy-protocol, --client-address-header.
    var clientAddress = ClientAddressPolicy()
    /// --static (--staticdir) and --devconsole.
    var site = StaticSiteConfiguration()
    /// --bus, --bus-inbound, --bus-password-file, --bus-ping (--broadcast only).
    var bus = BusFiles()
    // --exec/--sh and their settings.
    var execProgram: String?
    var execArguments: [String] = []
    var execShell: String?
    /// --dir DIR: a program per path under DIR.
    var execDirectory: String?
    var closeGrace: Double?
    var maxChildren: Int?
    var passing: [String] = []
    /// --forward/--forward-tokens (the gateway).
    var forward = ForwardServing()
    /// Long names of the options given, for the checks of server mode. An array: a Set's
    /// metadata, made at run time, checks String's Hashable conformance against every
    /// conformance record of the binary (137,000 instructions at each start, callgrind).
    var given: [String] = []
    /// --reconnect, and what the reconnection options set (only with it).
    var reconnect = false
    var reconnection = ClientConfiguration.Reconnection()
    var sendFile: String?
    /// --until and --until-json given (one is taken).
    var untils = 0
    /// --forward-listen's address (ForwardListenSettings.swift).
    var forwardListen: ListenAddress?
    /// --interactive (true), --no-interactive (false), neither (nil: `ConsoleRule` decides).
    var interactive: Bool?
    /// --no-history: the console saves and loads no history.
    var keepsHistory = true

    /// Adds a subprotocol (already checked) unless it is offered already.
    mutating func addSubprotocol(_ name: String) {
        if !config.subprotocols.contains(name) { config.subprotocols.append(name) }
    }

    /// The configuration, after the checks that need every option. Throws `UsageError`.
    func finish(environment: (String) -> String?, readFile: (String) -> [UInt8]?) throws(UsageError) -> BridgeConfiguration {
        try checkForwardListen()
        if listen != nil || given.contains(where: { Option.named($0)?.isServerOnly == true }) {
            return try finishServer(environment: environment, readFile: readFile)
        }
        var config = self.config
        config.stdio.console = try console(environment: environment)
        try checkCombinations(console: config.stdio.console != nil)
        try checkConversation()
        config.forwardListen = forwardListen
        config.client.tlsOptionsGiven = Option.tls.map(\.longName).filter { given.contains($0) }
        config.client.deflate = compression.disabled ? nil : compression.offer
        if reconnect {
            config.client.reconnect = reconnection
        } else if let first = given.first(where: { Option.named($0)?.scope.contains(.reconnect) == true }) {
            throw UsageError("\(first) needs --reconnect")
        }
        if let sendFile {
            guard let bytes = readFile(sendFile) else {
                throw UsageError("cannot read --send-file '\(sendFile)': \(whyUnreadable(sendFile))", pointsAtHelp: false)
            }
            if let problem = sendFileProblem(bytes, path: sendFile, jsonLines: config.stdio.jsonLines, separator: config.stdio.separator) {
                throw UsageError(problem, pointsAtHelp: false)
            }
            config.client.sendFile = bytes
        }
        if config.stdio.oneMessage { config.stdio.maxMessages = 1 }
        try applyNetwork(to: &config, environment: environment, readFile: readFile)

        // Bearer token: --bearer, else --bearer-file, else $WSPIPE_BEARER.
        if config.client.bearerToken != nil {
            return config
        } else if let bearerFile {
            config.client.bearerToken = try tokenFromFile(bearerFile, readFile: readFile)
            config.client.bearerFile = bearerFile  // read again before every reconnection attempt
        } else if let token = environment("WSPIPE_BEARER"), !token.isEmpty {
            try checkToken(token, source: "WSPIPE_BEARER")
            config.client.bearerToken = token
        }
        return config
    }

    /// Whether this run (the client, or the stdio server) is a console (issue 36): with
    /// --interactive, or without --no-interactive where `ConsoleRule` holds; never in the
    /// modes that are no person's (binary, NUL, JSON Lines, base64, one message of all of
    /// stdin, one direction only, payloads inflated for stdout). Throws for --interactive
    /// where it cannot be.
    func console(environment: (String) -> String?) throws(UsageError) -> ConsoleSettings? {
        guard interactive != false else { return nil }
        let c = config.stdio
        let excluded: String? = c.mode == .binary ? "--binary" : c.separator == 0 ? "-0/--null" : c.jsonLines ? "--jsonl"
            : c.base64 ? "--base64" : c.wholeInput ? "--whole-input" : c.receiveOnly ? "--receive-only"
            : c.sendOnly ? "--send-only" : c.decompress != nil ? "--decompress" : nil
        if interactive == true {
            if let excluded { throw UsageError("--interactive cannot be combined with \(excluded): the console types and shows lines of text") }
            guard ConsoleRule.terminals else {
                throw UsageError("--interactive needs a terminal on stdin and stdout (\(isatty(0) == 1 ? "stdout" : "stdin") is not one)")
            }
        } else if excluded != nil || !ConsoleRule.holds(term: environment("TERM")) {
            return nil
        }
        return ConsoleRule.settings(history: keepsHistory, environment: environment)
    }

    /// Options that contradict each other are refused rather than one silently ignored.
    func checkCombinations(console: Bool = false) throws(UsageError) {
        func refuse(_ a: String, _ b: String, _ why: String) throws(UsageError) {
            throw UsageError("\(a) cannot be combined with \(b): \(why)")
        }
        let c = config
        let null = c.stdio.separator == 0
        if null && c.stdio.mode == .binary && !c.stdio.base64 {
            try refuse("-0/--null", "--binary", "binary mode has no separator (add --base64 for NUL-separated base64 lines)")
        }
        if c.stdio.jsonLines {
            if c.stdio.mode == .binary { try refuse("--jsonl", "--binary", "--jsonl carries both message types") }
            if null { try refuse("--jsonl", "-0/--null", "JSON Lines are newline-separated") }
            if c.stdio.base64 { try refuse("--jsonl", "--base64", "--jsonl already encodes binary messages in base64") }
            if c.stdio.wholeInput { try refuse("--jsonl", "--whole-input", "--jsonl reads one message per line") }
        }
        if compression.disabled, let first = compression.tuning.first {
            try refuse("--no-deflate", first, "with --no-deflate nothing is offered to tune")
        }
        if c.stdio.timestamps && !c.stdio.jsonLines && !console {
            throw UsageError("--timestamps needs --jsonl (it adds \"ts\" to each JSON line) or the console (a terminal)")
        }
        if c.stdio.wholeInput && c.stdio.base64 { try refuse("--whole-input", "--base64", "--base64 reads one message per line") }
        if c.stdio.oneMessage && c.stdio.maxMessages != nil { try refuse("-1/--one-message", "-n/--max-messages", "-1 means -n 1") }
        if c.stdio.requireCount && c.stdio.maxMessages == nil && !c.stdio.oneMessage && c.client.conversation.until == nil {
            throw UsageError("--require-count needs -n N, -1 or --until: the count (or the message) to require")
        }
        if c.stdio.receiveOnly && c.stdio.sendOnly { try refuse("--receive-only", "--send-only", "nothing would be bridged") }
        if c.stdio.linger != nil {
            if !c.stdio.closeOnEndOfInput { try refuse("--linger", "--no-close", "--no-close never closes at the end of input") }
            if c.stdio.maxMessages != nil || c.stdio.oneMessage {
                try refuse("--linger", c.stdio.oneMessage ? "-1" : "-n", "with a message count, the end of input does not close")
            }
            if c.stdio.receiveOnly { try refuse("--linger", "--receive-only", "stdin is not read") }
        }
        if c.stdio.receiveOnly && c.stdio.wholeInput { try refuse("--whole-input", "--receive-only", "stdin is not read") }
    }

    /// Proxy variables, the Unix socket and --connect-to against the URL, the client certificate.
    private func applyNetwork(to config: inout BridgeConfiguration, environment: (String) -> String?,
                              readFile: (String) -> [UInt8]?) throws(UsageError) {
        for name in ProxySelection.variableNames {
            if let value = environment(name) { config.client.network.environment[name] = value }
        }
        if let unixSocket {
            guard config.client.url.unixSocketPath == nil else {
                throw UsageError("--unix-socket cannot be combined with a ws+unix:// URL, which names its socket already")
            }
            config.client.url.unixSocketPath = unixSocket
        }
        if let connectTo {
            guard config.client.url.unixSocketPath == nil else {
                throw UsageError("--connect-to cannot be combined with a Unix socket")
            }
            config.client.network.connectTo = HostPort(parsing: connectTo) ?? HostPort(parsing: connectTo, defaultPort: config.client.url.port)
        }

        if tls.key != nil || tls.keyPassEnv != nil || tls.keyPassFile != nil, tls.certificate == nil {
            throw UsageError("--key, --key-pass-env and --key-pass-file need --cert")
        }
        if tls.keyPassEnv != nil && tls.keyPassFile != nil {
            throw UsageError("give the key's passphrase with --key-pass-env or --key-pass-file, not both")
        }
        guard let certFile = tls.certificate else { return }
        config.client.network.clientCertificate = ClientCertificate(certificateFile: certFile, keyFile: tls.key ?? certFile,
                                                             keyPassword: try keyPassword(environment: environment, readFile: readFile))
    }

    /// The key's passphrase from --key-pass-env or --key-pass-file (nil: neither), for the
    /// client's certificate or the server's. Throws `UsageError` for an unset variable or
    /// an unreadable or empty file.
    func keyPassword(environment: (String) -> String?, readFile: (String) -> [UInt8]?) throws(UsageError) -> [UInt8]? {
        var password: [UInt8]?
        if let keyPassEnv = tls.keyPassEnv {
            guard let value = environment(keyPassEnv), !value.isEmpty else {
                throw UsageError("--key-pass-env: the environment variable \(keyPassEnv) is not set or empty", pointsAtHelp: false)
            }
            password = Array(value.utf8)
        } else if let keyPassFile = tls.keyPassFile {
            guard var bytes = readFile(keyPassFile) else {
                throw UsageError("cannot read --key-pass-file '\(keyPassFile)': \(whyUnreadable(keyPassFile))", pointsAtHelp: false)
            }
            // One line end at the end is the file's, not the passphrase's.
            if bytes.last == 0x0A { bytes.removeLast() }
            if bytes.last == 0x0D { bytes.removeLast() }
            guard !bytes.isEmpty else { throw UsageError("--key-pass-file '\(keyPassFile)' is empty", pointsAtHelp: false) }
            password = bytes
        }
        return password
    }
}

/// --no-deflate and the --deflate-* tuning options given (refused with --no-deflate), and the offer they make.
struct DeflateChoice {
    var tuning: [String] = []
    var offer = PerMessageDeflate.defaultOffer
    var disabled = false
}

/// --bus's URL, --bus-inbound's channel, --bus-password-file and --bus-ping, as given.
struct BusFiles {
    var address: BusAddress?
    var inbound: String?
    var passwordFile: String?
    /// 0: off; nil: the default.
    var pingSeconds: Double?
}

/// The certificate files and the key's passphrase source, as given (read once every option is in).
struct TLSFiles {
    var certificate: String?
    var key: String?
    var keyPassEnv: String?
    var keyPassFile: String?
    /// --client-ca (server mode only).
    var clientCA: String?
}
