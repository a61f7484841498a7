import Glibc
import WebSocketCore

/// Opens a tunnel to `target` through a proxy over an already connected `stream`: HTTP
/// CONNECT (http and https proxies) or SOCKS5. On return the stream carries the target's
/// bytes and nothing of the proxy's answer is left unread in it (HTTP answers are read
/// byte by byte, SOCKS5 replies have a known length).
enum ProxyTunnel {
    struct Context {
        let proxy: ProxyURL
        let target: HostPort
        let deadline: Deadline
        let log: (String) -> Void
    }

    static func httpConnect(over stream: ByteStream, _ context: Context, userAgent: String?) throws(TransportError) {
        let proxy = context.proxy
        context.log("asking the \(proxy.name) to CONNECT \(context.target)"
                    + (proxy.hasCredentials ? " (with Proxy-Authorization: Basic [redacted])" : ""))
        let request = HTTPConnect.requestBytes(target: context.target, proxy: proxy, userAgent: userAgent)
        try send(request, over: stream, context, step: .sendingConnect)
        var head: [UInt8] = []
        var byte: UInt8 = 0
        while true {
            switch stream.read(into: &byte, count: 1) {
            case .done:
                head.append(byte)
                guard byte == 0x0A || head.count <= 5 else { continue }
                let parsed = head.withUnsafeBytes { raw in
                    Result { () throws(HandshakeError) in try HTTPResponseHead.parse(raw) }
                }
                if case .failure(let error) = parsed { throw .proxy(.notHTTP(proxy: proxy, error)) }
                if case .success(let (response, _)?) = parsed {
                    context.log("the \(proxy.name) answered: \(response.version) \(response.statusCode) \(response.reason)")
                    try HTTPConnect.check(response, proxy: proxy, target: context.target)
                    return
                }
            case .wouldBlock(let interest):
                try stream.wait(for: interest, until: context.deadline, stage: .proxyExchange(proxy, .awaitingConnectAnswer))
            case .endOfStream:
                throw .proxy(.closed(proxy: proxy, target: context.target, step: .awaitingConnectAnswer))
            case .failed(let why):
                throw .proxy(.failed(why, proxy: proxy, step: .awaitingConnectAnswer))
            }
        }
    }

    /// SOCKS5: the greeting, RFC 1929 authentication if the proxy asks, CONNECT.
    static func socks5Connect(over stream: ByteStream, _ context: Context, connectOptions: ConnectOptions) throws(TransportError) {
        let proxy = context.proxy
        let target: SOCKS5.Target
        if let address = IPAddress(context.target.host) {
            target = .address(address)
        } else if proxy.kind == .socks5h {
            target = .domain(context.target.host)
        } else {
            // socks5://: the name is resolved here and the proxy gets an address.
            let addresses = try TCPConnector.resolve(host: context.target.host, port: context.target.port,
                                                     options: connectOptions, deadline: context.deadline)
            guard let first = addresses.first?.ip else {
                throw .resolve(host: context.target.host, reason: "no address")
            }
            target = .address(first)
        }
        /// A SOCKS5 step: its protocol errors become `.proxy(.socks)`.
        func step<T>(_ body: () throws(TransportError) -> [UInt8], parse: ([UInt8]) throws(SOCKS5Error) -> T) throws(TransportError) -> T {
            let reply = try body()
            do {
                return try parse(reply)
            } catch {
                throw .proxy(.socks(error, proxy: proxy, target: context.target))
            }
        }
        func build(_ make: () throws(SOCKS5Error) -> [UInt8]) throws(TransportError) -> [UInt8] {
            do {
                return try make()
            } catch {
                throw .proxy(.socks(error, proxy: proxy, target: context.target))
            }
        }
        let offerPassword = proxy.user != nil
        try send(SOCKS5.greeting(offerPassword: offerPassword), over: stream, context, step: .greeting)
        let method = try step({ () throws(TransportError) in try readExactly(stream, 2, context) }) { reply throws(SOCKS5Error) in
            try SOCKS5.parseMethodSelection(reply, offeredPassword: offerPassword)
        }
        if method == .usernamePassword {
            context.log("the \(proxy.name) asks for a user name and password; sending them")
            let request = try build { () throws(SOCKS5Error) in
                try SOCKS5.authenticationRequest(user: proxy.user ?? "", password: proxy.password ?? "")
            }
            try send(request, over: stream, context, step: .authenticating)
            try step({ () throws(TransportError) in try readExactly(stream, 2, context) }) { reply throws(SOCKS5Error) in
                try SOCKS5.parseAuthenticationReply(reply)
            }
        }
        context.log("asking the \(proxy.name) to connect to \(HostPort(host: target.description, port: context.target.port))"
                    + (proxy.kind == .socks5h && IPAddress(context.target.host) == nil ? " (the proxy resolves the name)" : ""))
        let request = try build { () throws(SOCKS5Error) in try SOCKS5.connectRequest(target, port: context.target.port) }
        try send(request, over: stream, context, step: .sendingConnect)
        let prefix = try readExactly(stream, 5, context)
        let length = try step({ prefix }) { reply throws(SOCKS5Error) in try SOCKS5.replyLength(prefix: reply) }
        let reply = prefix + (try readExactly(stream, length - 5, context))
        let bound = try step({ reply }) { reply throws(SOCKS5Error) in try SOCKS5.parseReply(reply) }
        context.log("the \(proxy.name) connected (its side: \(bound))")
    }

    // MARK: - Blocking-style I/O on a non-blocking stream, within the deadline

    private static func send(_ bytes: [UInt8], over stream: ByteStream, _ context: Context, step: ProxyStep) throws(TransportError) {
        switch try stream.writeAll(bytes, until: context.deadline, stage: .proxyExchange(context.proxy, step)) {
        case nil: return
        case .closed?: throw .proxy(.closed(proxy: context.proxy, target: context.target, step: step))
        case let failure?: throw .proxy(.failed(failure, proxy: context.proxy, step: step))
        }
    }

    static func readExactly(_ stream: ByteStream, _ count: Int, _ context: Context) throws(TransportError) -> [UInt8] {
        var bytes = [UInt8](repeating: 0, count: count)
        var filled = 0
        while filled < count {
            let result = bytes.withUnsafeMutableBytes { raw -> IOResult in
                guard let base = raw.baseAddress else { return .done(0) }
                return stream.read(into: base + filled, count: count - filled)
            }
            switch result {
            case .done(let n): filled += n
            case .wouldBlock(let interest):
                try stream.wait(for: interest, until: context.deadline, stage: .proxyExchange(context.proxy, .awaitingAnswer))
            case .endOfStream:
                throw .proxy(.closed(proxy: context.proxy, target: context.target, step: .awaitingAnswer))
            case .failed(let why):
                throw .proxy(.failed(why, proxy: context.proxy, step: .awaitingAnswer))
            }
        }
        return bytes
    }
}
