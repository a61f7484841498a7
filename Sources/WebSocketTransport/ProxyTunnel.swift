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
        let deadline: Instant
        let timeoutSeconds: Double
        let log: (String) -> Void
    }

    static func httpConnect(over stream: ByteStream, _ context: Context, userAgent: String?) throws(TransportError) {
        let proxy = context.proxy
        context.log("asking the \(proxy.name) to CONNECT \(context.target)"
                    + (proxy.hasCredentials ? " (with Proxy-Authorization: Basic [redacted])" : ""))
        let request = HTTPConnect.requestBytes(target: context.target, proxy: proxy, userAgent: userAgent)
        try writeAll(stream, request, context, stage: "sending CONNECT to the \(proxy.name)")
        var head: [UInt8] = []
        var byte: UInt8 = 0
        while true {
            switch stream.read(into: &byte, count: 1) {
            case .done:
                head.append(byte)
                guard byte == 0x0A || head.count <= 5 else { continue }
                let parsed: (HTTPResponseHead, Int)?
                do {
                    parsed = try head.withUnsafeBytes { raw throws(HandshakeError) in try HTTPResponseHead.parse(raw) }
                } catch {
                    throw .proxy("the \(proxy.name) did not answer CONNECT with HTTP: \(error)")
                }
                if let (response, _) = parsed {
                    context.log("the \(proxy.name) answered: \(response.version) \(response.statusCode) \(response.reason)")
                    try HTTPConnect.check(response, proxy: proxy, target: context.target)
                    return
                }
            case .wouldBlock(let interest):
                try wait(stream, interest, context, stage: "waiting for the \(proxy.name) to answer CONNECT")
            case .endOfStream:
                throw .proxy("the \(proxy.name) closed the connection without answering CONNECT \(context.target)")
            case .failed(let why):
                throw .proxy("the connection to the \(proxy.name) failed during CONNECT: \(why)")
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
                                                     options: connectOptions, deadline: context.deadline,
                                                     timeoutSeconds: context.timeoutSeconds)
            guard let first = addresses.first?.ip else {
                throw .resolve(host: context.target.host, reason: "no address")
            }
            target = .address(first)
        }
        func fail(_ error: SOCKS5Error) -> TransportError {
            .proxy(error.message(proxy: proxy, target: context.target.description))
        }
        let offerPassword = proxy.user != nil
        try writeAll(stream, SOCKS5.greeting(offerPassword: offerPassword), context, stage: "greeting the \(proxy.name)")
        let method: SOCKS5.Method
        do {
            method = try SOCKS5.parseMethodSelection(try readExactly(stream, 2, context), offeredPassword: offerPassword)
        } catch let error as SOCKS5Error {
            throw fail(error)
        } catch {
            throw error as? TransportError ?? .proxy("\(error)")
        }
        if method == .usernamePassword {
            context.log("the \(proxy.name) asks for a user name and password; sending them")
            do {
                let request = try SOCKS5.authenticationRequest(user: proxy.user ?? "", password: proxy.password ?? "")
                try writeAll(stream, request, context, stage: "authenticating with the \(proxy.name)")
                try SOCKS5.parseAuthenticationReply(try readExactly(stream, 2, context))
            } catch let error as SOCKS5Error {
                throw fail(error)
            } catch {
                throw error as? TransportError ?? .proxy("\(error)")
            }
        }
        context.log("asking the \(proxy.name) to connect to \(HostPort(host: target.description, port: context.target.port))"
                    + (proxy.kind == .socks5h && IPAddress(context.target.host) == nil ? " (the proxy resolves the name)" : ""))
        do {
            try writeAll(stream, try SOCKS5.connectRequest(target, port: context.target.port), context,
                         stage: "sending CONNECT to the \(proxy.name)")
            let prefix = try readExactly(stream, 5, context)
            let length = try SOCKS5.replyLength(prefix: prefix)
            let reply = prefix + (try readExactly(stream, length - 5, context))
            let bound = try SOCKS5.parseReply(reply)
            context.log("the \(proxy.name) connected (its side: \(bound))")
        } catch let error as SOCKS5Error {
            throw fail(error)
        } catch {
            throw error as? TransportError ?? .proxy("\(error)")
        }
    }

    // MARK: - Blocking-style I/O on a non-blocking stream, within the deadline

    static func writeAll(_ stream: ByteStream, _ bytes: [UInt8], _ context: Context, stage: String) throws(TransportError) {
        var offset = 0
        while offset < bytes.count || stream.hasPendingOutput {
            let result: IOResult
            if offset < bytes.count {
                result = bytes.withUnsafeBytes { raw -> IOResult in
                    var vector = iovec(iov_base: UnsafeMutableRawPointer(mutating: raw.baseAddress! + offset),
                                       iov_len: raw.count - offset)
                    return stream.write(&vector, count: 1)
                }
            } else {
                result = stream.flush()
            }
            switch result {
            case .done(let n): offset += n
            case .wouldBlock(let interest): try wait(stream, interest, context, stage: stage)
            case .endOfStream: throw .proxy("the \(context.proxy.name) closed the connection (\(stage))")
            case .failed(let why): throw .proxy("the connection to the \(context.proxy.name) failed (\(stage)): \(why)")
            }
        }
    }

    static func readExactly(_ stream: ByteStream, _ count: Int, _ context: Context) throws(TransportError) -> [UInt8] {
        var bytes = [UInt8](repeating: 0, count: count)
        var filled = 0
        while filled < count {
            let result = bytes.withUnsafeMutableBytes { raw in stream.read(into: raw.baseAddress! + filled, count: count - filled) }
            switch result {
            case .done(let n): filled += n
            case .wouldBlock(let interest):
                try wait(stream, interest, context, stage: "waiting for the \(context.proxy.name) to answer")
            case .endOfStream:
                throw .proxy("the \(context.proxy.name) closed the connection in the middle of the SOCKS5 exchange")
            case .failed(let why):
                throw .proxy("the connection to the \(context.proxy.name) failed: \(why)")
            }
        }
        return bytes
    }

    static func wait(_ stream: ByteStream, _ interest: PollInterest, _ context: Context, stage: String) throws(TransportError) {
        if interest == .read && stream.hasBufferedInput { return }
        var entry = pollfd(fd: stream.fileDescriptor, events: interest.pollEvents, revents: 0)
        while true {
            let ready = poll(&entry, 1, context.deadline.pollTimeout())
            if ready > 0 { return }
            if ready == 0 { throw .timedOut(stage: stage, seconds: context.timeoutSeconds) }
            if errno != EINTR { throw .io("poll failed: \(errnoText(errno))") }
        }
    }
}
