/// A parsed `ws://` or `wss://` URL (RFC 6455 §3), or a `ws+unix://` / `wss+unix://` URL
/// naming a Unix domain socket.
///
/// Unix socket grammar: `ws+unix://SOCKET[:TARGET]`. SOCKET is the socket's file name up to
/// the first `:` (percent-decoded, so `%3A` is a colon in the name; a leading `@` names a
/// Linux abstract socket); TARGET, which must start with `/` or `?`, is the request target
/// (default `/`). `ws+unix:///run/app.sock:/path?x=1` dials /run/app.sock and asks for
/// `/path?x=1` with `Host: localhost`.
///
/// The request target (path and query) is kept as written; only bytes that cannot appear
/// in an HTTP request line (space, control characters, non-ASCII) are percent-encoded, as
/// browsers do. Fragments are refused (§3: "Fragment identifiers ... MUST NOT be used").
public struct WebSocketURL: Sendable, Equatable, CustomStringConvertible {
    /// `wss` (TLS) or `ws`.
    public var isSecure: Bool
    /// The host as written, without the brackets of an IPv6 literal.
    public var host: String
    /// The TCP port: the URL's, or 80 / 443.
    public var port: UInt16
    /// Whether the URL named a port (even the default one).
    public var hasExplicitPort: Bool
    /// Path and query, starting with "/" (RFC 6455 §3's "resource name").
    public var requestTarget: String
    /// User name and password from `user:pass@`, percent-decoded; nil if absent.
    public var user: String?
    /// The password of `user:pass@`, percent-decoded; nil if absent.
    public var password: String?
    /// The Unix domain socket to dial instead of host and port (`ws+unix://` URLs and
    /// `--unix-socket`); host and port then only name the server in Host and TLS.
    public var unixSocketPath: String?

    /// Whether `host` is an IPv6 literal (written in brackets).
    public var isIPv6Literal: Bool { host.contains(":") }

    /// Whether `host` is an IP address literal (IPv4 dotted quad or IPv6), for which TLS
    /// sends no SNI and verifies an IP address instead of a name.
    public var isIPLiteral: Bool {
        if isIPv6Literal { return true }
        let parts = host.split(separator: ".", omittingEmptySubsequences: false)
        return parts.count == 4 && parts.allSatisfy { part in
            !part.isEmpty && part.count <= 3 && part.allSatisfy(\.isASCIIDigit) && (Int(part) ?? 256) <= 255
        }
    }

    /// The value for the Host header: host (bracketed if IPv6) and the port unless it is
    /// the scheme's default (RFC 7230 §5.4, RFC 6455 §4.1 item 4).
    public var hostHeader: String {
        let name = isIPv6Literal ? "[\(host)]" : host
        let defaultPort: UInt16 = isSecure ? 443 : 80
        return port == defaultPort ? name : "\(name):\(port)"
    }

    /// The URL without user information (safe to print).
    public var description: String {
        if let socket = unixSocketPath, host == "localhost", !hasExplicitPort {
            let escaped = socket.replacingColons
            return "\(isSecure ? "wss" : "ws")+unix://\(escaped):\(requestTarget)"
        }
        let name = isIPv6Literal ? "[\(host)]" : host
        let portPart = hasExplicitPort ? ":\(port)" : ""
        return "\(isSecure ? "wss" : "ws")://\(name)\(portPart)\(requestTarget)"
    }

