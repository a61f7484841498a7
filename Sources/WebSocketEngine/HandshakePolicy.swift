import WebSocketCore

/// What a server accepts beyond RFC 6455 §4.2.1: its path, origins, subprotocols, a bearer
/// token, a health path and headers for the 101. Pure logic: `decide` and `answerPlainGet`
/// read a request and return an answer; nothing here does I/O.
public struct HandshakePolicy: Sendable {
    /// The only path served (nil: every path); 404 elsewhere.
    public var path: String?
    /// Origins allowed (exact, ASCII case-insensitive); empty: any origin. 403 otherwise,
    /// also for a request without Origin.
    public var allowedOrigins: [String] = []
    /// `--sameorigin`: an Origin must name this server as the Host header does
    /// (`SameOrigin`); no Origin is admitted. With `allowedOrigins` as well, either admits.
    public var requiresSameOrigin = false
    /// Whether the listener serves TLS: the scheme `requiresSameOrigin` expects (https/http).
    public var servesTLS = false
    /// Subprotocols we support, in our order; the first one the client offers that we
    /// support is selected (the client's preference, RFC 6455 §4.2.2 item 5.4).
    public var subprotocols: [String] = []
    /// Refuse (400) a client that offers none of `subprotocols`.
    public var requiresSubprotocol = false
    /// The token `Authorization: Bearer` must carry (RFC 6750 §2.1); 401 otherwise.
    public var bearerToken: String?
    /// A path that answers a plain GET with 200 (load balancers' health checks).
    public var healthPath: String?
    /// A path that answers a plain GET with the metrics (`MetricsExposition`); the bearer
    /// token, when there is one, covers it.
    public var metricsPath: String?
    /// Headers added to every 101.
    public var responseHeaders: [HTTPHeader] = []

    public init() {}

    /// The verdict on a valid WebSocket request.
    public enum Decision: Equatable, Sendable {
        /// Accept, with this subprotocol (nil: none).
        case accept(subprotocol: String?)
        /// Refuse with this status (401, 403, 404, 400), its extra headers and a one-line body.
        case refuse(status: Int, headers: [HTTPHeader], body: String)
    }

    /// Checks, in this order: the path (404), the bearer token (401), the Origin (403:
    /// `allowedOrigins`, `requiresSameOrigin`), the
    /// subprotocol (400 when one is required and none matches).
    public func decide(_ request: HandshakeRequest) -> Decision {
        if let path, request.path != path { return .refuse(status: 404, headers: [], body: "no WebSocket at \(shown(request.path))") }
        if let refusal = bearerRefusal(request.head) { return refusal }
        if let refusal = originRefusal(request) { return refusal }
        let chosen = request.subprotocols.first { subprotocols.contains($0) }
        if chosen == nil && requiresSubprotocol {
            return .refuse(status: 400, headers: [], body: "none of the offered subprotocols is supported (supported: \(subprotocols.joined(separator: ", ")))")
        }
        return .accept(subprotocol: chosen)
    }

    /// The answer to a GET that is no WebSocket upgrade at `target`: 200 at the health path,
    /// else nil (the handshake's own 426 applies).
    public func answerPlainGet(method: String, target: String) -> [UInt8]? {
        guard method == "GET" || method == "HEAD", let healthPath else { return nil }
        guard HandshakePolicy.pathOf(target) == healthPath else { return nil }
        let body = method == "HEAD" ? "" : "ok\n"
        return Array(("HTTP/1.1 200 OK\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: 3\r\n"
                      + "Cache-Control: no-store\r\nConnection: close\r\n\r\n" + body).utf8)
    }

