import Glibc
import WebSocketCore
import WebSocketEngine
import WebSocketTransport
import WSPipeBridge
import WSPipeBus
import WebSocketExec

extension Option {
    /// Options that mean something only when serving (their scope has a server mode and
    /// no client).
    static var serverOnly: [Option] { allCases.filter(\.isServerOnly) }
    /// Options of a client connection, which a server has no use for.
    static var clientOnly: [Option] { allCases.filter(\.isClientOnly) }
    /// Options whose server meaning is not built yet: refused with -l rather than parsed
    /// and ignored.
    static let notYetServing: [Option] = applying(to: .notYetServing)
}

/// A valid request to try --response-header values against the 101 (`ServerHandshake.accept`
/// refuses headers with CR/LF and those the 101 sets itself).
enum ServerHandshakeProbe {
    static let request: HandshakeRequest = {
        let head = HTTPRequestHead(method: "GET", target: "/", version: "HTTP/1.1", headers: [
            HTTPHeader(name: "Host", value: "localhost"), HTTPHeader(name: "Upgrade", value: "websocket"),
            HTTPHeader(name: "Connection", value: "Upgrade"), HTTPHeader(name: "Sec-WebSocket-Key", value: "dGhlIHNhbXBsZSBub25jZQ=="),
            HTTPHeader(name: "Sec-WebSocket-Version", value: "13")])
        do throws(HandshakeRefusal) {
            return try ServerHandshake.validate(head)
        } catch {
            fatalError("the probe request is valid (\(error))")
        }
    }()
}

extension ListenAddress {
    /// Why SO_REUSEPORT does not apply, for a listener this process does not bind over TCP.
    var inheritedOrUnix: String? {
        switch self {
        case .tcp: return nil
        case .unix: return "a Unix socket's path has one listener"
        case .descriptor, .systemd: return "an inherited socket is bound already; its owner sets SO_REUSEPORT (ReusePort=yes in a .socket unit)"
        }
    }
}

