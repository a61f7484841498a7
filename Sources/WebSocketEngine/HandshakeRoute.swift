import WebSocketCore

/// Where a request head goes: a plain answer (metrics, health, the static site), a refusal,
/// or the upgrade. Pure logic like `HandshakePolicy`: `route` reads the head, the client's
/// standing and the server's load and returns a decision; the `HandshakeExchange` does the
/// I/O the decision asks for.
struct HandshakeRoute {
    /// Path, origins, subprotocols, bearer token, health and metrics paths.
    var policy: HandshakePolicy
    /// Whether a static site (--static, --devconsole) may answer plain requests.
    var hasSite: Bool
    /// The mode's own refusal of a request the policy accepted (nil: none).
    var modeRefusal: (HandshakeRequest) -> ModeRefusal? = { _ in nil }
    /// The mode decides each accepted handshake later (`ServerMode.decidesLater`).
    var decidesLater: Bool = false

    /// What the server holds in total.
    struct Load: Equatable {
        /// Connected clients, and the limit beyond which upgrades get 503.
        var clients: Int
        var maximumClients: Int

        var isFull: Bool { clients >= maximumClients }
    }

    /// What this client's address holds (`AddressLimits`); `.unlimited` without a per-address
    /// limit or without an address.
    enum AddressLimitReason: Equatable {
        /// `--max-handshakes-per-ip`: the address made requests too fast.
        case requests
        /// `--max-clients-per-ip`: the address holds its share of clients.
        case clients
    }

    struct Standing: Equatable {
        /// Seconds until the address's handshake rate admits another request (nil: admitted now).
        var handshakeRetryAfter: Int?
        /// Clients connected from the address, and its limit (nil: none).
        var clients = 0
        var maximumClients: Int?

        static let unlimited = Standing()
    }

    /// The decision on one request head.
    enum Decision {
        /// The metrics path answers (its text is built only then).
        case metrics
        /// These bytes answer (the health path), then the connection closes.
        case answer([UInt8])
        /// The static site answers; if it has no answer, `otherwise` goes out.
        case site(otherwise: [UInt8])
        /// This refusal goes out, then the connection closes.
        case refuse([UInt8])
        /// A per-address limit's 429 (with Retry-After) goes out, then the connection closes.
        case limited(AddressLimitReason, [UInt8])
        /// The upgrade is accepted with this subprotocol: the 101 goes out.
        case upgrade(HandshakeRequest, subprotocol: String?)
        /// The mode reviews the accepted request (`PendingHandshake`).
        case review(HandshakeRequest, subprotocol: String?)
    }

    /// Checks, in this order: the address's handshake rate (429, plain requests too), RFC
    /// 6455's rules (a plain request goes to the metrics path, the health path, the site, in
    /// that order), the total of clients (503), the address's clients (429), the policy,
    /// the mode's refusal.
    func route(_ head: HTTPRequestHead, peer: Standing, load: Load) -> Decision {
        if let seconds = peer.handshakeRetryAfter {
            return .limited(.requests, HandshakeRoute.tooMany(retryAfter: seconds, body: "too many requests from this address; retry later"))
        }
        let request: HandshakeRequest
        do throws(HandshakeRefusal) {
            request = try ServerHandshake.validate(head)
        } catch {
            guard HandshakeRoute.isPlainRequest(error, head) else { return .refuse(error.response) }
            if let metricsPath = policy.metricsPath, HandshakePolicy.pathOf(head.target) == metricsPath { return .metrics }
            if let health = policy.answerPlainGet(method: head.method, target: head.target) { return .answer(health) }
            return hasSite ? .site(otherwise: error.response) : .refuse(error.response)
        }
        if let refusal = HandshakeRoute.capacityRefusal(peer: peer, load: load) { return refusal }
        switch policy.decide(request) {
        case .refuse(let status, let headers, let body):
            return .refuse(HTTPResponse.refusalBytesOrPlain(status: status, headers: headers, body: body))
        case .accept(let subprotocol):
            if let refusal = modeRefusal(request) {
                return .refuse(HTTPResponse.refusalBytesOrPlain(status: refusal.status, headers: refusal.headers, body: refusal.body))
            }
            return decidesLater ? .review(request, subprotocol: subprotocol) : .upgrade(request, subprotocol: subprotocol)
        }
    }

    /// The refusal of one more client: 503 when the server is full, 429 when its address is
    /// (nil: there is room). Also asked again when a reviewed handshake is accepted.
    static func capacityRefusal(peer: Standing, load: Load) -> Decision? {
        if load.isFull {
            return .refuse(HTTPResponse.refusalBytesOrPlain(status: 503, headers: [HTTPHeader(name: "Retry-After", value: "1")],
                                                            body: "too many clients (the limit is \(load.maximumClients))"))
        }
        if let limit = peer.maximumClients, peer.clients >= limit {
            return .limited(.clients, tooMany(retryAfter: 1, body: "too many clients from this address (the limit is \(limit))"))
        }
        return nil
    }

    /// A 429 (RFC 6585 §4) with `Retry-After` in seconds.
    static func tooMany(retryAfter seconds: Int, body: String) -> [UInt8] {
        HTTPResponse.refusalBytesOrPlain(status: 429, headers: [HTTPHeader(name: "Retry-After", value: String(max(1, seconds)))], body: body)
    }

    /// A request that asks for no WebSocket: --metrics, --health and the site may answer it.
    /// RFC 6455's method and version rules are the upgrade's, not plain HTTP's: a HEAD
    /// (refused as a method first) and an HTTP/1.0 request without `Upgrade: websocket` are
    /// plain requests too (HAProxy's httpchk and `curl -0` send HTTP/1.0).
    static func isPlainRequest(_ refusal: HandshakeRefusal, _ head: HTTPRequestHead) -> Bool {
        switch refusal {
        case .notWebSocketUpgrade, .methodNotAllowed: return true
        case .unsupportedHTTPVersion: return head.http1MinorVersion == 0 && !head.listContains("Upgrade", "websocket")
        default: return false
        }
    }
}
