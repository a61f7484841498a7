import WebSocketCore
import WebSocketTransport

/// Opens a client connection: dials (Unix socket, direct with Happy Eyeballs, or through
/// a proxy; TLS for wss://), performs the opening handshake (RFC 6455 §4.1) and, when
/// asked, follows redirects, all before one deadline. Blocking: run it where waiting is
/// allowed (the CLI's only thread, the library's connect threads).
///
/// Shared by the CLI (`Opener`) and the library (`WSKit`), so both dial and handshake alike.
public struct ClientOpener: Sendable {
    /// The URL to connect to first.
    public var url: WebSocketURL
    /// How to reach it (proxies, TLS, connect-to, SNI...).
    public var dialOptions: DialOptions
    /// Subprotocols offered, in order of preference.
    public var subprotocols: [String]
    /// The request headers for one hop: without `credentials` (a redirect to another host)
    /// no secret headers, without `userHost` no caller-given Host.
    public var headers: @Sendable (_ credentials: Bool, _ userHost: Bool) -> [HTTPHeader]
    /// Follow 301/302/303/307/308 answers (at most `maxRedirects`).
    public var followRedirects = false
    public var maxRedirects = 5
    /// Extensions offered (permessage-deflate), in order.
    public var extensions: [any WebSocketExtension] = []
    public var log: any OpeningLog = SilentOpeningLog()

    public init(url: WebSocketURL, dialOptions: DialOptions, subprotocols: [String] = [],
                headers: @escaping @Sendable (_ credentials: Bool, _ userHost: Bool) -> [HTTPHeader]) {
        self.url = url
        self.dialOptions = dialOptions
        self.subprotocols = subprotocols
        self.headers = headers
    }

    /// A connected stream after a successful handshake.
    public struct Opened {
        public let stream: ByteStream
        /// The URL finally connected to (differs from `url` after redirects).
        public let url: WebSocketURL
        /// Where WebSocket frames start in the buffer given to `open`.
        public let headLength: Int
        /// What the server answered.
        public let negotiated: ClientHandshake.Negotiated
        /// The connection the handshake settled, extensions configured (zlib loaded when
        /// permessage-deflate was agreed): what `ConnectionDriver` is made from.
        public let agreement: HandshakeAgreement
        /// The subprotocol the server chose.
        public var subprotocol: String? { negotiated.subprotocol }
    }

    /// Dials and performs the handshake; `buffer` receives the response head and any frames
    /// behind it. Throws `OpenError` with the facts of what failed.
    public func open(into buffer: ByteBuffer, deadline: Deadline) throws(OpenError) -> Opened {
        let original = url
        var url = original
        var redirects = 0
        while true {
            // Credentials, a caller-given Host and the dial overrides (connect-to, SNI) belong
            // to the URL's own host and port; a redirect elsewhere goes without them.
            let home = url.hasSameAuthority(as: original)
            var options = dialOptions
            if !home {
                options.connectTo = nil
                options.serverName = nil
            }
            let stream: ByteStream
            do {
                stream = try Dialer.connect(to: url, options: options, deadline: deadline, names: log.settingNames,
                                            log: { [log] in log.event($0) })
            } catch {
                throw .transport(error)
            }
            // A connect given up on while dialing sends no request: a server that answered it
            // would see a connection opened and dropped.
            if deadline.cancellation?.isCancelled ?? false {
                stream.close()
                throw .transport(.timedOut(.sendingHandshake, seconds: deadline.seconds))
            }
            buffer.count = 0
            let handshake = ClientHandshake(url: url, subprotocols: subprotocols, headers: headers(home, home),
                                            extensions: extensions)
            let exchange = ClientHandshakeExchange(stream: stream, deadline: deadline, log: log)
            let head: HTTPResponseHead
            do {
                let (negotiated, headLength) = try exchange.perform(handshake, into: buffer)
                let agreement = try Self.agreement(of: handshake, negotiated, log: log)
                return Opened(stream: stream, url: url, headLength: headLength, negotiated: negotiated, agreement: agreement)
            } catch {
                stream.close()
                guard followRedirects, case .handshake(.unexpectedStatus(let refused), _) = error,
                      WebSocketURL.redirectStatuses.contains(refused.statusCode) else { throw error }
                head = refused
            }
            redirects += 1
            guard redirects <= maxRedirects else {
                throw .redirect(.tooMany(limit: maxRedirects))
            }
            guard let location = head.values("Location").first else {
                throw .redirect(.noLocation(status: head.statusCode, reason: head.reason))
            }
            var next: WebSocketURL
            do {
                next = try url.redirected(to: location)
            } catch {
                throw .redirect(.refused(error))
            }
            let nextHome = next.hasSameAuthority(as: original)
            if nextHome && next.user == nil {
                next.user = original.user
                next.password = original.password
            }
            log.redirecting(status: head.statusCode, to: next, sameHost: nextHome)
            url = next
        }
    }
}

extension ClientOpener {
    /// What `negotiated` agrees to, configured, with zlib loaded for permessage-deflate (only
    /// now: a connection that agreed nothing never maps libz).
    /// - Throws: `OpenError.handshake(.invalid)` for an answer the offer does not accept (the
    ///   handshake checked it already) or zlib that cannot be loaded.
    static func agreement(of handshake: ClientHandshake, _ negotiated: ClientHandshake.Negotiated,
                          log: any OpeningLog) throws(OpenError) -> HandshakeAgreement {
        let agreement: HandshakeAgreement
        do throws(ExtensionNegotiationError) {
            agreement = try handshake.agreement(negotiated)
        } catch {
            throw .handshake(.invalid(error.description), body: [])
        }
        if let deflate = agreement.deflate, let configuration = deflate.configuration {
            do throws(ZlibLoadError) {
                try Zlib.load()
            } catch {
                throw .handshake(.invalid("the server agreed to permessage-deflate, but \(error.reason)"), body: [])
            }
            let response = negotiated.extensions.first { $0.name.lowercased() == DeflateParameters.extensionName }
            log.event("permessage-deflate agreed: \(response.map { "\($0)" } ?? "") (\(configuration.summary))")
        }
        return agreement
    }
}
