// Also compiled into the fuzz target `bus` (fuzz/run), one module without the transport.
import WebSocketCore
#if canImport(WebSocketTransport)
import WebSocketTransport
#endif

/// `--bus URL`: which bus, where, over TLS or not, the channel, and the credentials given
/// in the URL. `redis://[[USER]:PASSWORD@]HOST[:PORT]/CHANNEL`, `rediss://` over TLS;
/// `nats://[USER:PASSWORD@|TOKEN@]HOST[:PORT]/SUBJECT`, `tls://` over TLS.
public struct BusAddress: Sendable, Equatable, CustomStringConvertible {
    public enum Kind: Sendable, Equatable { case redis, nats }

    public var kind: Kind
    public var tls: Bool
    public var host: String
    public var port: UInt16
    public var channel: String
    /// Redis 6 ACL user; nil: AUTH with the password alone (the default user).
    public var user: String?
    public var password: String?

    /// Why a --bus URL was refused (the face words it).
    public enum Problem: Error, Equatable, Sendable {
        /// A scheme we do not speak (`scheme` as given, lowercased).
        case scheme(String)
        case noHost
        /// A host that is neither a name nor a bracketed IPv6 address.
        case badHost(String)
        case badPort(String)
        /// No channel after the host (`redis://host/` or `redis://host`).
        case noChannel
        /// A channel with a space or control byte (RESP sends it as a bulk string, but the
        /// man page promises channels a shell can pass on).
        case badChannel(String)
        /// A %-escape that is not two hex digits in the user or password, or one that
        /// decodes to bytes that are not UTF-8.
        case badEscape
    }

    public init(parsing text: String) throws(Problem) {
        guard let colon = text.firstIndex(of: ":"), text[colon...].hasPrefix("://") else { throw .scheme(text) }
        let scheme = text[..<colon].lowercased()
        switch scheme {
        case "redis": (kind, tls) = (.redis, false)
        case "rediss": (kind, tls) = (.redis, true)
        case "nats": (kind, tls) = (.nats, false)
        case "tls": (kind, tls) = (.nats, true)
        default: throw .scheme(scheme)
        }
        var rest = text[text.index(colon, offsetBy: 3)...]
        guard let slash = rest.firstIndex(of: "/") else { throw .noChannel }
        var authority = rest[..<slash]
        rest = rest[rest.index(after: slash)...]
        guard !rest.isEmpty else { throw .noChannel }
        guard rest.utf8.allSatisfy({ $0 > 0x20 && $0 != 0x7F }) else { throw .badChannel(String(rest)) }
        // A NATS subject is tokens between dots; no wildcards: we publish on it too.
        if kind == .nats, rest.hasPrefix(".") || rest.hasSuffix(".") || rest.contains("..") || rest.contains("*") || rest.contains(">") {
            throw .badChannel(String(rest))
        }
        channel = String(rest)
        user = nil
        password = nil
        if let at = authority.lastIndex(of: "@") {
            let credentials = authority[..<at]
            authority = authority[authority.index(after: at)...]
            if let colon = credentials.firstIndex(of: ":") {
                let name = try BusAddress.unescape(credentials[..<colon])
                user = name.isEmpty ? nil : name
                password = try BusAddress.unescape(credentials[credentials.index(after: colon)...])
            } else {
                password = try BusAddress.unescape(credentials)  // redis://secret@host: the password alone
            }
        }
        var hostPart = authority
        var portText: Substring?
        if hostPart.hasPrefix("[") {
            guard let split = BracketedHost(hostPart) else { throw .noHost }
            portText = split.port
            hostPart = split.host
        } else if let colon = hostPart.lastIndex(of: ":") {
            portText = hostPart[hostPart.index(after: colon)...]
            hostPart = hostPart[..<colon]
        }
        guard !hostPart.isEmpty else { throw .noHost }
        // A name (letters, digits, '.', '-', '_') or, bracketed, an IPv6 address.
        let bracketed = authority.hasPrefix("[")
        guard hostPart.utf8.allSatisfy({ byte in
            switch byte {
            case 0x30...0x39, 0x41...0x46, 0x61...0x66, UInt8(ascii: "."): return true
            case UInt8(ascii: ":"): return bracketed
            case 0x47...0x5A, 0x67...0x7A, UInt8(ascii: "-"), UInt8(ascii: "_"): return !bracketed
            default: return false
            }
        }) else { throw .badHost(String(hostPart)) }
        host = String(hostPart)
        if let portText {
            guard let number = UInt16(portText), number > 0 else { throw .badPort(String(portText)) }
            port = number
        } else {
            port = kind == .nats ? 4222 : 6379
        }
    }

    /// The URL without its password (for -v lines and errors).
    public var description: String {
        var out = kind == .nats ? (tls ? "tls://" : "nats://") : (tls ? "rediss://" : "redis://")
        // The user as URL text: the description parses back to the same user.
        if let user { out += WebSocketURL.percentEncoded(userInfo: user) + ":***@" } else if password != nil { out += "***@" }
        out += host.contains(":") ? "[\(host)]" : host
        return out + ":\(port)/\(channel)"
    }

    private static func unescape(_ text: Substring) throws(Problem) -> String {
        guard let decoded = WebSocketURL.percentDecoded(ArraySlice(text.utf8)) else { throw .badEscape }
        return decoded
    }
}
