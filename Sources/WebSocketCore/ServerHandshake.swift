/// A client's opening handshake as a server understood it (RFC 6455 §4.2.1).
public struct HandshakeRequest: Sendable, Equatable {
    /// The whole request head, headers in order.
    public var head: HTTPRequestHead
    /// The path of the request target, as sent (not percent-decoded): "/chat".
    public var path: String
    /// What follows the "?" of the target, as sent, or nil without one.
    public var query: String?
    /// The Host header's value.
    public var host: String
    /// The Origin header's value, if any (§4.2.1 item 8; browsers always send it).
    public var origin: String?
    /// The `Sec-WebSocket-Key` (base64 of 16 bytes).
    public var key: String
    /// Subprotocols offered, in the client's order of preference (repeated headers joined).
    public var subprotocols: [String]
    /// Extensions offered, in the client's order of preference (§9.1).
    public var extensions: [ExtensionOffer]

    public var headers: [HTTPHeader] { head.headers }
}

/// Why a server refuses an opening handshake, with the facts, and the response that says
/// so (`status`, `responseHeaders`, `response`).
///
/// Statuses: 400 for a request that breaks §4.2.1; 405 (with `Allow: GET`) for a method
/// other than GET, since the resource exists but only for GET; 426 (with `Upgrade:
/// websocket`) for a request that is no WebSocket upgrade at all, and (with
/// `Sec-WebSocket-Version: 13`) for another protocol version (§4.2.2 item 4); 431 for a
/// head over the size limit (RFC 6585 §5).
public enum HandshakeRefusal: Error, Equatable, Sendable, CustomStringConvertible {
    /// Not HTTP/1.x request syntax.
    case malformedRequest(String)
    /// The head did not end within `limit` bytes.
    case headTooLarge(limit: Int)
    /// A method other than GET.
    case methodNotAllowed(String)
    /// A protocol version below HTTP/1.1 (or not HTTP/1).
    case unsupportedHTTPVersion(String)
    /// A request target that is neither origin-form nor absolute-form (RFC 9112 §3.2).
    case invalidTarget(String)
    /// No `websocket` in Upgrade (the values of Upgrade, maybe none): a plain GET.
    case notWebSocketUpgrade([String])
    /// A header §4.2.1 requires is missing.
    case missingHeader(String)
    /// A header that may appear once appears several times.
    case repeatedHeader(String)
    /// A header whose value §4.2.1 does not allow (Connection without Upgrade, a key that
    /// is not base64 of 16 bytes, an empty Host, a malformed protocol or extension list).
    case invalidHeader(name: String, value: String)
    /// A `Sec-WebSocket-Version` other than 13 (its values).
    case unsupportedWebSocketVersion([String])

    /// The HTTP status of the refusal.
    public var status: Int {
        switch self {
        case .headTooLarge: return 431
        case .methodNotAllowed: return 405
        case .notWebSocketUpgrade, .unsupportedWebSocketVersion: return 426
        case .malformedRequest, .unsupportedHTTPVersion, .invalidTarget, .missingHeader, .repeatedHeader, .invalidHeader:
            return 400
        }
    }

    /// Headers the refusal must carry besides the usual ones.
    public var responseHeaders: [HTTPHeader] {
        switch self {
        case .methodNotAllowed: return [HTTPHeader(name: "Allow", value: "GET")]
        case .notWebSocketUpgrade: return [HTTPHeader(name: "Upgrade", value: "websocket"),
                                           HTTPHeader(name: "Sec-WebSocket-Version", value: "13")]
        case .unsupportedWebSocketVersion: return [HTTPHeader(name: "Sec-WebSocket-Version", value: "13")]
        default: return []
        }
    }

    /// The whole refusal (`HTTPResponse.refusal`), with `description` as its body.
    public var response: [UInt8] {
        HTTPResponse.refusalBytes(status: status, headers: responseHeaders, body: description)
    }

