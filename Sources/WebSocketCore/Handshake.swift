/// The client's opening handshake (RFC 6455 §4.1): builds the upgrade request and checks
/// the server's answer.
public struct ClientHandshake: Sendable {
    /// The GUID appended to the key before hashing (§1.3).
    public static let guid = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"

    public var url: WebSocketURL
    /// Base64 of 16 random bytes (§4.1 item 7).
    public var key: String
    /// Subprotocols offered, in order of preference (`Sec-WebSocket-Protocol`).
    public var subprotocols: [String]
    /// Further request headers. One named Host, Origin, User-Agent or Authorization replaces
    /// the default of that name; handshake headers are refused by `validateUserHeaders`.
    public var headers: [HTTPHeader]
    /// Extensions offered, in order of preference (`Sec-WebSocket-Extensions`, §9.1).
    public var extensions: [any WebSocketExtension]

    /// - Parameters:
    ///   - key: the `Sec-WebSocket-Key`; by default 16 bytes from the kernel CSPRNG.
    ///   - extensions: extensions to offer; the server's answer is checked by each one.
    public init(url: WebSocketURL, subprotocols: [String] = [], headers: [HTTPHeader] = [],
                key: String = Base64.encode(SystemRandom.bytes(16)), extensions: [any WebSocketExtension] = []) {
        self.url = url
        self.key = key
        self.subprotocols = subprotocols
        self.headers = headers
        self.extensions = extensions
    }

    /// Header names the handshake itself owns; users cannot set them.
    public static let reservedHeaderNames = ["upgrade", "connection", "sec-websocket-key", "sec-websocket-version",
                                             "sec-websocket-accept", "sec-websocket-extensions", "content-length",
                                             "transfer-encoding"]

    /// Throws `.reserved` for a header the handshake owns.
    public static func validateUserHeaders(_ headers: [HTTPHeader]) throws(HeaderError) {
        for header in headers where reservedHeaderNames.contains(header.name.lowercased()) {
            throw .reserved(header.name)
        }
    }

    /// The headers in the order they are sent, after the request line.
    public var requestHeaders: [HTTPHeader] {
        var list: [HTTPHeader] = []
        func userValue(_ name: String) -> HTTPHeader? { headers.first { $0.hasName(name) } }
        list.append(userValue("Host") ?? HTTPHeader(name: "Host", value: url.hostHeader))
        list.append(HTTPHeader(name: "Upgrade", value: "websocket"))
        list.append(HTTPHeader(name: "Connection", value: "Upgrade"))
        list.append(HTTPHeader(name: "Sec-WebSocket-Key", value: key))
        list.append(HTTPHeader(name: "Sec-WebSocket-Version", value: "13"))
        if !subprotocols.isEmpty {
            list.append(HTTPHeader(name: "Sec-WebSocket-Protocol", value: subprotocols.joined(separator: ", ")))
        }
        // An offer that is not tokens (a broken extension) is not sent rather than sent malformed.
        if let offer = try? ExtensionNegotiation.offer(extensions) {
            list.append(HTTPHeader(name: "Sec-WebSocket-Extensions", value: offer))
        }
        if userValue("Authorization") == nil, let user = url.user {
            list.append(.basicCredentials("Authorization", user: user, password: url.password ?? ""))
        }
        for header in headers where !header.hasName("Host") && !header.hasName("Sec-WebSocket-Protocol") {
            list.append(header)
        }
        return list
    }

    /// The request as bytes: request line, headers, empty line.
    public var requestBytes: [UInt8] {
        HTTPRequestHead.bytes(method: "GET", target: url.requestTarget, headers: requestHeaders)
    }

    /// The `Sec-WebSocket-Accept` value a server must answer for `key` (§4.2.2 item 5.4).
    public static func acceptValue(forKey key: String) -> String {
        Base64.encode(SHA1.hash(Array((key + guid).utf8)))
    }

    /// What the server agreed to.
    public struct Negotiated: Sendable, Equatable {
        /// The subprotocol the server selected, if any.
        public var subprotocol: String?
        /// The extensions the server selected, as it answered them, in the order they apply;
        /// each one was accepted by the offered extension of that name.
        public var extensions: [ExtensionOffer] = []
    }