extension Settings {
    /// The configuration of server mode: -l with exactly one mode, no client-only option,
    /// the bearer token for --require-bearer. Throws `UsageError`.
    func finishServer(environment: (String) -> String?, readFile: (String) -> [UInt8]?) throws(UsageError) -> BridgeConfiguration {
        guard let listen else {
            let name = given.first { Option.named($0)?.isServerOnly == true } ?? "this option"
            throw UsageError("\(name) is a server option: it needs -l/--listen")
        }
        // A TLS bus (rediss://) is dialed as a client: it takes --cacert and -k.
        let busTakes: [Option] = bus.address?.tls == true ? [.cacert, .insecure] : []
        if let option = Option.allCases.first(where: { $0.isClientOnly && given.contains($0.longName) && !busTakes.contains($0) }) {
            let hint = option == Option.cacert ? " (the CAs of client certificates: --client-ca)"
                : option == Option.header ? " (a header of the 101 answer, as websocketd's --header: --response-header)"
                : option.category == .conversation ? " (a conversation is the client's: it waits for a server's answers)" : ""
            throw UsageError("\(option.longName) is a client option; it cannot be used with -l/--listen\(hint)")
        }
        let modes = try ServerModeDescriptor.given(in: self)
        if let option = Option.notYetServing.first(where: { given.contains($0.longName) }) {
            throw UsageError("\(option.longName) has no meaning with -l/--listen in this version (see SERVER in the man page)")
        }
        // No mode: stdin and stdout bridged to one client at a time.
        let (descriptor, serveMode) = try ServerModeDescriptor.single(modes)
        if let refusal = descriptor.refusal(given: given) { throw refusal }
        if config.stdio.requireCount && !oneshot {
            // Only --oneshot's one client gives the server its exit status.
            throw UsageError("--require-count with -l needs --oneshot: a server's exit status does not say how each client left")
        }
        let console = serveMode == .stdio ? try self.console(environment: environment) : nil
        try checkCombinations(console: console != nil)
        if config.stdio.jsonLines && config.stdio.mode == .binary { throw UsageError("--jsonl cannot be combined with --binary: --jsonl carries both message types") }
        if config.stdio.jsonLines && config.stdio.separator == 0 { throw UsageError("--jsonl cannot be combined with -0/--null: JSON Lines are newline-separated") }
        if let path = policy.metricsPath {
            if path == policy.healthPath { throw UsageError("--metrics and --health cannot share the path '\(path)'") }
            // Who can reach a non-loopback listener can read the counts: a token or a decision.
            if !listen.isLoopback && !requireBearer && !metricsPublic {
                throw UsageError("--metrics on \(listen), which is not a loopback address, needs --require-bearer (which then covers it) or --metrics-public")
            }
        } else if metricsPublic {
            throw UsageError("--metrics-public needs --metrics PATH")
        }
        try checkSite()
        if bearerFile != nil && !requireBearer { throw UsageError("--bearer-file with -l needs --require-bearer") }
        if policy.requiresSubprotocol && config.subprotocols.isEmpty {
            throw UsageError("--require-protocol needs the supported subprotocols (--protocol NAME)")
        }

        var serve = ServeConfiguration(listen: listen)
        serve.reusePort = reusePort
        serve.alsoIPv6Loopback = listenLocalhost
        if reusePort, let kind = listen.inheritedOrUnix {
            throw UsageError("--reuseport is for TCP listeners: \(kind)")
        }
        if listen == .systemd {
            do throws(SystemdActivation.Problem) {
                serve.activatedDescriptors = try SystemdActivation.descriptors(listenPID: environment("LISTEN_PID"),
                                                                               listenFDs: environment("LISTEN_FDS"), pid: getpid())
            } catch {
                throw UsageError("-l systemd: \(error)", pointsAtHelp: false)
            }
        }
        serve.mode = serveMode
        serve.bus = try busServing(environment: environment, readFile: readFile)
        serve.tls = try serverTLS(environment: environment, readFile: readFile)
        serve.oneshot = oneshot
        if serveMode != .stdio {
            // Each client's own limits, applied by its ServerConnection (the stdio mode's
            // session applies the same value through its endpoint: StdioServerRunner).
            serve.server.perClient = config.stdio.limits(span: .connection, idleClock: .receivedAndSentCount)
        }
        serve.server.policy = policy
        serve.server.site = site
        serve.server.clientAddress = clientAddress
        if given.contains(Option.clientAddressHeader.longName) && clientAddress.trusted.isEmpty {
            throw UsageError("--client-address-header needs --trust-proxy: the header is read only from those proxies")
        }
        serve.server.policy.servesTLS = serve.tls != nil
        serve.server.policy.subprotocols = config.subprotocols
        if let maxClients { serve.server.maximumClients = maxClients }
        try applyLimits(&serve.server)
        if let handshakeTimeout { serve.server.handshakeTimeout = handshakeTimeout }
        serve.server.maximumMessageSize = config.maxMessageSize
        serve.server.connection.closeTimeout = config.closeTimeout
        serve.server.connection.pingInterval = config.pingInterval
        serve.server.connection.pingTimeout = config.pingTimeout
        // Many idle clients: 64 KiB receive buffers, let go between reads.
        serve.server.connection.receiveBufferSize = 64 * 1024
        serve.server.deflate = try serverDeflate()

        if requireBearer {
            var token: String?
            if let bearerFile {
                token = try tokenFromFile(bearerFile, readFile: readFile)
            } else if let value = environment("WSPIPE_BEARER"), !value.isEmpty {
                try checkToken(value, source: "WSPIPE_BEARER")
                token = value
            }
            guard let token, !token.isEmpty else {
                throw UsageError("--require-bearer needs the expected token in WSPIPE_BEARER or --bearer-file")
            }
            serve.server.policy.bearerToken = token
        }
        var config = self.config
        config.client.bearerToken = nil
        config.stdio.console = console
        if config.stdio.oneMessage { config.stdio.maxMessages = 1 }
        config.serve = serve
        return config
    }
}

