import WebSocketCore
import WebSocketTransport

/// What is known of an accepted client once its opening handshake is done: what a mode
/// (echo, broadcast, a child process per connection) needs to serve it and to describe it.
public struct ClientInfo: Sendable {
    /// Numbered from 1 in the order handshakes completed, per server.
    public let id: Int
    /// The request as accepted (path, query, headers, offers), while the connection is
    /// handed over: in `.connected`, `handler(for:)`, `connectionWillStart` and
    /// `connectionDidStart`. Nil after that unless the mode `keepsRequests`: an idle client
    /// then holds no copy of its request's headers (about 0.5 KiB each).
    public var request: HandshakeRequest? { kept?.request }
    /// Boxed: a struct this size inline would make every `ServerConnection` ~150 bytes
    /// larger for as long as it lives, request or not.
    private var kept: KeptRequest?
    /// The client: the socket's peer, or whom a trusted proxy named (--trust-proxy,
    /// --proxy-protocol, --client-address-header). The one value per-address decisions key on.
    public let clientAddress: PeerAddress
    /// "ip:port" of the client (`clientAddress`; no port when X-Forwarded-For named it),
    /// or the socket path for a Unix listener.
    public var remoteAddress: String { clientAddress.description }
    /// "ip:port" the client connected to, or the socket path.
    public let localAddress: String
    /// Whether the connection is TLS.
    public let isSecure: Bool
    /// The verified client certificate's subject under mutual TLS, else nil.
    public var clientCertificateSubject: String? { secured?.clientCertificateSubject }
    /// The subprotocol selected (nil: none).
    public let subprotocol: String?
    /// permessage-deflate as agreed: the 101's answer and what it means for us (nil: none).
    public var deflate: (response: ExtensionOffer, configuration: DeflateConfiguration?)? { compressed?.agreed }
    /// The TLS version and cipher ("TLSv1.3 TLS_AES_256_GCM_SHA384"), nil without TLS.
    public var tlsSummary: String? { secured?.tlsSummary }
    /// Boxed, each nil for a client without it: inline they were ~90 bytes of every
    /// `ServerConnection`, most often all nil.
    private let secured: SecuredFacts?
    private let compressed: CompressedFacts?

    init(id: Int, request: HandshakeRequest?, clientAddress: PeerAddress, localAddress: String, isSecure: Bool,
         clientCertificateSubject: String?, subprotocol: String?,
         deflate: (response: ExtensionOffer, configuration: DeflateConfiguration?)? = nil, tlsSummary: String? = nil) {
        self.id = id
        kept = request.map(KeptRequest.init)
        self.clientAddress = clientAddress
        self.localAddress = localAddress
        self.isSecure = isSecure
        secured = clientCertificateSubject == nil && tlsSummary == nil
            ? nil : SecuredFacts(clientCertificateSubject: clientCertificateSubject, tlsSummary: tlsSummary)
        self.subprotocol = subprotocol
        compressed = deflate.map(CompressedFacts.init)
    }

    mutating func forgetRequest() { kept = nil }
}

/// `ClientInfo`'s TLS facts.
private final class SecuredFacts: Sendable {
    let clientCertificateSubject: String?
    let tlsSummary: String?
    init(clientCertificateSubject: String?, tlsSummary: String?) {
        self.clientCertificateSubject = clientCertificateSubject
        self.tlsSummary = tlsSummary
    }
}

/// `ClientInfo.deflate`.
private final class CompressedFacts: Sendable {
    let agreed: (response: ExtensionOffer, configuration: DeflateConfiguration?)
    init(_ agreed: (response: ExtensionOffer, configuration: DeflateConfiguration?)) { self.agreed = agreed }
}

/// `ClientInfo.request` while it is kept.
private final class KeptRequest: Sendable {
    let request: HandshakeRequest
    init(_ request: HandshakeRequest) { self.request = request }
}

/// One accepted client: its facts and its driver, between the server and the mode's
/// handler (the driver's events go to `handler`; its ending also to the server).
public final class ServerConnection: ConnectionDelegate, ConnectionEndObserver {
    public private(set) var info: ClientInfo
    /// The driver, until the connection ends. A parked client (`ServerMode.parksIdleClients`)
    /// gets its driver when asked for it: whoever needs the driver (to send, to close) has it.
    public var driver: ConnectionDriver? {
        if parked != nil { unpark() }
        return activeDriver
    }
    /// The driver if the client has one now (a parked client has none).
    public private(set) var activeDriver: ConnectionDriver?
    /// A client with nothing under way yet: its stream and the watch that wakes it.
    private var parked: (stream: TCPStream, watch: EventLoop.Watch)?
    /// Whether the client waits for its socket without a driver.
    public var isParked: Bool { parked != nil }
    /// The mode's per-connection delegate; may be shared by every connection (it gets the
    /// driver with each event).
    public var handler: ConnectionDelegate? {
        // A driver that calls the handler itself (this connection only its `endObserver`)
        // follows the change.
        didSet { if let activeDriver, activeDriver.endObserver === self { activeDriver.delegate = handler } }
    }
    private weak var server: ServerDriver?

    init(info: ClientInfo, server: ServerDriver) {
        self.info = info
        self.server = server
    }