    /// Checks a parsed response (§4.1, "the client MUST validate the server's response"):
    /// status 101, `Upgrade: websocket`, `Connection` containing `Upgrade`, the right
    /// `Sec-WebSocket-Accept`, extensions only as offered and accepted by the offered
    /// extension (`ExtensionNegotiation.accept`), a subprotocol only if offered.
    public func validate(_ response: HTTPResponseHead) throws(HandshakeError) -> Negotiated {
        guard response.statusCode == 101 else { throw .unexpectedStatus(response) }
        let upgrade = response.values("Upgrade")
        guard !upgrade.isEmpty else { throw .invalid("the 101 response has no Upgrade header") }
        guard upgrade.count == 1, upgrade[0].lowercased() == "websocket" else {
            throw .invalid("the 101 response has 'Upgrade: \(upgrade.joined(separator: ", "))' instead of 'websocket'")
        }
        let connection = response.values("Connection")
        guard !connection.isEmpty else { throw .invalid("the 101 response has no Connection header") }
        let tokens = connection.flatMap { HTTPText.list($0) }.map { $0.lowercased() }
        guard tokens.contains("upgrade") else {
            throw .invalid("the 101 response has 'Connection: \(connection.joined(separator: ", "))' without the Upgrade token")
        }
        let accept = response.values("Sec-WebSocket-Accept")
        guard !accept.isEmpty else { throw .invalid("the 101 response has no Sec-WebSocket-Accept header") }
        let expected = ClientHandshake.acceptValue(forKey: key)
        guard accept.count == 1, accept[0] == expected else {
            throw .invalid("Sec-WebSocket-Accept is '\(accept.joined(separator: ", "))', expected '\(expected)'")
        }
        var agreed: [ExtensionOffer] = []
        if extensions.isEmpty {
            let selected = response.values("Sec-WebSocket-Extensions").flatMap { HTTPText.list($0) }
                .compactMap { HTTPText.list($0, separator: UInt8(ascii: ";")).first }
            if let first = selected.first { throw .invalid(ExtensionNegotiationError.notOffered(first).description) }
        } else {
            do throws(ExtensionNegotiationError) {
                agreed = try ExtensionNegotiation.accept(response.values("Sec-WebSocket-Extensions"), offered: extensions).map(\.1)
            } catch {
                throw .invalid(error.description)
            }
        }
        let selected = response.values("Sec-WebSocket-Protocol").flatMap { HTTPText.list($0) }
        if selected.count > 1 {
            throw .invalid("the server selected several subprotocols (\(selected.joined(separator: ", ")))")
        }
        if let chosen = selected.first, !subprotocols.contains(chosen) {
            throw .invalid("the server selected subprotocol '\(chosen)', which was not offered")
        }
        return Negotiated(subprotocol: selected.first, extensions: agreed)
    }
}

/// A parsed HTTP/1.x response head (status line and header fields).
public struct HTTPResponseHead: HTTPHeaderFields, Sendable, Equatable {
    public var version: String
    public var statusCode: Int
    public var reason: String
    public var headers: [HTTPHeader]

    /// Largest response head accepted, in bytes (status line, headers, blank line).
    public static let maximumSize = 64 * 1024

    /// Finds and parses a response head at the start of `bytes`. Returns nil while the
    /// blank line ending the head has not arrived (and fewer than `maximumSize` bytes are
    /// there), else the head and its length in bytes; whatever follows is not part of it
    /// (for a 101, the first WebSocket frames). Lines may end in CRLF or bare LF (RFC 9112
    /// §2.2); obsolete line folding is joined with a space. Throws `.malformed` for text
    /// that is not an HTTP response and `.headTooLarge` past `maximumSize`.
    public static func parse(_ bytes: UnsafeRawBufferPointer) throws(HandshakeError) -> (HTTPResponseHead, Int)? {
        let limit = min(bytes.count, maximumSize)
        var end: Int?
        var i = 0
        while i < limit {
            if bytes[i] == 0x0A {
                if i + 1 < bytes.count && bytes[i + 1] == 0x0A { end = i + 2; break }
                if i + 2 < bytes.count && bytes[i + 1] == 0x0D && bytes[i + 2] == 0x0A { end = i + 3; break }
            }
            i += 1
        }
        // Refuse garbage early instead of waiting for 64 KiB of it.
        let prefix = Array("HTTP/".utf8)
        let seen = min(bytes.count, prefix.count)
        if bytes.count >= 2 && (bytes[0] == 0x15 || bytes[0] == 0x16) && bytes[1] == 0x03 {
            // A TLS record (alert or handshake): the server expected a TLS client.
            throw .malformed("the server answered with TLS, not HTTP (it expects a TLS client: wss://, or https:// for a proxy)")
        }
        if !zip(bytes[0..<seen], prefix[0..<seen]).allSatisfy({ $0 == $1 }) {
            throw .malformed("the server's answer is not HTTP (it starts with \(printable(Array(bytes.prefix(24)))))")
        }
        guard let end else {
            if bytes.count >= maximumSize { throw .headTooLarge(maximumSize) }
            return nil
        }
        if end > maximumSize { throw .headTooLarge(maximumSize) }
        let parsed: (ArraySlice<UInt8>, [HTTPHeader])?
        do throws(HTTPHeadSyntaxError) {
            parsed = try HTTPHeadSyntax.parse(UnsafeRawBufferPointer(rebasing: bytes[..<end]))
        } catch {
            throw .malformed(error.message)
        }
        guard let (startLine, headers) = parsed else { throw .malformed("empty response") }
        let parts = startLine.split(separator: 0x20, maxSplits: 2, omittingEmptySubsequences: false)
        guard parts.count >= 2, HTTPHeadSyntax.http1MinorVersion(parts[0]) != nil,
              parts[1].count == 3, parts[1].allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }),
              let code = Int(String(decoding: parts[1], as: UTF8.self)) else {
            throw .malformed("bad status line \(printable(Array(startLine.prefix(80))))")
        }
        let reason = parts.count > 2 ? String(decoding: parts[2], as: UTF8.self) : ""
        let head = HTTPResponseHead(version: String(decoding: parts[0], as: UTF8.self), statusCode: code,
                                    reason: reason, headers: headers)
        return (head, end)
    }
}