    /// Parses `text`. Throws `URLError` naming what is wrong.
    public init(parsing text: String) throws(URLError) {
        let bytes = Array(text.utf8)
        guard let colon = bytes.firstIndex(of: UInt8(ascii: ":")),
              bytes[colon...].starts(with: Array("://".utf8)) else {
            throw .notAWebSocketURL(text)
        }
        let scheme = String(decoding: bytes[..<colon], as: UTF8.self).lowercased()
        if scheme == "ws+unix" || scheme == "wss+unix" {
            self = try WebSocketURL(unixSocketURL: bytes[(colon + 3)...], secure: scheme == "wss+unix")
            return
        }
        switch scheme {
        case "ws": isSecure = false
        case "wss": isSecure = true
        case "http", "https":
            throw .unsupportedScheme(scheme, hint: "use \(scheme == "http" ? "ws" : "wss")://")
        default:
            throw .unsupportedScheme(scheme, hint: "use ws:// or wss://")
        }
        var rest = bytes[(colon + 3)...]
        if rest.contains(UInt8(ascii: "#")) {
            // '#' is never valid here, but an unencoded one in a password is the likely cause.
            throw rest.contains(UInt8(ascii: "@")) ? .badUserInfo : .fragment
        }
        let authorityEnd = rest.firstIndex { $0 == UInt8(ascii: "/") || $0 == UInt8(ascii: "?") } ?? rest.endIndex
        var authority = rest[..<authorityEnd]
        rest = rest[authorityEnd...]

        user = nil
        password = nil
        if let at = authority.lastIndex(of: UInt8(ascii: "@")) {
            let info = authority[..<at]
            authority = authority[(at + 1)...]
            if let sep = info.firstIndex(of: UInt8(ascii: ":")) {
                user = try WebSocketURL.percentDecode(info[..<sep])
                password = try WebSocketURL.percentDecode(info[(sep + 1)...])
            } else {
                user = try WebSocketURL.percentDecode(info)
            }
        }

        var portText: ArraySlice<UInt8>?
        if authority.first == UInt8(ascii: "[") {
            guard let close = authority.firstIndex(of: UInt8(ascii: "]")) else { throw .badHost("unclosed '[' in IPv6 address") }
            let literal = authority[(authority.startIndex + 1)..<close]
            guard literal.contains(UInt8(ascii: ":")), literal.allSatisfy({ byte in
                (byte >= 0x30 && byte <= 0x39) || (byte | 0x20 >= 0x61 && byte | 0x20 <= 0x66) || byte == 0x3A || byte == 0x2E
            }) else {
                throw .badHost("'\(String(decoding: literal, as: UTF8.self))' is not an IPv6 address")
            }
            host = String(decoding: literal, as: UTF8.self)
            let after = authority[(close + 1)...]
            if !after.isEmpty {
                guard after.first == UInt8(ascii: ":") else { throw .badHost("unexpected text after the IPv6 address") }
                portText = after.dropFirst()
            }
        } else {
            if let sep = authority.lastIndex(of: UInt8(ascii: ":")) {
                portText = authority[(sep + 1)...]
                authority = authority[..<sep]
            }
            guard !authority.isEmpty else { throw .badHost("the URL has no host") }
            // reg-name or IPv4: unreserved, sub-delims, pct-encoded (RFC 3986 §3.2.2).
            guard authority.allSatisfy({ byte in
                byte > 0x20 && byte < 0x7F && !"\"<>\\^`{|}[]@/?#:".utf8.contains(byte)
            }) else {
                throw .badHost("'\(String(decoding: authority, as: UTF8.self))' is not a valid host name")
            }
            host = String(decoding: authority, as: UTF8.self)
        }

        if let portText {
            guard !portText.isEmpty, portText.count <= 5, portText.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }),
                  let value = Int(String(decoding: portText, as: UTF8.self)), value >= 1, value <= 65535 else {
                // "ws://u:pa/ss@h/": an unencoded '/' or '?' in a password ends the authority
                // early and the password's start looks like a port. Do not echo it.
                if rest.contains(UInt8(ascii: "@")) { throw .badUserInfo }
                throw .badPort(String(decoding: portText, as: UTF8.self))
            }
            port = UInt16(value)
            hasExplicitPort = true
        } else {
            port = isSecure ? 443 : 80
            hasExplicitPort = false
        }

        requestTarget = WebSocketURL.encodeTarget(rest)
        unixSocketPath = nil
    }

    /// `ws+unix://SOCKET[:TARGET]` after the `://`.
    private init(unixSocketURL rest: ArraySlice<UInt8>, secure: Bool) throws(URLError) {
        if rest.contains(UInt8(ascii: "#")) { throw .fragment }
        let colon = rest.firstIndex(of: UInt8(ascii: ":"))
        let socketBytes = rest[..<(colon ?? rest.endIndex)]
        let target = colon.map { rest[($0 + 1)...] } ?? []
        guard !socketBytes.isEmpty else {
            throw .badUnixSocket("no socket path (expected ws+unix:///path/to.sock:/request/path)")
        }
        guard let socket = try? WebSocketURL.percentDecode(socketBytes), !socket.utf8.contains(0) else {
            throw .badUnixSocket("bad percent-encoding in the socket path")
        }
        guard socket.utf8.count <= WebSocketURL.maximumUnixPathLength else {
            throw .badUnixSocket("the socket path is longer than \(WebSocketURL.maximumUnixPathLength) bytes")
        }
        guard target.isEmpty || target.first == UInt8(ascii: "/") || target.first == UInt8(ascii: "?") else {
            throw .badUnixSocket("the request path after the socket's ':' must start with '/' or '?'")
        }
        isSecure = secure
        host = "localhost"
        port = secure ? 443 : 80
        hasExplicitPort = false
        user = nil
        password = nil
        unixSocketPath = socket
        requestTarget = WebSocketURL.encodeTarget(target)
    }

    /// Longest socket path a sockaddr_un holds (108 bytes with its NUL).
    public static let maximumUnixPathLength = 107

    /// Path and query as a request target: "/" added in front if missing; bytes that cannot
    /// appear in a request line are percent-encoded.
    static func encodeTarget(_ rest: ArraySlice<UInt8>) -> String {
        var target = [UInt8]()
        if rest.first != UInt8(ascii: "/") { target.append(UInt8(ascii: "/")) }
        for byte in rest {
            if byte > 0x20 && byte < 0x7F {
                target.append(byte)
            } else {
                appendEscape(byte, to: &target)
            }
        }
        return String(decoding: target, as: UTF8.self)
    }

    /// `text` as URL user information, `percentDecoded`'s inverse: every byte but RFC 3986's
    /// unreserved ones (§2.3) as a %-escape, so it reads back as the same text.
    public static func percentEncoded(userInfo text: String) -> String {
        var out = [UInt8]()
        for byte in text.utf8 {
            switch byte {
            case 0x30...0x39, 0x41...0x5A, 0x61...0x7A, UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"), UInt8(ascii: "~"):
                out.append(byte)
            default:
                appendEscape(byte, to: &out)
            }
        }
        return String(decoding: out, as: UTF8.self)
    }

    private static func appendEscape(_ byte: UInt8, to bytes: inout [UInt8]) {
        let digits = Array("0123456789ABCDEF".utf8)
        bytes += [UInt8(ascii: "%"), digits[Int(byte >> 4)], digits[Int(byte & 15)]]
    }

    static func percentDecode(_ bytes: ArraySlice<UInt8>) throws(URLError) -> String {
        guard let text = percentDecoded(bytes) else { throw .badUserInfo }
        return text
    }

    /// `bytes` (URL user information) with every `%XX` decoded; nil if an escape is not two
    /// hex digits or the result is not UTF-8 (RFC 3986 §2.1).
    public static func percentDecoded(_ bytes: ArraySlice<UInt8>) -> String? {
        var out = [UInt8]()
        var i = bytes.startIndex
        while i < bytes.endIndex {
            if bytes[i] == UInt8(ascii: "%") {
                guard i + 2 < bytes.endIndex, let high = hexValue(bytes[i + 1]), let low = hexValue(bytes[i + 2]) else {
                    return nil
                }
                out.append(high << 4 | low)
                i += 3
            } else {
                out.append(bytes[i])
                i += 1
            }
        }
        guard UTF8Validator.isValid(out) else { return nil }
        return String(decoding: out, as: UTF8.self)
    }

    private static func hexValue(_ byte: UInt8) -> UInt8? {
        switch byte {
        case 0x30...0x39: return byte - 0x30
        case 0x41...0x46: return byte - 0x41 + 10
        case 0x61...0x66: return byte - 0x61 + 10
        default: return nil
        }
    }
}

