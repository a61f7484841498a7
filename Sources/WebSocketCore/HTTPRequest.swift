/// A parsed HTTP/1.x request head (RFC 9112 §3): request line and header fields in order.
public struct HTTPRequestHead: HTTPHeaderFields, Sendable, Equatable {
    /// The method, case-sensitive ("GET").
    public var method: String
    /// The request target as sent ("/chat?room=1", or an absolute URI).
    public var target: String
    /// "HTTP/1.1".
    public var version: String
    public var headers: [HTTPHeader]

    /// Default limit of a request head, in bytes (request line, headers, blank line).
    public static let defaultMaximumSize = 16 * 1024

    public init(method: String, target: String, version: String, headers: [HTTPHeader]) {
        self.method = method
        self.target = target
        self.version = version
        self.headers = headers
    }

    /// The minor version of an "HTTP/1.x" version, else nil.
    public var http1MinorVersion: Int? { HTTPHeadSyntax.http1MinorVersion(version.utf8) }
}

/// Why bytes are not an acceptable HTTP request head.
public enum HTTPRequestError: Error, Equatable, Sendable, CustomStringConvertible {
    /// Not HTTP/1.x request syntax (the reason says where).
    case malformed(String)
    /// The head did not end within `limit` bytes (RFC 6585 §5: 431).
    case headTooLarge(limit: Int)
    /// The first byte (after empty lines) is no token character, so it cannot start a
    /// request line: not HTTP at all (0x16: a TLS handshake). Known at once, not at a line end.
    case notHTTP(firstByte: UInt8)

    public var description: String {
        switch self {
        case .malformed(let why): return why
        case .headTooLarge(let limit): return "the request head exceeds \(limit) bytes"
        case .notHTTP(let byte):
            let hex = String(byte, radix: 16, uppercase: true)
            return "the first byte 0x\(byte < 16 ? "0" : "")\(hex) cannot start an HTTP request"
        }
    }

    /// A TLS record of type handshake (a ClientHello) begins with this byte.
    public static let tlsHandshakeRecord: UInt8 = 0x16
}

/// An incremental request-head parser: feed it bytes as they arrive, in any pieces.
///
/// `parse(_:_:)` consumes bytes of the head from `input[index...]` (keeping them, at most
/// `maximumSize`) and returns the head once its blank line arrived, with `index` just
/// past it: bytes after the head (frames a client pipelined behind its request) are left
/// where they are. Lines may end in CRLF or bare LF; empty lines before the request line
/// are skipped (RFC 9112 §2.2); obsolete line folding is joined with a space.
public struct HTTPRequestHeadParser: Sendable {
    /// Largest head accepted, in bytes, blank line included.
    public let maximumSize: Int
    private var buffer: [UInt8] = []
    private var skipped = 0               // empty-line bytes before the request line
    private var afterLineFeed = false     // the last byte ended a line
    private var afterLineFeedCR = false   // ... and a CR followed it
    /// True once a head was returned or an error thrown: nothing more is consumed.
    public private(set) var isFinished = false

    public init(maximumSize: Int = HTTPRequestHead.defaultMaximumSize) {
        self.maximumSize = maximumSize
    }

    /// The head once complete (nil: more bytes needed, every byte of `input` consumed).
    /// Throws `.headTooLarge` as soon as `maximumSize` bytes arrived without the blank line,
    /// `.malformed` for a head that is not an HTTP/1.x request.
    public mutating func parse(_ input: UnsafeRawBufferPointer, _ index: inout Int) throws(HTTPRequestError) -> HTTPRequestHead? {
        guard !isFinished else { return nil }
        var i = index
        while buffer.isEmpty, i < input.count, input[i] == 0x0D || input[i] == 0x0A {
            // They count towards the limit: endless empty lines are no way to hold a server.
            i += 1
            skipped += 1
            if skipped >= maximumSize {
                isFinished = true
                throw .headTooLarge(limit: maximumSize)
            }
        }
        if buffer.isEmpty, i < input.count, !HTTPHeader.isTokenByte(input[i]) {
            isFinished = true
            throw .notHTTP(firstByte: input[i])
        }
        let start = i
        var end: Int?
        while i < input.count {
            let byte = input[i]
            i += 1
            if byte == 0x0A {
                if afterLineFeed || afterLineFeedCR { end = i; break }
                afterLineFeed = true
            } else {
                afterLineFeedCR = afterLineFeed && byte == 0x0D
                afterLineFeed = false
            }
            if skipped + buffer.count + (i - start) >= maximumSize {
                isFinished = true
                throw .headTooLarge(limit: maximumSize)
            }
        }
        buffer.append(contentsOf: UnsafeRawBufferPointer(rebasing: input[start..<i]))
        index = i
        guard end != nil else { return nil }
        isFinished = true
        let result = buffer.withUnsafeBytes { bytes in Result { () throws(HTTPRequestError) in try Self.head(bytes) } }
        buffer = []
        return try result.get()
    }