/// Why the opening handshake failed.
public enum HandshakeError: Error, Equatable, CustomStringConvertible {
    /// The answer is not an HTTP response.
    case malformed(String)
    /// The response head exceeded the limit (bytes).
    case headTooLarge(Int)
    /// A status other than 101 (the head; the body is read by the caller if wanted).
    case unexpectedStatus(HTTPResponseHead)
    /// A 101 that breaks §4.1's rules.
    case invalid(String)

    public var description: String {
        switch self {
        case .malformed(let why): return why
        case .headTooLarge(let limit): return "the server's response headers exceed \(limit / 1024) KiB"
        case .unexpectedStatus(let head):
            let reason = head.reason.isEmpty ? "" : " \(head.reason)"
            return "the server answered \(head.statusCode)\(reason) instead of 101 Switching Protocols"
        case .invalid(let why): return why
        }
    }
}

/// Bytes shown to a user: printable ASCII as is, the rest escaped, in quotes.
public func printable(_ bytes: [UInt8]) -> String {
    var out = "\""
    for byte in bytes {
        switch byte {
        case 0x0A: out += "\\n"
        case 0x0D: out += "\\r"
        case 0x09: out += "\\t"
        case 0x22: out += "\\\""
        case 0x5C: out += "\\\\"
        case 0x20..<0x7F: out.unicodeScalars.append(Unicode.Scalar(byte))
        default: out += "\\x" + hex(byte)
        }
    }
    return out + "\""
}

/// HTTP field text handled as bytes (RFC 9110 §5.5, §5.6). Swift's Character-level
/// operations would treat a space or comma followed by a combining mark as one grapheme
/// cluster and leave it untrimmed or unsplit; protocol syntax is defined on octets.
public enum HTTPText {
    /// `text` without leading and trailing SP and HTAB bytes (OWS), and without the bytes in
    /// `also` (for example CR and LF when trimming a file's contents).
    public static func trimmed<S: StringProtocol>(_ text: S, also: [UInt8] = []) -> String {
        let bytes = Array(text.utf8)
        func isSpace(_ byte: UInt8) -> Bool { byte == 0x20 || byte == 0x09 || also.contains(byte) }
        guard let first = bytes.firstIndex(where: { !isSpace($0) }), let last = bytes.lastIndex(where: { !isSpace($0) }) else {
            return ""
        }
        return String(decoding: bytes[first...last], as: UTF8.self)
    }

    /// The elements of a comma-separated list (`#rule`, RFC 9110 §5.6.1): split at comma
    /// bytes, each trimmed, empty ones dropped. `separator` may be another byte (';', ' ').
    public static func list<S: StringProtocol>(_ text: S, separator: UInt8 = UInt8(ascii: ",")) -> [String] {
        Array(text.utf8).split(separator: separator, omittingEmptySubsequences: false)
            .map { trimmed(String(decoding: $0, as: UTF8.self)) }
            .filter { !$0.isEmpty }
    }
}

extension StringProtocol {
    /// The text without leading and trailing spaces and tabs (HTTP's OWS), by byte.
    var trimmingSpaces: String { HTTPText.trimmed(self) }
}