/// Why a URL was refused. Descriptions never include the user information.
public enum URLError: Error, Equatable, CustomStringConvertible {
    case notAWebSocketURL(String)
    case unsupportedScheme(String, hint: String)
    case fragment
    case badHost(String)
    case badPort(String)
    case badUserInfo
    case badUnixSocket(String)

    public var description: String {
        switch self {
        case .notAWebSocketURL:
            return "not a WebSocket URL (expected ws://host[:port]/path, wss://... or ws+unix:///socket:/path)"
        case .unsupportedScheme(let scheme, let hint):
            return "unsupported URL scheme '\(scheme)': \(hint)"
        case .fragment:
            return "WebSocket URLs cannot have a #fragment (RFC 6455 §3)"
        case .badHost(let why):
            return "bad host in URL: \(why)"
        case .badPort(let text):
            return "bad port '\(text)' in URL (expected 1-65535)"
        case .badUserInfo:
            return "bad user:password in URL (percent-encode '/', '?', '#', '@' and '%' in it as %2F, %3F, %23, %40, %25)"
        case .badUnixSocket(let why):
            return "bad ws+unix:// URL: \(why)"
        }
    }
}

extension String {
    /// The text with every ':' and '%' percent-encoded (a socket path inside a ws+unix URL).
    var replacingColons: String {
        var out = ""
        for character in self {
            switch character {
            case ":": out += "%3A"
            case "%": out += "%25"
            default: out.append(character)
            }
        }
        return out
    }
}

extension Character {
    var isASCIIDigit: Bool { isASCII && isNumber }
}
