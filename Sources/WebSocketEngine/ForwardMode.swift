import Glibc
import WebSocketCore
import WebSocketTransport

/// The gateway (`--forward`, `--forward-tokens`): each WebSocket client is carried to a TCP
/// or Unix connection of its own (`StreamRelay`), dialled before its 101 (`decidesLater`),
/// so a client never gets a WebSocket that leads nowhere: refused or unreachable → 502, no
/// answer within `dialTimeout` → 504, no descriptor left to dial with → 503 (Retry-After),
/// an unknown token → 404 with nothing dialled.
///
/// The target comes only from the command line or the token file, never from the request
/// (no open proxy). A request with an `Origin` (every browser's) is refused with 403 unless
/// the policy lists allowed origins (then the policy has checked it already): a page the
/// user visits cannot reach the target through the user's own browser by default.
/// Subprotocols: the policy's choice if any, else `binary` when offered (noVNC), else none;
/// websockify's legacy `base64` alone is refused (400).
public final class ForwardMode: ServerMode {
    /// Where clients go.
    public enum Targets {
        case fixed(StreamTarget)
        case tokens(TokenFile)
    }

    public let loop: EventLoop
    public let targets: Targets
    public var relay = RelayOptions()
    /// Seconds for the target to accept (below the handshake timeout, which keeps running).
    public var dialTimeout = 5.0
    /// Refuse requests that carry an Origin (true unless origins are allowed by the policy).
    public var refusesOrigins = true

    /// Client `id`'s relay started toward `target`.
    public var onStart: (_ client: Int, _ target: StreamTarget) -> Void = { _, _ in }
    /// Client `id`'s connection and stream are both over.
    public var onEnd: (_ client: Int, _ target: StreamTarget, RelayOutcome) -> Void = { _, _, _ in }
    /// A dial failed; the client from `remote` got `failure.status`.
    public var onDialFailure: (_ remote: String, _ target: StreamTarget, TargetDial.Failure) -> Void = { _, _, _ in }
    /// The targets of relays accepted whose drivers have not started, by relay.
    private var pendingTargets: [ObjectIdentifier: StreamTarget] = [:]
    /// Pairs started and not yet over.
    public private(set) var relaysRunning = 0

    public init(loop: EventLoop, targets: Targets) {
        self.loop = loop
        self.targets = targets
    }

    public var decidesLater: Bool { true }

    public func handler(for connection: ServerConnection) -> ConnectionDelegate {
        // Every client comes through `review`, which gives its relay; this one only closes.
        NoTarget()
    }

    public func review(_ handshake: PendingHandshake) {
        let request = handshake.request
        if refusesOrigins, let origin = request.origin {
            return refuse(handshake, 403, "origin '\(shown(origin))' is not allowed (a gateway admits browsers only from --allow-origin or --sameorigin)")
        }
        let subprotocol = handshake.subprotocol ?? (request.subprotocols.contains("binary") ? "binary" : nil)
        if subprotocol == nil && request.subprotocols.contains("base64") {
            return refuse(handshake, 400, "the base64 subprotocol is not supported: offer binary, or none")
        }
        let target: StreamTarget
        switch targets {
        case .fixed(let fixed): target = fixed
        case .tokens(let file):
            guard let token = TokenTable.token(query: request.query, cookies: request.head.values("Cookie")) else {
                return refuse(handshake, 404, "no token (?token= or a token cookie)")
            }
            guard let found = file.target(for: token) else { return refuse(handshake, 404, "unknown token") }
            target = found
        }
        var accepted: StreamRelay?
        var dial: TargetDial?
        handshake.onOutcome = { [weak self] connection in
            // The client left, timed out or the server filled up or stopped: nothing to relay.
            dial?.cancel()
            guard connection == nil, let pair = accepted else { return }
            pair.stream.close()
            self?.pendingTargets[ObjectIdentifier(pair)] = nil
        }
        let remote = handshake.remoteAddress
        dial = TargetDial(loop: loop, target: target, timeout: dialTimeout) { [weak self, weak handshake] result in
            dial = nil
            guard let self, let handshake else {
                if case .success(let made) = result { made.close() }
                return
            }
            switch result {
            case .failure(let failure):
                onDialFailure(remote, target, failure)
                if failure.isOutOfDescriptors {
                    return refuse(handshake, 503, "the server has no file descriptor left to connect to the target",
                                  headers: [HTTPHeader(name: "Retry-After", value: "1")])
                }
                refuse(handshake, failure.status, failure.status == 504 ? "the target did not answer" : "the target refused the connection")
            case .success(let made):
                let pair = StreamRelay(loop: loop, stream: made, options: relay)
                accepted = pair
                pendingTargets[ObjectIdentifier(pair)] = target
                do throws(ResponseBuildError) {
                    try handshake.accept(subprotocol: subprotocol, delegate: pair)
                } catch {
                    pendingTargets[ObjectIdentifier(pair)] = nil
                    made.close()
                    refuse(handshake, 500, "the server's response headers are not valid")
                }
            }
        }
        dial?.start()
    }

    public func connectionWillStart(_ connection: ServerConnection, driver: ConnectionDriver) {
        guard let relay = connection.handler as? StreamRelay,
              let target = pendingTargets.removeValue(forKey: ObjectIdentifier(relay)) else { return }
        let id = connection.info.id
        relaysRunning += 1
        relay.onEnd = { [weak self] outcome in
            guard let self else { return }
            relaysRunning -= 1
            onEnd(id, target, outcome)
        }
        relay.attach(driver)
        onStart(id, target)
    }

    private func refuse(_ handshake: PendingHandshake, _ status: Int, _ body: String, headers: [HTTPHeader] = []) {
        do throws(ResponseBuildError) {
            try handshake.refuse(status: status, headers: headers, body: body)
        } catch {
            try? handshake.refuse(status: 500)
        }
    }

    /// Client text in a body: at most 80 bytes, printable ASCII.
    private func shown(_ text: String) -> String {
        String(decoding: text.utf8.prefix(80).map { $0 >= 0x20 && $0 < 0x7F && $0 != UInt8(ascii: "'") ? $0 : UInt8(ascii: "?") }, as: UTF8.self)
    }
}

/// The delegate of a connection that came without `review` (none should): it is closed.
final class NoTarget: ConnectionDelegate {
    func connection(_ connection: ConnectionDriver, didStartMessage kind: MessageKind) {}
    func connection(_ connection: ConnectionDriver, didReceive bytes: UnsafeMutableRawPointer, count: Int, in buffer: ByteBuffer) {}
    func connectionDidEndMessage(_ connection: ConnectionDriver) {}
    func connection(_ connection: ConnectionDriver, didEnd ending: ConnectionEnding) {}
}