    public var description: String {
        switch self {
        case .malformedRequest(let why): return why
        case .headTooLarge(let limit): return "the request head exceeds \(limit) bytes"
        case .methodNotAllowed(let method): return "method \(printable(Array(method.utf8))) is not allowed; a WebSocket handshake is a GET"
        case .unsupportedHTTPVersion(let version): return "\(printable(Array(version.utf8))) is not HTTP/1.1 or later"
        case .invalidTarget(let target): return "request target \(printable(Array(target.prefix(80).utf8))) is not a path or an absolute URI"
        case .notWebSocketUpgrade(let values):
            if values.isEmpty { return "not a WebSocket handshake: the request has no Upgrade header" }
            return "not a WebSocket handshake: 'Upgrade: \(printableValue(values.joined(separator: ", ")))' has no 'websocket'"
        case .missingHeader(let name): return "the request has no \(name) header"
        case .repeatedHeader(let name): return "the request has more than one \(name) header"
        case .invalidHeader(let name, let value):
            let shown = "'\(name): \(printableValue(value))'"
            switch name.lowercased() {
            case "connection": return "\(shown) has no 'Upgrade' token"
            case "sec-websocket-key": return "\(shown) is not the base64 of 16 bytes"
            default: return "\(shown) is not valid"
            }
        case .unsupportedWebSocketVersion(let values):
            return "WebSocket version '\(printableValue(values.joined(separator: ", ")))' is not supported (only 13)"
        }
    }
}

/// Client-supplied text shown in a message: at most 80 bytes, unprintable bytes escaped.
private func printableValue(_ text: String) -> String {
    String(printable(Array(text.utf8.prefix(80))).dropFirst().dropLast())
}

/// The server's opening handshake (RFC 6455 §4.2): reads and checks the request, builds
/// the 101 or the refusal.
///
/// Feed received bytes to `receive(_:_:)` until it returns the request (or throws a
/// refusal: write `refusal.response` and close). Then choose a subprotocol and
/// extensions (`ExtensionNegotiation.respond`) and write `ServerHandshake.accept(...)`;
/// the bytes after the head (frames the client did not wait to send) start at `index`.
public struct ServerHandshake: Sendable {
    private var parser: HTTPRequestHeadParser

    /// - Parameter maximumHeadSize: largest request head accepted, in bytes (431 beyond).
    public init(maximumHeadSize: Int = HTTPRequestHead.defaultMaximumSize) {
        parser = HTTPRequestHeadParser(maximumSize: maximumHeadSize)
    }

    /// Consumes the request head from `input[index...]`; returns the checked request once
    /// the head is complete, with `index` just past it (nil: more bytes needed). Throws the
    /// refusal for a head that is malformed, too large or not a valid WebSocket handshake.
    public mutating func receive(_ input: UnsafeRawBufferPointer, _ index: inout Int) throws(HandshakeRefusal) -> HandshakeRequest? {
        let head: HTTPRequestHead?
        do throws(HTTPRequestError) {
            head = try parser.parse(input, &index)
        } catch {
            switch error {
            case .malformed(let why): throw .malformedRequest(why)
            case .headTooLarge(let limit): throw .headTooLarge(limit: limit)
            case .notHTTP: throw .malformedRequest(error.description)
            }
        }
        guard let head else { return nil }
        return try ServerHandshake.validate(head)
    }

    /// Checks a request head against §4.2.1, in its order: GET and HTTP/1.1 or later, a
    /// request target, Host, `Upgrade: websocket`, `Connection: Upgrade`, a
    /// `Sec-WebSocket-Key` of 16 bytes, `Sec-WebSocket-Version: 13`; then parses the
    /// optional Origin, subprotocols and extensions. Header names and the tokens of
    /// Upgrade and Connection are ASCII case-insensitive; repeated list headers are joined.
    public static func validate(_ head: HTTPRequestHead) throws(HandshakeRefusal) -> HandshakeRequest {
        guard head.method == "GET" else { throw .methodNotAllowed(head.method) }
        guard let minor = head.http1MinorVersion, minor >= 1 else { throw .unsupportedHTTPVersion(head.version) }
        guard let (path, query) = splitTarget(head.target) else { throw .invalidTarget(head.target) }
        let host = try single(head, "Host")
        guard !host.isEmpty else { throw .invalidHeader(name: "Host", value: host) }
        guard head.listContains("Upgrade", "websocket") else { throw .notWebSocketUpgrade(head.values("Upgrade")) }
        let connection = head.values("Connection")
        guard !connection.isEmpty else { throw .missingHeader("Connection") }
        guard head.listContains("Connection", "upgrade") else {
            throw .invalidHeader(name: "Connection", value: connection.joined(separator: ", "))
        }
        let key = try single(head, "Sec-WebSocket-Key")
        guard Base64.decode(key)?.count == 16 else { throw .invalidHeader(name: "Sec-WebSocket-Key", value: key) }
        let versions = head.listValues("Sec-WebSocket-Version")
        guard !head.values("Sec-WebSocket-Version").isEmpty else { throw .missingHeader("Sec-WebSocket-Version") }
        guard versions == ["13"] else { throw .unsupportedWebSocketVersion(head.values("Sec-WebSocket-Version")) }
        let origins = head.values("Origin")
        guard origins.count <= 1 else { throw .repeatedHeader("Origin") }
        let subprotocols = head.listValues("Sec-WebSocket-Protocol")
        if let bad = subprotocols.first(where: { !HTTPHeader.isToken($0) }) {
            throw .invalidHeader(name: "Sec-WebSocket-Protocol", value: bad)
        }
        let extensions: [ExtensionOffer]
        do throws(ExtensionHeaderError) {
            extensions = try ExtensionOffer.parse(head.values("Sec-WebSocket-Extensions"))
        } catch {
            throw .invalidHeader(name: "Sec-WebSocket-Extensions", value: head.values("Sec-WebSocket-Extensions").joined(separator: ", "))
        }
        return HandshakeRequest(head: head, path: path, query: query, host: host, origin: origins.first, key: key,
                                subprotocols: subprotocols, extensions: extensions)
    }