    private static func head(_ bytes: UnsafeRawBufferPointer) throws(HTTPRequestError) -> HTTPRequestHead {
        let parsed: (ArraySlice<UInt8>, [HTTPHeader])?
        do throws(HTTPHeadSyntaxError) {
            parsed = try HTTPHeadSyntax.parse(bytes)
        } catch {
            throw .malformed(error.message)
        }
        guard let (line, headers) = parsed else { throw .malformed("empty request") }
        // method SP request-target SP HTTP-version (RFC 9112 §3), exactly one space each.
        let parts = line.split(separator: 0x20, omittingEmptySubsequences: false)
        guard parts.count == 3, !parts[0].isEmpty, parts[0].allSatisfy(HTTPHeader.isTokenByte),
              !parts[1].isEmpty, parts[1].allSatisfy({ $0 > 0x20 && $0 < 0x7F }),
              parts[2].count == 8, parts[2].starts(with: Array("HTTP/".utf8)),
              parts[2][parts[2].startIndex + 6] == UInt8(ascii: "."),
              [5, 7].allSatisfy({ (0x30...0x39).contains(parts[2][parts[2].startIndex + $0]) }) else {
            throw .malformed("bad request line \(printable(Array(line.prefix(80))))")
        }
        // A server must not pass on a bare CR or other control byte in a value (RFC 9110 §5.5).
        for header in headers where !header.value.utf8.allSatisfy({ $0 == 0x09 || ($0 >= 0x20 && $0 != 0x7F) }) {
            throw .malformed("header '\(header.name)' has a control character in its value")
        }
        return HTTPRequestHead(method: String(decoding: parts[0], as: UTF8.self), target: String(decoding: parts[1], as: UTF8.self),
                               version: String(decoding: parts[2], as: UTF8.self), headers: headers)
    }
}

/// Why a response could not be built from what the caller gave.
public enum ResponseBuildError: Error, Equatable, Sendable, CustomStringConvertible {
    /// A header name that is not a token, a value with CR, LF or another control byte, or
    /// a header the response sets itself (`.reserved`).
    case header(HeaderError)
    /// A refusal status outside 400...599.
    case notARefusal(Int)
    /// A status that requires a header not given (401 needs WWW-Authenticate, RFC 9110 §15.5.2).
    case missingHeader(status: Int, name: String)
    /// A body with CR, LF or another control byte (the body is one line).
    case invalidBody
    /// A subprotocol the client did not offer (RFC 6455 §4.2.2 item 5.3).
    case subprotocolNotOffered(String)
    /// An extension the client did not offer (§9.1).
    case extensionNotOffered(String)
    /// An extension answer that is not §9.1's grammar.
    case invalidExtension(ExtensionHeaderError)

    public var description: String {
        switch self {
        case .header(let error): return error.description
        case .notARefusal(let status): return "status \(status) is not a refusal (400-599)"
        case .missingHeader(let status, let name): return "a \(status) response needs a \(name) header"
        case .invalidBody: return "the response body contains CR, LF or another control character"
        case .subprotocolNotOffered(let name): return "subprotocol \(printable(Array(name.utf8))) was not offered by the client"
        case .extensionNotOffered(let name): return "extension \(printable(Array(name.utf8))) was not offered by the client"
        case .invalidExtension(let error): return error.description
        }
    }
}

