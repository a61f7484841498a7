import WebSocketCore
import WebSocketEngine
import WebSocketTransport

/// Opens the session's connection: dials (Unix socket, direct with Happy Eyeballs, or
/// through a proxy; TLS for wss://), performs the opening handshake, and with
/// `--location` follows redirects, all before one `--connect-timeout` deadline.
struct Opener {
    let config: BridgeConfiguration
    let log: Diagnostics

    struct Opened {
        let stream: ByteStream
        /// The URL finally connected to (differs from the configuration's after redirects).
        let url: WebSocketURL
        /// Where WebSocket frames start in the buffer given to `open`.
        let headLength: Int
        /// What the server agreed to (subprotocol, extensions).
        let negotiated: ClientHandshake.Negotiated
        /// The subprotocol the server chose.
        var subprotocol: String? { negotiated.subprotocol }
    }

    /// The dial options of the configuration, with the settings kept outside `network`.
    private var dialOptions: DialOptions {
        var options = config.network
        options.verifyPeer = !config.insecure
        options.caFile = config.caFile
        options.userAgent = config.userAgent
        return options
    }

    /// - Parameter notAfter: an earlier limit than `--connect-timeout` (`--timeout`).
    func open(into buffer: ByteBuffer, notAfter limit: Instant? = nil) throws(OpenError) -> Opened {
        let deadline = Deadline(seconds: config.connectTimeout).notAfter(limit)
        let original = config.url
        var url = original
        var redirects = 0
        while true {
            // Credentials, a -H Host and the dial overrides (--connect-to, --sni) belong to
            // the URL's own host and port; a redirect elsewhere goes without them.
            let home = url.hasSameAuthority(as: original)
            var options = dialOptions
            if !home {
                options.connectTo = nil
                options.serverName = nil
            }
            let stream: ByteStream
            do {
                stream = try Dialer.connect(to: url, options: options, deadline: deadline, log: { [log] in log.event($0) })
            } catch {
                throw .transport(error)
            }
            buffer.count = 0
            let handshake = ClientHandshake(url: url, subprotocols: config.subprotocols,
                                            headers: config.requestHeaders(credentials: home, userHost: home),
                                            extensions: config.offeredExtensions)
            let exchange = HandshakeExchange(stream: stream, deadline: deadline, log: log)
            let head: HTTPResponseHead
            do {
                let (negotiated, headLength) = try exchange.perform(handshake, into: buffer)
                return Opened(stream: stream, url: url, headLength: headLength, negotiated: negotiated)
            } catch {
                stream.close()
                guard config.followRedirects, case .handshake(.unexpectedStatus(let refused), _) = error,
                      WebSocketURL.redirectStatuses.contains(refused.statusCode) else { throw error }
                head = refused
            }
            redirects += 1
            guard redirects <= config.maxRedirects else {
                throw .redirect(.tooMany(limit: config.maxRedirects))
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
            log.event("redirect \(head.statusCode) to \(Diagnostics.redactedTarget(next.description))"
                      + (nextHome ? "" : " (another host: credentials, -H Host, --connect-to and --sni are not used there)"))
            url = next
        }
    }
}