extension Settings {
    /// --cert/--key (the server's own), the passphrase, --tls-min and --client-ca; nil
    /// without --cert (plain ws://). The files are loaded before listening (Serve.swift).
    func serverTLS(environment: (String) -> String?, readFile: (String) -> [UInt8]?) throws(UsageError) -> TLSServerOptions? {
        guard let certFile = tls.certificate else {
            if let option = [Option.key, .keyPassEnv, .keyPassFile, .tlsMin, .clientCA].first(where: { given.contains($0.longName) }) {
                throw UsageError("\(option.longName) with -l needs --cert (the server's certificate) to serve wss://")
            }
            return nil
        }
        if tls.keyPassEnv != nil && tls.keyPassFile != nil {
            throw UsageError("give the key's passphrase with --key-pass-env or --key-pass-file, not both")
        }
        return TLSServerOptions(certificateFile: certFile, keyFile: tls.key ?? certFile,
                                keyPassword: try keyPassword(environment: environment, readFile: readFile),
                                minimumVersion: config.client.network.minimumTLSVersion, clientCAFile: tls.clientCA)
    }

    /// permessage-deflate as the server answers it: the --deflate-* options' server meanings
    /// (SERVER in the man page) over `PerMessageDeflate.server()`'s memory-tuned defaults;
    /// nil with --no-deflate, which no tuning option may join.
    func serverDeflate() throws(UsageError) -> PerMessageDeflate? {
        if compression.disabled {
            if let first = compression.tuning.first {
                throw UsageError("--no-deflate cannot be combined with \(first): with --no-deflate nothing is accepted to tune")
            }
            return nil
        }
        var deflate = PerMessageDeflate.server()
        if let bits = compression.offer.serverMaxWindowBits {
            guard bits >= 9 else {
                throw UsageError("--deflate-server-window-bits with -l is our compressor's window: 9 to 15 (zlib makes no 8-bit streams)")
            }
            deflate.serverWindowBits = bits
        }
        if case .bits(let bits) = compression.offer.clientMaxWindowBits { deflate.clientWindowBits = bits }
        deflate.serverNoContextTakeover = compression.offer.serverNoContextTakeover
        deflate.clientNoContextTakeover = compression.offer.clientNoContextTakeover
        return deflate
    }
}

extension Settings {
    /// --exec, --sh or --dir with their settings (the exec mode's factory: one of them is given).
    /// Throws `UsageError`.
    func execServing() throws(UsageError) -> ExecServing {
        var exec: ExecServing
        if let execDirectory {
            if execProgram != nil || execShell != nil {
                throw UsageError("--dir and \(execProgram != nil ? "--exec" : "--sh") cannot be combined: give one program or a directory of them")
            }
            exec = ExecServing(directory: execDirectory)
        } else {
            switch (execProgram, execShell) {
            case (let program?, nil): exec = ExecServing(command: ChildCommand(program: program, arguments: execArguments))
            case (nil, let shell?): exec = ExecServing(command: .shell(shell))
            case (nil, nil): throw UsageError("--exec or --sh needs a program")
            default: throw UsageError("--exec and --sh cannot be combined: give one program")
            }
        }
        if let closeGrace { exec.closeGrace = closeGrace }
        if let maxChildren { exec.maxChildren = maxChildren }
        exec.passing = passing
        return exec
    }
}

extension Settings {
    /// --forward or --forward-tokens with their settings (the gateway's factory). Throws `UsageError`.
    func forwardServing() throws(UsageError) -> ForwardServing {
        if forward.target != nil && forward.tokenFile != nil {
            throw UsageError("--forward and --forward-tokens cannot be combined: one fixed target, or a table of them")
        }
        var serving = forward
        if let closeGrace { serving.closeGrace = closeGrace }
        return serving
    }
}

