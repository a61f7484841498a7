import Glibc
import WebSocketCore
import WebSocketEngine
import WebSocketTransport

/// How `WebSocket.connect` reaches the server and runs the connection. Every transport
/// setting of the `wspipe` command line has a field here.
public struct WebSocketOptions: Sendable {
    /// Extra request headers (`Name: value`), sent in this order. A `Host`, `Origin`,
    /// `User-Agent` or `Authorization` replaces the generated one; the handshake's own
    /// headers (Upgrade, Connection, Sec-WebSocket-Key/Version/Extensions) are refused.
    public var headers: [(name: String, value: String)]
    /// Sent as `Authorization: Bearer <token>` unless `headers` has an Authorization.
    public var bearerToken: String?
    /// Subprotocols offered, in order of preference (`Sec-WebSocket-Protocol`, RFC 6455 §1.9).
    public var subprotocols: [String]
    /// `Origin` header; nil: none.
    public var origin: String?
    /// `User-Agent` header (also sent to HTTP proxies); nil: none.
    public var userAgent: String? = "WSKit"
    /// Keepalive Ping interval; nil: no keepalive pings.
    public var pingInterval: Duration?
    /// Fail the connection (`.timedOut`) when a keepalive Ping gets no Pong this long after
    /// it was written; nil: no limit.
    public var pingTimeout: Duration?
    /// One limit for DNS, every TCP attempt, the proxy exchange, TLS and the WebSocket
    /// handshake (and every redirect hop). Default 10 s, as the CLI.
    public var connectTimeout: Duration = .seconds(10)
    /// How long the closing handshake may go without progress (RFC 6455 §7.1.1); after
    /// `close()`'s Ping, the peer sending counts as progress for at most 10 times this.
    /// Default 5 s.
    public var closeTimeout: Duration = .seconds(5)
    /// Largest message received, in bytes; a bigger one fails the connection with 1009.
    /// Default 64 MiB, as the CLI.
    public var maximumMessageSize: Int = 64 << 20
    /// Bytes of whole received messages buffered for a consumer of `messages` that is
    /// behind; beyond it the socket is not read until the consumer catches up (one socket
    /// read may come on top, up to 1 MiB for a client and 256 KiB for a server's client,
    /// and the message in progress). Default 1 MiB.
    public var receiveBufferLimit: Int = 1 << 20
    /// Keep the receive buffer, the send arena and the message queues' blocks between
    /// socket reads: faster for a busy connection, about 1 MiB more for an idle client
    /// (256 KiB for a server's client; up to 96 KiB each of received and of sent messages'
    /// blocks on top, once they were used).
    /// Default false (an idle connection holds no buffer: thousands of connections stay
    /// small; the engine keeps at most four free buffers of each size for the next reads).
    public var keepsBuffersWhenIdle = false
    /// permessage-deflate (RFC 7692) to offer; nil: offer no compression. Offered by
    /// default, as the CLI does (`permessage-deflate; client_max_window_bits`). What the
    /// server agreed to is `WebSocket.extensions` and `WebSocket.deflate`.
    public var deflate: Deflate? = Deflate()
    /// TLS settings for wss:// (and an https:// proxy).
    public var tls = TLS()
    /// Which proxy to use. Default: the environment, as curl reads it (`wss_proxy`,
    /// `https_proxy`, `all_proxy` for wss://; `ws_proxy`, `http_proxy`, `all_proxy` for ws://;
    /// `no_proxy`).
    public var proxy: Proxy = .environment
    /// Replaces `no_proxy`/`NO_PROXY` (names, IPs, CIDR blocks, `*`).
    public var noProxy: String?
    /// Dial this host and port instead of the URL's; Host header, SNI and certificate
    /// checks keep the URL's host (the CLI's `--connect-to`).
    public var connectTo: (host: String, port: UInt16)?
    /// The TLS server name and the name the certificate must carry (the CLI's `--sni`).
    public var serverName: String?
    /// Fixed addresses for host:port, as curl's `--resolve` (`"host:port:addr[,addr]"`).
    public var resolve: [String] = []
    /// Restrict DNS answers to one address family.
    public var addressFamily: AddressFamily = .any
    /// Follow 301/302/303/307/308 handshake answers (never wss → ws; credentials only to the
    /// original host), at most `maximumRedirects`.
    public var followsRedirects = false
    /// Redirects followed at most, when `followsRedirects` (the CLI's `--max-redirs`); one
    /// more fails the connect with `.handshakeRejected`.
    public var maximumRedirects = 5
    /// Called with the connection's log lines, in order, from the library's threads (keep it
    /// quick; nil, the default: no log). The lines the CLI shows with `-v`: the opening
    /// handshake (`> GET /path HTTP/1.1` and the request headers, `< HTTP/1.1 101 Switching
    /// Protocols` and the response headers; credentials, cookies and secret-looking headers
    /// and query values as `[redacted]`), the route taken, the subprotocol and redirects;
    /// then the end: `closed CODE REASON` (the peer's Close), `closed without a code`, or
    /// `failed: SENTENCE` (`WebSocketError.description`), also for a connect that failed.
    /// Header values are as the server sent them (they may hold control characters).
    public var log: (@Sendable (String) -> Void)?

