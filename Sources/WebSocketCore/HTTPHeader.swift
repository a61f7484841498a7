/// One HTTP header field as sent or received.
public struct HTTPHeader: Sendable, Equatable {
    public var name: String
    public var value: String

    public init(name: String, value: String) {
        self.name = name
        self.value = value
    }

    /// Parses a command-line `Name: value` header. Throws `HeaderError` unless the name is an
    /// HTTP token (RFC 9110 §5.1) and the value has no CR, LF, NUL or other control bytes
    /// besides tab (no header injection, RFC 9110 §5.5).
    public init(parsing line: String) throws(HeaderError) {
        guard let colon = line.firstIndex(of: ":") else { throw .missingColon(line) }
        let name = String(line[..<colon])
        try self.init(validating: name, HTTPText.trimmed(line[line.index(after: colon)...]))
    }

    /// A header from a name and a value, validated as in `init(parsing:)`.
    public init(validating name: String, _ value: String) throws(HeaderError) {
        guard !name.isEmpty, name.utf8.allSatisfy(HTTPHeader.isTokenByte) else { throw .badName(name) }
        guard value.utf8.allSatisfy({ $0 == 0x09 || ($0 >= 0x20 && $0 != 0x7F) }) else { throw .badValue(name) }
        self.init(name: name, value: value)
    }

    /// tchar (RFC 9110 §5.6.2).
    static func isTokenByte(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "0")...UInt8(ascii: "9"):
            return true
        default:
            return "!#$%&'*+-.^_`|~".utf8.contains(byte)
        }
    }

    /// Whether `text` is a non-empty token (RFC 9110 §5.6.2).
    static func isToken(_ text: String) -> Bool { !text.isEmpty && text.utf8.allSatisfy(isTokenByte) }

    /// Whether the name matches `other`, ignoring ASCII case.
    public func hasName(_ other: String) -> Bool { name.lowercased() == other.lowercased() }

    /// Whether the value may be a secret that diagnostics must not print: credentials and
    /// cookies by name, and any header whose name mentions a token, key, secret, password,
    /// session or auth (X-Api-Key, X-Auth-Token, ...). The handshake's own
    /// Sec-WebSocket-Key/Accept are nonces, not secrets.
    public var isSensitive: Bool {
        let lower = name.lowercased()
        if lower.hasPrefix("sec-websocket-") { return false }
        if ["authorization", "proxy-authorization", "cookie", "set-cookie"].contains(lower) { return true }
        return ["token", "key", "secret", "password", "passwd", "session", "auth", "credential", "signature"].contains { lower.contains($0) }
    }
}

/// Why a header given on the command line was refused.
public enum HeaderError: Error, Equatable, CustomStringConvertible {
    case missingColon(String)
    case badName(String)
    case badValue(String)
    case reserved(String)

    public var description: String {
        switch self {
        case .missingColon: return "header must look like 'Name: value'"
        case .badName(let name): return "header name '\(name)' is not a valid HTTP token"
        case .badValue(let name): return "value of header '\(name)' contains CR, LF or another control character"
        case .reserved(let name): return "header '\(name)' is part of the WebSocket handshake and set by wspipe itself"
        }
    }
}

extension HTTPHeader {
    /// A `Basic` credentials header (RFC 7617): `name` is Authorization or
    /// Proxy-Authorization; the value is base64 of "user:password" (UTF-8).
    public static func basicCredentials(_ name: String, user: String, password: String) -> HTTPHeader {
        HTTPHeader(name: name, value: "Basic " + Base64.encode(Array("\(user):\(password)".utf8)))
    }
}

extension HTTPRequestHead {
    /// An HTTP/1.1 request head as bytes: the request line, one line per header, the blank
    /// line. The WebSocket handshake and the proxy CONNECT request are written by it.
    public static func bytes(method: String, target: String, headers: [HTTPHeader]) -> [UInt8] {
        var text = "\(method) \(target) HTTP/1.1\r\n"
        for header in headers { text += "\(header.name): \(header.value)\r\n" }
        return Array((text + "\r\n").utf8)
    }
}