    /// The 403 for an Origin neither --allow-origin nor --sameorigin admits (nil: admitted,
    /// or no rule is set).
    private func originRefusal(_ request: HandshakeRequest) -> Decision? {
        guard !allowedOrigins.isEmpty || requiresSameOrigin else { return nil }
        if requiresSameOrigin && SameOrigin.admits(origin: request.origin, host: request.host, secure: servesTLS) { return nil }
        if let origin = request.origin, allowedOrigins.contains(where: { $0.lowercased() == origin.lowercased() }) { return nil }
        guard let origin = request.origin else { return .refuse(status: 403, headers: [], body: "the request has no Origin header") }
        let why = requiresSameOrigin ? "is not this server's (Host \(shown(request.host)))" : "is not allowed"
        return .refuse(status: 403, headers: [], body: "origin \(shown(origin)) \(why)")
    }

    /// The 401 for a request without the bearer token (nil: none is required, or it is there).
    func bearerRefusal(_ head: HTTPRequestHead) -> Decision? {
        guard let bearerToken else { return nil }
        let presented = head.values("Authorization").first.flatMap(HandshakePolicy.bearerCredential)
        guard let presented, HandshakePolicy.constantTimeEqual(Array(presented.utf8), Array(bearerToken.utf8)) else {
            let error = presented == nil ? "" : ", error=\"invalid_token\""
            return .refuse(status: 401, headers: [HTTPHeader(name: "WWW-Authenticate", value: "Bearer realm=\"wspipe\"\(error)")],
                           body: presented == nil ? "a bearer token is required" : "the bearer token is not valid")
        }
        return nil
    }

    /// What a request that is no WebSocket handshake gets at the metrics path: 200 with
    /// `text()` (called only then) for GET, the same headers for HEAD, 405 for other
    /// methods, 401 without the bearer token; nil at another path (or without the path).
    public func metricsAnswer(_ head: HTTPRequestHead, text: () -> String) -> [UInt8]? {
        guard let metricsPath, HandshakePolicy.pathOf(head.target) == metricsPath else { return nil }
        if case .refuse(let status, let headers, let body) = bearerRefusal(head) {
            return HTTPResponse.refusalBytesOrPlain(status: status, headers: headers, body: body)
        }
        guard head.method == "GET" || head.method == "HEAD" else {
            return HTTPResponse.refusalBytesOrPlain(status: 405, headers: [HTTPHeader(name: "Allow", value: "GET, HEAD")],
                                                    body: "method \(shown(head.method)) is not allowed at the metrics path; use GET")
        }
        let body = Array(text().utf8)
        return Array(("HTTP/1.1 200 OK\r\nContent-Type: \(MetricsExposition.contentType)\r\nContent-Length: \(body.count)\r\n"
                      + "Cache-Control: no-store\r\nConnection: close\r\n\r\n").utf8) + (head.method == "HEAD" ? [] : body)
    }

    /// The target's path, as the upgrade reads it (an absolute-form target's path too,
    /// `RequestTarget`); a target in neither form as sent (it matches no path).
    static func pathOf(_ target: String) -> Substring {
        RequestTarget.path(target) ?? Substring(target)
    }

    /// The token of `Bearer <token>` (scheme case-insensitive), nil for another scheme.
    static func bearerCredential(_ value: String) -> String? {
        let parts = value.split(separator: " ", maxSplits: 1, omittingEmptySubsequences: true)
        guard parts.count == 2, parts[0].lowercased() == "bearer" else { return nil }
        return String(parts[1].drop { $0 == " " })
    }

    /// Compares without an early exit, so the time taken says nothing about where the
    /// bytes differ (only whether the lengths do).
    public static func constantTimeEqual(_ a: [UInt8], _ b: [UInt8]) -> Bool {
        var difference = UInt8(truncatingIfNeeded: a.count ^ b.count)
        for i in 0..<max(a.count, b.count) {
            difference |= (i < a.count ? a[i] : 0) ^ (i < b.count ? b[i] : 0)
        }
        return difference == 0
    }

    /// Client text in a body: at most 80 bytes, printable ASCII, quoted.
    private func shown(_ text: String) -> String {
        "'" + String(decoding: text.utf8.prefix(80).map { $0 >= 0x20 && $0 < 0x7F ? $0 : UInt8(ascii: "?") }, as: UTF8.self) + "'"
    }
}