extension WebSocketURL {
    /// The configuration's URL in server mode, where nothing reads it.
    static let unusedByServer: WebSocketURL = {
        do throws(URLError) {
            return try WebSocketURL(parsing: "ws://localhost/")
        } catch {
            fatalError("a literal URL parses (\(error))")
        }
    }()
}

extension Settings {
    /// --static names a directory we can open (it is opened again when serving).
    func checkSite() throws(UsageError) {
        if given.contains(Option.staticFiles.longName) && given.contains(Option.staticDir.longName) {
            throw UsageError("--static and --staticdir are one option: give one directory")
        }
        guard let root = site.root else { return }
        let descriptor = open(root, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard descriptor >= 0 else {
            let why = errno == ENOTDIR ? "not a directory" : String(cString: strerror(errno))
            throw UsageError("cannot serve --static '\(root)': \(why)", pointsAtHelp: false)
        }
        close(descriptor)
        // Serving --dir's tree as files would hand out the programs' source.
        if let programs = execDirectory, let a = realPath(root), let b = realPath(programs),
           a == b || a.hasPrefix(b.hasSuffix("/") ? b : b + "/") || b.hasPrefix(a.hasSuffix("/") ? a : a + "/") {
            throw UsageError("--static '\(root)' \(a == b ? "is" : a.count < b.count ? "contains" : "is inside") --dir '\(programs)': it would serve the programs themselves; give a directory apart from it")
        }
    }

    private func realPath(_ path: String) -> String? {
        guard let resolved = realpath(path, nil) else { return nil }
        defer { free(resolved) }
        return String(cString: resolved)
    }

    /// --bus and its options (the CLI's table already said they need --broadcast): the
    /// password from the URL, else --bus-password-file, else WSPIPE_BUS_PASSWORD.
    func busServing(environment: (String) -> String?, readFile: (String) -> [UInt8]?) throws(UsageError) -> BusServing? {
        guard var address = bus.address else {
            if let option = [Option.busInbound, .busPasswordFile, .busPing].first(where: { given.contains($0.longName) }) {
                throw UsageError("\(option.longName) needs --bus")
            }
            return nil
        }
        if let busPasswordFile = bus.passwordFile {
            if address.password != nil { throw UsageError("--bus-password-file: the --bus URL has a password already") }
            guard let bytes = readFile(busPasswordFile) else {
                throw UsageError("cannot read --bus-password-file '\(busPasswordFile)': \(whyUnreadable(busPasswordFile))", pointsAtHelp: false)
            }
            guard UTF8Validator.isValid(bytes) else { throw UsageError("--bus-password-file '\(busPasswordFile)' is not UTF-8 text", pointsAtHelp: false) }
            address.password = HTTPText.trimmed(String(decoding: bytes, as: UTF8.self), also: [0x0A, 0x0D])
        } else if address.password == nil, let value = environment("WSPIPE_BUS_PASSWORD"), !value.isEmpty {
            address.password = value
        }
        var serving = BusServing(address: address)
        serving.inbound = bus.inbound
        if let seconds = bus.pingSeconds { serving.pingInterval = seconds > 0 ? seconds : nil }
        serving.caFile = config.client.caFile
        serving.insecure = config.client.insecure
        return serving
    }
}

extension Settings {
    /// The per-address and rate limits: set only when asked for (a server without them
    /// keeps no table and no bucket).
    func applyLimits(_ server: inout ServerConfiguration) throws(UsageError) {
        var perAddress = addressLimits
        if let ipv6PrefixBits {
            guard perAddress != AddressLimitSettings() else {
                throw UsageError("--ipv6-prefix is for --max-clients-per-ip or --max-handshakes-per-ip")
            }
            perAddress.ipv6PrefixBits = ipv6PrefixBits
        }
        if perAddress != AddressLimitSettings() { server.perAddress = perAddress }
        if rates.messages != nil || rates.bytes != nil {
            server.rates = rates
        } else if rates.action != .pause {
            throw UsageError("--rate-limit-action is for --rate-limit or --byte-rate")
        }
    }
}