    /// - Parameters mirror the properties of the same names.
    public init(headers: [String: String] = [:], bearerToken: String? = nil, subprotocols: [String] = [],
                pingInterval: Duration? = nil, pingTimeout: Duration? = nil) {
        self.headers = headers.sorted { $0.key < $1.key }.map { (name: $0.key, value: $0.value) }
        self.bearerToken = bearerToken
        self.subprotocols = subprotocols
        self.pingInterval = pingInterval
        self.pingTimeout = pingTimeout
    }

    /// The permessage-deflate offer (RFC 7692 §7.1). Window bits are base-2 logarithms of
    /// the LZ77 window, 8...15 (a smaller window: less memory per connection, less
    /// compression).
    public struct Deflate: Sendable, Equatable {
        /// `server_max_window_bits` (§7.1.2.1): the largest window the server may compress
        /// with; nil: not asked (15).
        public var serverMaxWindowBits: Int?
        /// `client_max_window_bits` (§7.1.2.2): the window we compress with at most; nil:
        /// offered without a value (the server may ask for a smaller one; 15 otherwise).
        public var clientMaxWindowBits: Int?
        /// `server_no_context_takeover` (§7.1.1.1): the server resets its compressor after
        /// each message (less memory on its side, less compression).
        public var serverNoContextTakeover = false
        /// `client_no_context_takeover` (§7.1.1.2): we reset ours after each message.
        public var clientNoContextTakeover = false

        /// An offer with these parameters; the defaults are the plain offer
        /// (`permessage-deflate; client_max_window_bits`).
        public init(serverMaxWindowBits: Int? = nil, clientMaxWindowBits: Int? = nil,
                    serverNoContextTakeover: Bool = false, clientNoContextTakeover: Bool = false) {
            self.serverMaxWindowBits = serverMaxWindowBits
            self.clientMaxWindowBits = clientMaxWindowBits
            self.serverNoContextTakeover = serverNoContextTakeover
            self.clientNoContextTakeover = clientNoContextTakeover
        }

        /// The engine's offer; throws `.invalidArgument` for window bits outside 8...15.
        func parameters() throws(WebSocketError) -> DeflateParameters {
            for (name, bits) in [("serverMaxWindowBits", serverMaxWindowBits), ("clientMaxWindowBits", clientMaxWindowBits)] {
                if let bits, !(8...15).contains(bits) { throw .invalidArgument("deflate: \(name) \(bits) is not 8...15") }
            }
            return DeflateParameters(serverNoContextTakeover: serverNoContextTakeover, clientNoContextTakeover: clientNoContextTakeover,
                                     serverMaxWindowBits: serverMaxWindowBits,
                                     clientMaxWindowBits: clientMaxWindowBits.map { .bits($0) } ?? .withoutValue)
        }
    }