    /// The server's `perClient` limits, applied to this client (nil: none set).
    private var limits: LimitKeeper?
    /// Data messages and their payload bytes (inflated) received from the client while it
    /// is connected (the metrics; the server keeps an ended client's in its totals).
    public var messagesReceived: UInt64 { activeDriver?.messagesReceived ?? 0 }
    public var bytesReceived: UInt64 { activeDriver?.payloadReceived ?? 0 }
    private var countsMessages = false

    /// Waits for the socket without a driver: the first readiness (data, a Close, a reset)
    /// or a call for `driver` makes it.
    func park(stream: TCPStream, loop: EventLoop) {
        // Strong: the loop keeps a parked client until it wakes, whatever becomes of its
        // server (a weak reference would give every connection a side table).
        let watch = loop.watch(stream.fileDescriptor) { _ in self.unpark() }
        parked = (stream, watch)
        loop.setInterest(watch, [.readable, .readHangUp])
    }

    private func unpark() {
        guard let (stream, watch) = parked else { return }
        parked = nil
        // A server let go with its clients parked: they go too (their socket out of epoll).
        guard let server else { return stream.close() }
        server.loop.remove(watch)
        _ = server.unpark(self, stream: stream)
    }

    func start(_ driver: ConnectionDriver, limits settings: ConnectionLimits, rates: MessageRateSettings? = nil) {
        activeDriver = driver
        countsMessages = settings.countsMessages
        if settings != ConnectionLimits() || rates != nil, let loop = server?.loop {
            let keeper = LimitKeeper(settings, loop: loop, rates: rates) { [weak self] _ in
                self?.activeDriver?.close(ClosePayload(code: .normalClosure))
            }
            keeper.rates?.onEvent = { [weak self] in self?.server?.noteRate($0) }
            keeper.attach(driver)
            limits = keeper
        }
        if limits == nil, let handler {
            // Forwarding each event through this connection was ~230 instructions of an
            // echoed message (scripts/profile echo-server): the driver calls the handler.
            // (Without one, a client woken after its mode went, this connection stays the
            // delegate: a driver without one would not read the client's Close.)
            driver.delegate = handler
            driver.endObserver = self
        }
        driver.start()
    }

    /// The connection has started and its mode does not keep requests.
    func forgetRequest() { info.forgetRequest() }

    /// -n reached, or closed for going over the rate: messages that came in the same read as the last one counted are not
    /// the handler's (a broadcast would write them to stdout).
    private var pastLimit: Bool { limits?.limitReached ?? false }

    public func connection(_ c: ConnectionDriver, didStartMessage kind: MessageKind) {
        if let rates = limits?.rates, !rates.messageStarted() { return }
        if !pastLimit { handler?.connection(c, didStartMessage: kind) }
    }
    public func connection(_ c: ConnectionDriver, didReceive bytes: UnsafeMutableRawPointer, count: Int, in buffer: ByteBuffer) {
        if let rates = limits?.rates, !rates.received(count) { return }
        if !pastLimit { handler?.connection(c, didReceive: bytes, count: count, in: buffer) }
    }
    public func connectionDidEndMessage(_ c: ConnectionDriver) {
        guard !pastLimit else { return }
        handler?.connectionDidEndMessage(c)
        limits?.rates?.messageEnded()
        // After the handler saw the message: the idle clock and -n.
        if countsMessages, limits?.received() == true { c.close(ClosePayload(code: .normalClosure)) }
    }
    public func connection(_ c: ConnectionDriver, didReceivePing payload: [UInt8]) { handler?.connection(c, didReceivePing: payload) }
    public func connection(_ c: ConnectionDriver, didReceivePong payload: [UInt8], roundTrip: Double?) {
        handler?.connection(c, didReceivePong: payload, roundTrip: roundTrip)
    }
    public func connection(_ c: ConnectionDriver, didReceiveClose payload: ClosePayload) { handler?.connection(c, didReceiveClose: payload) }
    public func connection(_ c: ConnectionDriver, didFail error: ReceiveError) { handler?.connection(c, didFail: error) }
    public func connectionDidProcessInput(_ c: ConnectionDriver) { handler?.connectionDidProcessInput(c) }
    public func connectionWillReleaseReceiveBuffer(_ c: ConnectionDriver) { handler?.connectionWillReleaseReceiveBuffer(c) }
    public func connection(_ c: ConnectionDriver, note: ConnectionNote) { handler?.connection(c, note: note) }
    public func connectionHasRoom(_ c: ConnectionDriver) { handler?.connectionHasRoom(c) }
    public func connection(_ c: ConnectionDriver, wroteThrough token: UInt64) { handler?.connection(c, wroteThrough: token) }
    public func connectionPeerShutDownWhilePaused(_ c: ConnectionDriver) { handler?.connectionPeerShutDownWhilePaused(c) }
    public func connection(_ c: ConnectionDriver, didEnd ending: ConnectionEnding) {
        handler?.connection(c, didEnd: ending)
        driver(c, didEnd: ending)
    }

    /// The driver has ended (its delegate told first, whichever it was).
    func driver(_ c: ConnectionDriver, didEnd ending: ConnectionEnding) {
        limits?.cancel()
        limits = nil
        handler = nil
        activeDriver = nil
        server?.connectionEnded(self, c, ending)
    }
}