/// HTTP/1.1 response bytes a server sends.
public enum HTTPResponse {
    /// The reason phrase of the statuses a WebSocket server, its plain GETs and its gateway
    /// send (RFC 9110 §15, RFC 6585): --forward's 502 said "Server Error".
    public static func reasonPhrase(_ status: Int) -> String {
        switch status {
        case 101: return "Switching Protocols"
        case 200: return "OK"
        case 204: return "No Content"
        case 206: return "Partial Content"
        case 301: return "Moved Permanently"
        case 302: return "Found"
        case 304: return "Not Modified"
        case 307: return "Temporary Redirect"
        case 308: return "Permanent Redirect"
        case 400: return "Bad Request"
        case 401: return "Unauthorized"
        case 403: return "Forbidden"
        case 404: return "Not Found"
        case 405: return "Method Not Allowed"
        case 426: return "Upgrade Required"
        case 429: return "Too Many Requests"
        case 408: return "Request Timeout"
        case 413: return "Content Too Large"
        case 414: return "URI Too Long"
        case 416: return "Range Not Satisfiable"
        case 431: return "Request Header Fields Too Large"
        case 500: return "Internal Server Error"
        case 501: return "Not Implemented"
        case 502: return "Bad Gateway"
        case 503: return "Service Unavailable"
        case 504: return "Gateway Timeout"
        case 505: return "HTTP Version Not Supported"
        default: return status < 500 ? "Client Error" : "Server Error"
        }
    }

    /// Headers a refusal sets itself.
    static let refusalHeaderNames = ["content-type", "content-length", "connection", "transfer-encoding"]

    /// A refusal (400-599): status line, the caller's `headers` (401 needs WWW-Authenticate),
    /// `Content-Type: text/plain; charset=utf-8`, `Content-Length`, `Connection: close`, and
    /// a one-line body (`body` or the status and reason phrase) ended by LF. The connection
    /// is to be closed after it. Throws `ResponseBuildError` for headers that are not valid
    /// (no CR/LF injection), headers it sets itself, a body with control bytes, a status
    /// outside 400...599.
    public static func refusal(status: Int, headers: [HTTPHeader] = [], body: String? = nil) throws(ResponseBuildError) -> [UInt8] {
        guard (400...599).contains(status) else { throw .notARefusal(status) }
        try validate(headers, reserved: refusalHeaderNames)
        if status == 401 && !headers.contains(where: { $0.hasName("WWW-Authenticate") }) {
            throw .missingHeader(status: status, name: "WWW-Authenticate")
        }
        let text = body ?? "\(status) \(reasonPhrase(status))"
        guard text.utf8.allSatisfy({ $0 == 0x09 || ($0 >= 0x20 && $0 != 0x7F) }) else { throw .invalidBody }
        return refusalBytes(status: status, headers: headers, body: text)
    }

    /// `refusal` without the checks, for headers and bodies the core built itself.
    static func refusalBytes(status: Int, headers: [HTTPHeader], body: String) -> [UInt8] {
        let content = Array((body + "\n").utf8)
        let all = headers + [HTTPHeader(name: "Content-Type", value: "text/plain; charset=utf-8"),
                             HTTPHeader(name: "Content-Length", value: String(content.count)),
                             HTTPHeader(name: "Connection", value: "close")]
        return head(status: status, headers: all) + content
    }

    /// Status line, headers and the blank line.
    static func head(status: Int, headers: [HTTPHeader]) -> [UInt8] {
        var text = "HTTP/1.1 \(status) \(reasonPhrase(status))\r\n"
        for header in headers { text += "\(header.name): \(header.value)\r\n" }
        return Array((text + "\r\n").utf8)
    }

    /// Each header must be a valid name and value (`HTTPHeader(validating:_:)`) and not
    /// one of `reserved` (lowercased names).
    static func validate(_ headers: [HTTPHeader], reserved: [String]) throws(ResponseBuildError) {
        for header in headers {
            do throws(HeaderError) {
                _ = try HTTPHeader(validating: header.name, header.value)
            } catch {
                throw .header(error)
            }
            if reserved.contains(header.name.lowercased()) { throw .header(.reserved(header.name)) }
        }
    }
}