    /// TLS settings.
    public struct TLS: Sendable {
        /// PEM file of CA certificates to trust instead of the system store.
        public var caFile: String?
        /// False: accept any certificate (the CLI's `-k`). Testing only.
        public var verifiesPeer = true
        /// A client certificate: PEM certificate file, PEM key file and the key's passphrase
        /// if it is encrypted.
        public var clientCertificate: (certificateFile: String, keyFile: String, keyPassword: String?)?
        /// Lowest TLS version accepted.
        public var minimumVersion: TLSVersion = .tls12
        /// The defaults: the system's CA store, peer verified, no client certificate, TLS 1.2.
        public init() {}
    }

    /// Where connections go through.
    public enum Proxy: Sendable {
        /// As the environment says (the default).
        case environment
        /// Never a proxy.
        case none
        /// This proxy: `http://`, `https://`, `socks5://` or `socks5h://` URL, with optional
        /// `user:password@`.
        case url(String)
    }
}

/// The options as the transport takes them.
extension WebSocketOptions {
    /// The engine's opener for `url` with these options.
    func opener(for url: WebSocketURL) throws(WebSocketError) -> ClientOpener {
        let headers = try requestHeaders()
        var opener = ClientOpener(url: url, dialOptions: try dialOptions(), subprotocols: subprotocols,
                                  headers: { credentials, userHost in
                                      headers.filter { (credentials || !$0.isSensitive) && (userHost || !$0.hasName("Host")) }
                                  })
        if let offer = try deflate?.parameters() { opener.extensions = [PerMessageDeflate.client(offer)] }
        opener.followRedirects = followsRedirects
        opener.maxRedirects = maximumRedirects
        if let log { opener.log = ConnectionLog(emit: log) }
        return opener
    }

    func dialOptions() throws(WebSocketError) -> DialOptions {
        var options = DialOptions()
        switch proxy {
        case .environment: options.proxy = .environment
        case .none: options.proxy = .none
        case .url(let text):
            do { options.proxy = .url(try ProxyURL(parsing: text)) } catch { throw .invalidArgument("proxy: \(error)") }
        }
        options.noProxy = noProxy
        for name in ProxySelection.variableNames {
            if let value = getenv(name) { options.environment[name] = String(cString: value) }
        }
        options.connectTo = connectTo.map { HostPort(host: $0.host, port: $0.port) }
        options.serverName = serverName
        options.connect.family = addressFamily
        for entry in resolve {
            guard let parsed = ResolveOverride(parsing: entry) else { throw .invalidArgument("resolve: '\(entry)' is not host:port:address") }
            options.connect.overrides.append(parsed)
        }
        options.verifyPeer = tls.verifiesPeer
        options.caFile = tls.caFile
        options.clientCertificate = tls.clientCertificate.map {
            ClientCertificate(certificateFile: $0.certificateFile, keyFile: $0.keyFile, keyPassword: $0.keyPassword.map { Array($0.utf8) })
        }
        options.minimumTLSVersion = tls.minimumVersion
        options.userAgent = userAgent
        return options
    }

    /// The request headers for a hop (see `ClientOpener.headers`), checked once.
    func requestHeaders() throws(WebSocketError) -> [HTTPHeader] {
        var list: [HTTPHeader] = []
        do {
            for header in headers { list.append(try HTTPHeader(validating: header.name, header.value)) }
            try ClientHandshake.validateUserHeaders(list)
        } catch {
            throw .invalidArgument("header: \(error)")
        }
        func has(_ name: String) -> Bool { list.contains { $0.hasName(name) } }
        if let origin, !has("Origin") { list.append(HTTPHeader(name: "Origin", value: origin)) }
        if let userAgent, !has("User-Agent") { list.append(HTTPHeader(name: "User-Agent", value: userAgent)) }
        if let bearerToken, !has("Authorization") { list.append(HTTPHeader(name: "Authorization", value: "Bearer \(bearerToken)")) }
        return list
    }
}

extension Duration {
    /// Seconds as a Double, for the engine's options.
    var seconds: Double {
        let parts = components
        return Double(parts.seconds) + Double(parts.attoseconds) / 1e18
    }
}
