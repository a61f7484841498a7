import WebSocketCore
import WebSocketTransport

/// Everything a session needs to know, as values: the CLI fills it in, tests build it
/// directly.
public struct BridgeConfiguration: Sendable {
    public enum Mode: Sendable, Equatable {
        /// Lines ⇄ text messages (each received message is followed by the separator).
        case text
        /// Bytes ⇄ binary messages (received messages are written raw).
        case binary
    }

    public var url: WebSocketURL
    public var mode: Mode = .text
    /// Line separator in text mode, both ways: newline, or NUL with -0.
    public var separator: UInt8 = 0x0A
    /// Binary mode: largest message made from stdin, in bytes.
    public var chunkSize: Int = 64 * 1024
    /// Whether stdin EOF starts the closing handshake (false with --no-close).
    public var closeOnEndOfInput = true
    /// Close sent at stdin EOF.
    public var closeCode: CloseCode = .normalClosure
    public var closeReason: String = ""
    /// Seconds to wait for the server's Close (and then its TCP close) after ours.
    public var closeTimeout: Double = 5
    /// Seconds allowed for DNS, TCP, TLS and the WebSocket handshake together.
    public var connectTimeout: Double = 10
    /// Largest message accepted from the server, in bytes (larger: close 1009).
    public var maxMessageSize: UInt64 = 64 << 20
    /// Seconds between pings we send; nil: none.
    public var pingInterval: Double?
    /// Seconds to wait for a pong after a ping was written; nil: no limit.
    public var pingTimeout: Double?
    /// Extra request headers (-H), validated.
    public var headers: [HTTPHeader] = []
    /// Offered subprotocols (--protocol), in order.
    public var subprotocols: [String] = []
    public var origin: String?
    public var userAgent: String? = "wspipe/\(wspipeVersion)"
    /// Sent as `Authorization: Bearer <token>` unless a -H Authorization is given.
    public var bearerToken: String?
    public var caFile: String?
    public var insecure = false
    /// -1 quiet (errors only), 0 normal, 1 verbose.
    public var verbosity = 0
    /// How to reach the server: proxies, --connect-to, --sni, -4/-6, --resolve, client
    /// certificate, --tls-min. (`caFile`, `insecure` and `userAgent` above are copied in
    /// when connecting.)
    public var network = DialOptions()
    /// -L/--location: follow 301/302/303/307/308 answers to the handshake.
    public var followRedirects = false
    /// --max-redirs: at most this many redirects are followed.
    public var maxRedirects = 5

    public init(url: WebSocketURL) { self.url = url }

    /// The handshake request headers beyond the mandatory ones, in order.
    public var requestHeaders: [HTTPHeader] { requestHeaders(credentials: true, userHost: true) }

    /// The same for a redirect target. Without `credentials` (another host than the
    /// URL's), the bearer token and every -H header whose value is secret (Authorization,
    /// Cookie, names with token, key, secret...) are left out; without `userHost`, a -H Host.
    func requestHeaders(credentials: Bool, userHost: Bool) -> [HTTPHeader] {
        var list = headers.filter { (credentials || !$0.isSensitive) && (userHost || !$0.hasName("Host")) }
        func has(_ name: String) -> Bool { list.contains { $0.hasName(name) } }
        if let origin, !has("Origin") { list.append(HTTPHeader(name: "Origin", value: origin)) }
        if let userAgent, !has("User-Agent") { list.append(HTTPHeader(name: "User-Agent", value: userAgent)) }
        if credentials, let bearerToken, !has("Authorization") {
            list.append(HTTPHeader(name: "Authorization", value: "Bearer \(bearerToken)"))
        }
        return list
    }
}

public let wspipeVersion = "0.1.0"