    /// Headers a 101 sets itself.
    static let acceptHeaderNames = ["upgrade", "connection", "sec-websocket-accept", "sec-websocket-protocol",
                                    "sec-websocket-extensions", "sec-websocket-version", "content-length", "transfer-encoding"]

    /// The 101 answer to `request` (§4.2.2 item 5): `Upgrade: websocket`, `Connection:
    /// Upgrade`, `Sec-WebSocket-Accept` for its key, `Sec-WebSocket-Protocol` if a
    /// `subprotocol` is chosen, `Sec-WebSocket-Extensions` for the extension answers (in
    /// the order they apply), then `headers`. Throws `ResponseBuildError` for a subprotocol
    /// or extension the client did not offer, an extension answer outside §9.1's grammar,
    /// invalid headers (CR/LF injection) or headers the 101 sets itself.
    public static func accept(_ request: HandshakeRequest, subprotocol: String? = nil, extensions: [ExtensionOffer] = [],
                              headers: [HTTPHeader] = []) throws(ResponseBuildError) -> [UInt8] {
        try HTTPResponse.validate(headers, reserved: acceptHeaderNames)
        var all = [HTTPHeader(name: "Upgrade", value: "websocket"),
                   HTTPHeader(name: "Connection", value: "Upgrade"),
                   HTTPHeader(name: "Sec-WebSocket-Accept", value: ClientHandshake.acceptValue(forKey: request.key))]
        if let subprotocol {
            guard request.subprotocols.contains(subprotocol) else { throw .subprotocolNotOffered(subprotocol) }
            all.append(HTTPHeader(name: "Sec-WebSocket-Protocol", value: subprotocol))
        }
        if !extensions.isEmpty {
            let offered = Set(request.extensions.map { $0.name.lowercased() })
            if let other = extensions.first(where: { !offered.contains($0.name.lowercased()) }) {
                throw .extensionNotOffered(other.name)
            }
            do throws(ExtensionHeaderError) {
                all.append(HTTPHeader(name: "Sec-WebSocket-Extensions", value: try ExtensionOffer.headerValue(extensions)))
            } catch {
                throw .invalidExtension(error)
            }
        }
        return HTTPResponse.head(status: 101, headers: all + headers)
    }

    /// Path and query of an origin-form ("/p?q") or absolute-form ("ws://h/p?q") target
    /// (`RequestTarget.originForm`); nil for anything else (asterisk-form, authority-form, a fragment).
    static func splitTarget(_ target: String) -> (String, String?)? {
        guard !target.utf8.contains(UInt8(ascii: "#")), let origin = RequestTarget.originForm(target) else { return nil }
        guard let mark = origin.utf8.firstIndex(of: UInt8(ascii: "?")) else { return (String(origin), nil) }
        return (String(origin[..<mark]), String(origin[origin.utf8.index(after: mark)...]))
    }

    /// The value of a header that must appear exactly once.
    private static func single(_ head: HTTPRequestHead, _ name: String) throws(HandshakeRefusal) -> String {
        let values = head.values(name)
        guard let value = values.first else { throw .missingHeader(name) }
        guard values.count == 1 else { throw .repeatedHeader(name) }
        return value
    }
}
