import WebSocketCore

/// A proxy as a URL: `http://[user:password@]host[:port]`, `https://...`, `socks5://...`
/// or `socks5h://...`. Without a scheme, `host:port` is an HTTP proxy. Default ports: 80
/// (http), 443 (https), 1080 (socks5, socks5h). A trailing `/` is allowed (it often comes
/// with environment variables); a path is not.
public struct ProxyURL: Sendable, Equatable, CustomStringConvertible {
    public enum Kind: String, Sendable {
        /// HTTP CONNECT over plain TCP.
        case http
        /// HTTP CONNECT over TLS to the proxy (the WebSocket's own TLS runs inside).
        case https
        /// SOCKS5 with the target's name resolved locally (the proxy gets an address).
        case socks5
        /// SOCKS5 with the target's name resolved by the proxy.
        case socks5h

        public var defaultPort: UInt16 {
            switch self {
            case .http: return 80
            case .https: return 443
            case .socks5, .socks5h: return 1080
            }
        }

        /// "HTTP proxy", "SOCKS5 proxy", for messages.
        public var label: String {
            switch self {
            case .http: return "HTTP proxy"
            case .https: return "HTTPS proxy"
            case .socks5, .socks5h: return "SOCKS5 proxy"
            }
        }

        public var isSOCKS: Bool { self == .socks5 || self == .socks5h }
    }

    public var kind: Kind
    /// Host name or IP address, without brackets.
    public var host: String
    public var port: UInt16
    /// Credentials from the URL's user information, percent-decoded.
    public var user: String?
    public var password: String?

    public init(kind: Kind, host: String, port: UInt16, user: String? = nil, password: String? = nil) {
        self.kind = kind
        self.host = host
        self.port = port
        self.user = user
        self.password = password
    }

    /// "proxy.example:3128" (brackets around IPv6), for messages.
    public var hostPort: String { HostPort(host: host, port: port).description }

    /// The URL without credentials: safe to print.
    public var description: String { "\(kind.rawValue)://\(hostPort)" }

    /// "HTTP proxy proxy.example:3128": how messages name it.
    public var name: String { "\(kind.label) \(hostPort)" }

    public var hasCredentials: Bool { user != nil }

    /// Parses `text`; `defaultKind` is used when there is no scheme. Errors never quote the
    /// user information.
    public init(parsing text: String, defaultKind: Kind = .http) throws(ProxyURLError) {
        var rest = Substring(text)
        kind = defaultKind
        let bytes = Array(text.utf8)
        if let start = bytes.firstIndex(of: UInt8(ascii: ":")), bytes[start...].starts(with: Array("://".utf8)),
           bytes[..<start].allSatisfy({ $0 != UInt8(ascii: "@") && $0 != UInt8(ascii: "/") }) {
            let scheme = String(decoding: bytes[..<start], as: UTF8.self).lowercased()
            switch scheme {
            case "http": kind = .http
            case "https": kind = .https
            case "socks5": kind = .socks5
            case "socks5h": kind = .socks5h
            case "socks", "socks4", "socks4a":
                throw .unsupportedScheme(scheme, hint: "SOCKS4 is not supported; use socks5:// or socks5h://")
            default:
                throw .unsupportedScheme(scheme, hint: "use http://, https://, socks5:// or socks5h://")
            }
            rest = Substring(String(decoding: bytes[(start + 3)...], as: UTF8.self))
        }
        if rest.hasSuffix("/") { rest = rest.dropLast() }
        user = nil
        password = nil
        if let at = rest.lastIndex(of: "@") {
            let info = rest[..<at]
            rest = rest[rest.index(after: at)...]
            if let colon = info.firstIndex(of: ":") {
                user = try ProxyURL.decode(info[..<colon])
                password = try ProxyURL.decode(info[info.index(after: colon)...])
            } else {
                user = try ProxyURL.decode(info)
            }
        }
        if rest.contains("/") || rest.contains("?") || rest.contains("#") {
            throw .badHost("a proxy URL has no path")
        }
        guard !rest.isEmpty else { throw .badHost("no host") }
        // Host, port: "[v6]:port", "name:port", "name".
        if !rest.hasPrefix("["), rest.firstIndex(of: ":") != rest.lastIndex(of: ":") {
            throw .badHost("put an IPv6 address in brackets: [::1]:3128")
        }
        guard let parsed = HostPort(parsing: String(rest), defaultPort: kind.defaultPort) else {
            if let colon = rest.lastIndex(of: ":"), !rest.hasSuffix("]") {
                throw .badPort(String(rest[rest.index(after: colon)...]))
            }
            throw .badHost("'\(rest)' is not a host name or address")
        }
        host = parsed.host
        port = parsed.port
    }

    private static func decode(_ text: Substring) throws(ProxyURLError) -> String {
        guard let decoded = WebSocketURL.percentDecoded(Array(text.utf8)[...]) else { throw .badUserInfo }
        return decoded
    }
}

/// Why a proxy URL was refused. Never contains the credentials.
public enum ProxyURLError: Error, Equatable, CustomStringConvertible {
    case unsupportedScheme(String, hint: String)
    case badHost(String)
    case badPort(String)
    case badUserInfo

    public var description: String {
        switch self {
        case .unsupportedScheme(let scheme, let hint): return "unsupported proxy scheme '\(scheme)' (\(hint))"
        case .badHost(let why): return "bad proxy host: \(why)"
        case .badPort(let text): return "bad proxy port '\(text)' (expected 1-65535)"
        case .badUserInfo:
            return "bad user:password in the proxy URL (percent-encode '/', '?', '#', '@', ':' and '%' in them)"
        }
    }
}
