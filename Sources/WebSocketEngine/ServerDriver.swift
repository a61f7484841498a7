import CWSPipeShims
import Glibc
import WebSocketCore
import WebSocketTransport

/// Settings of a `ServerDriver`.
public struct ServerConfiguration: Sendable {
    /// Path, origins, subprotocols, bearer token, health path, 101 headers.
    public var policy = HandshakePolicy()
    /// Each client's driver settings (close timeout, pings, queue limit).
    public var connection = ConnectionOptions()
    /// Largest message accepted from a client, in bytes (larger: Close 1009).
    public var maximumMessageSize: UInt64 = 64 << 20
    /// Connected clients beyond which handshakes are refused with 503.
    public var maximumClients = 10_000
    /// Seconds from accept to a complete request head and written response (slowloris).
    public var handshakeTimeout = 10.0
    /// Largest request head, in bytes (431 beyond).
    public var maximumHeadSize = HTTPRequestHead.defaultMaximumSize
    /// Serve one client at a time: while a handshake or a connection is under way nothing
    /// more is accepted (the next client waits in the kernel's backlog, unread).
    public var oneClientAtATime = false
    /// What every client gets whatever the mode: messages on connect, idle and time limits,
    /// a message count.
    public var perClient = ConnectionLimits()
    /// permessage-deflate (RFC 7692) as the server answers it (`PerMessageDeflate.server()`:
    /// 4 KiB windows, memLevel 5); nil declines every offer (no extension in the 101).
    public var deflate: PerMessageDeflate?
    /// Plain GETs answered with files and the console page (after the health and metrics paths).
    public var site = StaticSiteConfiguration()
    /// Who the client is behind a proxy: --trust-proxy, --proxy-protocol, --client-address-header.
    public var clientAddress = ClientAddressPolicy()
    /// Limits per client address (nil: none; no table is kept).
    public var perAddress: AddressLimitSettings?
    /// Each client's message and byte rates (nil: none; no bucket is kept).
    public var rates: MessageRateSettings?

    public init() {}
}

/// What a server tells its owner, on the loop's thread.
public enum ServerEvent {
    /// A client's handshake is done and its driver started (its 101 is written).
    case connected(ServerConnection)
    /// A client's connection ended (exactly once per `connected`).
    case disconnected(ServerConnection, ConnectionEnding)
    /// A handshake was refused with this HTTP status (a 200 for the health path counts too):
    /// `reason` is the refusal's one-line body (nil for a 2xx, whose body is no reason),
    /// `origin` the request's Origin header (nil without one, or before the head was read).
    /// Client text in either is not escaped: the owner makes it safe to print.
    case refused(status: Int, remoteAddress: String, reason: String?, origin: String?)
    /// A client's first byte cannot start an HTTP request (0x16: a TLS ClientHello on a
    /// plain listener): closed without an answer.
    case notHTTP(remoteAddress: String, firstByte: UInt8)
    /// A client's TLS handshake failed (not TLS, no common version, no valid client
    /// certificate under mutual TLS; `.closed`: it hung up): only that connection is closed.
    case tlsFailed(remoteAddress: String, StreamFailure)
    /// --proxy-protocol: a connection closed without an answer, its PROXY header missing,
    /// malformed, or from outside --trust-proxy (`remoteAddress`: the socket's peer).
    case proxyHeaderRefused(remoteAddress: String, reason: String)
    /// libz could not be loaded (the reason): permessage-deflate offers are declined from now on.
    case compressionUnavailable(String)
    /// --static or --devconsole answered a plain request 404, or 403 (`StaticNotFound.status`):
    /// the raw target and why.
    case notServed(target: String, StaticNotFound)
}

/// Serves a mode: gives each new client the delegate of its driver.
public protocol ServerMode: AnyObject {
    /// `connection` completed its handshake; its driver is about to start. Return the
    /// delegate for its events (one object per connection, or one shared by all).
    func handler(for connection: ServerConnection) -> ConnectionDelegate
    /// See the extension: nil accepts.
    func refusal(for request: HandshakeRequest) -> ModeRefusal?
    /// Whether an upgrade at `target` would find something to serve (--devconsole's page is
    /// for those paths only); by default every path.
    func servesUpgrades(at target: String) -> Bool
    /// The connection's driver has started (`connection.driver` is set).
    func connectionDidStart(_ connection: ServerConnection)
    /// The driver exists and is about to start (pipelined frames are read at its start):
    /// a mode that sends before anything is received, or must know the driver first.
    func connectionWillStart(_ connection: ServerConnection, driver: ConnectionDriver)
    /// True: every handshake the policy and `refusal(for:)` accepted goes to `review`, and
    /// waits (under the handshake timeout) for the mode's verdict on the `PendingHandshake`.
    var decidesLater: Bool { get }
    /// A handshake waiting for the verdict (only when `decidesLater`).
    func review(_ handshake: PendingHandshake)
    /// `shutdown` is about to close every client: what the mode holds back goes first.
    func serverWillShutDown()
    /// Child processes running, for the metrics (nil: a mode without children).
    var childrenRunning: Int? { get }
    /// Whether `ClientInfo.request` stays once a connection has started (by default it is
    /// let go after `connectionDidStart`: what the modes need of it is read by then).
    var keepsRequests: Bool { get }
    /// Whether a client that sent nothing after its handshake waits without a driver (and
    /// without a handler) until its socket has something or `ServerConnection.driver` is
    /// asked for: about 0.8 KiB less per idle client. Such a mode hears `connectionDidPark`
    /// at the handshake, and `handler(for:)`, `connectionWillStart` and `connectionDidStart`
    /// when the driver is made. Only where nothing else is per connection: a plain TCP or
    /// Unix client (no TLS, no permessage-deflate), no keepalive pings, no per-client limits
    /// or rates.
    var parksIdleClients: Bool { get }
    /// `connection` completed its handshake and waits without a driver (`parksIdleClients`).
    func connectionDidPark(_ connection: ServerConnection)
    /// Payload bytes the mode sent as frames it encoded itself (`sendFrames`), which no
    /// driver counts as framed (a broadcast's batches), summed over its clients.
    var encodedPayloadSent: UInt64 { get }
    /// Times the message bus was lost (--bus), for the metrics; nil: a mode without a bus.
    var busLosses: UInt64? { get }
}

/// A valid WebSocket request that the server's policy accepted, waiting for its mode to
/// accept or refuse it (a library's handler that looks at the request first). Loop thread
/// only. The handshake timeout still runs: a verdict that comes too late finds the client
/// gone (`onOutcome` has said nil).
public final class PendingHandshake {
    /// The request (path, query, headers, offered subprotocols and extensions).
    public let request: HandshakeRequest
    /// The subprotocol the policy would select (nil: none).
    public let subprotocol: String?
    /// "ip:port" of the client, or the socket path.
    public let remoteAddress: String
    /// "ip:port" the client connected to, or the socket path.
    public let localAddress: String
    /// Whether the connection is TLS (a listener with `listen(on:tls:)`).
    public let isSecure: Bool
    /// The subject of the client's certificate (RFC 2253, "CN=client,O=Example") when it
    /// sent one; under mutual TLS OpenSSL has verified it. Nil without TLS.
    public let clientCertificateSubject: String?
    let parsed: Int
    private weak var exchange: HandshakeExchange?
    /// Called exactly once: with the client's connection once its 101 is written and its
    /// driver started, or nil when the handshake ended without one (refused, timed out, the
    /// client left, the server shut down). Set it in `review`.
    public var onOutcome: ((ServerConnection?) -> Void)?
    private var finished = false

    init(exchange: HandshakeExchange, request: HandshakeRequest, subprotocol: String?, remoteAddress: String,
         localAddress: String, isSecure: Bool, clientCertificateSubject: String?, parsed: Int) {
        self.exchange = exchange
        self.request = request
        self.subprotocol = subprotocol
        self.remoteAddress = remoteAddress
        self.localAddress = localAddress
        self.isSecure = isSecure
        self.clientCertificateSubject = clientCertificateSubject
        self.parsed = parsed
    }

    /// Answers 101 with `subprotocol` (one the client offered, RFC 6455 §4.2.2 item 5.4) and
    /// `headers` after the policy's; the client's events go to `delegate`. `onOutcome` follows.
    /// - Throws: `ResponseBuildError` for a subprotocol not offered or a header that is not
    ///   valid (the handshake keeps waiting for another verdict).
    public func accept(subprotocol: String?, headers: [HTTPHeader] = [], delegate: ConnectionDelegate) throws(ResponseBuildError) {
        guard let exchange else { return finish(nil) }
        try exchange.accept(self, subprotocol: subprotocol, headers: headers, delegate: delegate)
    }

    /// Refuses with `status` (400-599), `headers` and a one-line `body`; `onOutcome(nil)` follows at once.
    /// - Throws: `ResponseBuildError` for a status outside 400-599, a 401 without
    ///   WWW-Authenticate, a header or body that is not valid.
    public func refuse(status: Int, headers: [HTTPHeader] = [], body: String = "") throws(ResponseBuildError) {
        let bytes = try HTTPResponse.refusal(status: status, headers: headers, body: body.isEmpty ? nil : body)
        guard let exchange else { return finish(nil) }
        exchange.refuse(self, response: bytes)
    }

    func finish(_ connection: ServerConnection?) {
        guard !finished else { return }
        finished = true
        let outcome = onOutcome
        onOutcome = nil
        outcome?(connection)
    }
}

/// A mode's refusal of a handshake the policy accepted (a full pool of child processes).
public struct ModeRefusal: Sendable, Equatable {
    public var status: Int
    public var headers: [HTTPHeader]
    /// One line of text for the body.
    public var body: String

    public init(status: Int, headers: [HTTPHeader] = [], body: String) {
        self.status = status
        self.headers = headers
        self.body = body
    }
}

public extension ServerMode {
    /// Whether to refuse this handshake (checked after the policy accepted it, before the
    /// 101): nil accepts. By default every mode accepts.
    func refusal(for request: HandshakeRequest) -> ModeRefusal? { nil }
    func servesUpgrades(at target: String) -> Bool { true }

    func connectionDidStart(_ connection: ServerConnection) {}

    /// By default a mode decides at once (`refusal(for:)`).
    var decidesLater: Bool { false }

    /// Not called for a mode that decides at once; should it be, the client gets a 500.
    func review(_ handshake: PendingHandshake) {
        try? handshake.refuse(status: 500, body: "this server decides no handshake later")
    }
    func connectionWillStart(_ connection: ServerConnection, driver: ConnectionDriver) {}
    func serverWillShutDown() {}
    var childrenRunning: Int? { nil }
    var keepsRequests: Bool { false }
    var parksIdleClients: Bool { false }
    func connectionDidPark(_ connection: ServerConnection) {}
    var encodedPayloadSent: UInt64 { 0 }
    var busLosses: UInt64? { nil }
}

/// A WebSocket server on one `EventLoop`: listeners, the opening handshake of each accepted
/// connection in the loop (RFC 6455 §4.2), the handshake policy, and one `ConnectionDriver`
/// in the server role per client. No stdio: the faces give it a `ServerMode`.
///
/// Many connections share the loop; an idle client costs its driver and a `ServerConnection`.
public final class ServerDriver {
    public let loop: EventLoop
    public let configuration: ServerConfiguration
    public weak var mode: ServerMode?
    /// Events for the faces (-v lines, --jsonl objects).
    public var onEvent: ((ServerEvent) -> Void)?
    /// Called once after `shutdown`, when the last client's connection has ended.
    public var onDrained: (() -> Void)?

    private var listeners: [Listener] = []
    private var exchanges: [ObjectIdentifier: HandshakeExchange] = [:]
    /// --proxy-protocol: connections whose PROXY header is being read.
    private var proxyReaders: [ObjectIdentifier: ProxyHeaderReader] = [:]
    /// Static-site answers being written.
    private var siteExchanges: [ObjectIdentifier: SiteExchange] = [:]
    /// Nil without --static or --devconsole.
    let site: StaticSite?
    public private(set) var connections: [Int: ServerConnection] = [:]
    private var nextID = 1
    public private(set) var isShuttingDown = false
    /// Handshakes refused, by HTTP status.
    public private(set) var refusals: [Int: Int] = [:]
    /// Plain requests --static or --devconsole answered, by HTTP status.
    public private(set) var siteAnswers: [Int: UInt64] = [:]
    /// Clients served so far (handshakes completed).
    public private(set) var acceptedCount = 0
    /// TLS handshakes that failed (or that the client abandoned).
    public private(set) var tlsFailureCount = 0
    /// The counts of the clients whose connection has ended (the metrics).
    public private(set) var endedTotals = ServerTotals()
    /// The wall clock at `init`, in seconds since the Unix epoch.
    public let startTime = MetricsExposition.wallClock()
    /// The per-address counts (nil without `perAddress`), and the key each client's
    /// connection counts under.
    private var addressTable: AddressTable?
    private var clientKeys: [Int: AddressKey] = [:]
    /// Refusals and pauses of the limits, for the metrics.
    public private(set) var limitCounts = LimitCounts()
    /// libz is mapped on the first offer we would accept (a server whose clients offer
    /// nothing never maps it); nil until then, false if it cannot be loaded (offers declined).
    private var zlibLoaded: Bool?

    public init(loop: EventLoop, configuration: ServerConfiguration, mode: ServerMode) {
        self.loop = loop
        self.configuration = configuration
        self.mode = mode
        site = configuration.site.isEmpty ? nil : StaticSite(configuration.site)
        addressTable = configuration.perAddress.map(AddressTable.init)
    }

    /// Accepts on `socket` from now on; with `tls`, each connection's TLS handshake runs on
    /// the loop before its WebSocket handshake, both within the handshake timeout.
    public func listen(on socket: any ListeningSocket, tls: TLSServerContext? = nil) {
        let listener = Listener(loop: loop, socket: socket) { [weak self] stream in self?.accepted(stream, tls: tls) }
        listeners.append(listener)
        listener.start()
    }

    /// Connected clients.
    public var clientCount: Int { connections.count }
    /// Handshakes under way.
    public var handshakeCount: Int { exchanges.count + proxyReaders.count }
    /// Times accepting paused because descriptors ran out (EMFILE/ENFILE).
    public var exhaustedCount: Int { listeners.reduce(0) { $0 + $1.exhaustedCount } }
    /// The totals the route weighs a new client against.
    var load: HandshakeRoute.Load { HandshakeRoute.Load(clients: connections.count, maximumClients: configuration.maximumClients) }

    /// The route a request head takes: the policy, the site and the mode's word on it.
    var route: HandshakeRoute {
        HandshakeRoute(policy: configuration.policy, hasSite: site != nil,
                       modeRefusal: { [weak mode] in mode?.refusal(for: $0) }, decidesLater: mode?.decidesLater ?? false)
    }

    /// What `clientAddress` holds against the per-address limits; `request`: a request head
    /// came from it, which takes a token of its request rate. Unlimited without an IP
    /// address (a Unix socket's client).
    func standing(of clientAddress: PeerAddress, request: Bool) -> HandshakeRoute.Standing {
        guard let settings = configuration.perAddress,
              let key = AddressKey(clientAddress, ipv6PrefixBits: settings.ipv6PrefixBits) else { return .unlimited }
        let now = RateKeeper.seconds(.now())
        let wait = request ? addressTable?.request(key, now: now) : nil
        // Capped: a rate as slow as 1e-300/s asks for a wait no Int holds (it trapped).
        let retryAfter = wait.map { Int(min($0.rounded(.up), Self.longestRetryAfter)) }
        return HandshakeRoute.Standing(handshakeRetryAfter: retryAfter, clients: addressTable?.clients(key) ?? 0,
                                       maximumClients: settings.maximumClients)
    }

    /// The longest Retry-After said, in seconds (a year).
    static let longestRetryAfter: Double = 365 * 86400

    func noteLimited(_ reason: HandshakeRoute.AddressLimitReason) {
        switch reason {
        case .requests: limitCounts.requestsPerAddress += 1
        case .clients: limitCounts.clientsPerAddress += 1
        }
    }

    func noteRate(_ event: RateEvent) {
        switch event {
        case .paused: limitCounts.ratePaused += 1
        case .closed: limitCounts.rateClosed += 1
        }
    }

    private func accepted(_ connection: TCPStream, tls: TLSServerContext?) {
        guard !isShuttingDown else { return connection.close() }
        let peer = PeerAddress(socketAddress: connection.remoteAddress)
        guard configuration.clientAddress.proxyProtocol else {
            return startExchange(connection, tls: tls, connectionAddress: peer, timeout: configuration.handshakeTimeout)
        }
        guard configuration.clientAddress.acceptsProxyHeader(from: peer) else {
            onEvent?(.proxyHeaderRefused(remoteAddress: connection.remoteAddress, reason: "not in --trust-proxy"))
            return connection.close()
        }
        let deadline = Instant.now().adding(seconds: configuration.handshakeTimeout)
        let reader = ProxyHeaderReader(loop: loop, connection: connection, peer: peer) { [weak self] reader, outcome in
            guard let self else { return reader.connection.close() }
            proxyReaders[ObjectIdentifier(reader)] = nil
            switch outcome {
            case .address(let address):
                guard !isShuttingDown else { return reader.connection.close() }
                startExchange(reader.connection, tls: tls, connectionAddress: address,
                              timeout: max(0, deadline.seconds(since: Instant.now())))
            case .refused(let why):
                onEvent?(.proxyHeaderRefused(remoteAddress: reader.connection.remoteAddress, reason: why))
                reader.connection.close()
                if configuration.oneClientAtATime { loop.later { [weak self] in self?.updateAccepting() } }
            }
        }
        proxyReaders[ObjectIdentifier(reader)] = reader
        updateAccepting()
        reader.start(deadline: deadline)
    }

    /// The TLS handshake (on a TLS listener) and the opening handshake; `connectionAddress`
    /// is the socket's peer or the PROXY header's client, `timeout` what is left of the
    /// handshake timeout.
    private func startExchange(_ connection: TCPStream, tls: TLSServerContext?, connectionAddress: PeerAddress, timeout: Double) {
        var stream: ByteStream = connection
        if let tls {
            do throws(TLSFailure) {
                stream = try TLSStream.accepting(over: connection, context: tls)
            } catch {
                noteTLSFailure(remoteAddress: connectionAddress.description, .tls(.other(detail: "\(error)")))
                return connection.close()
            }
        }
        let exchange = HandshakeExchange(loop: loop, connection: connection, stream: stream, server: self,
                                         maximumHeadSize: configuration.maximumHeadSize, connectionAddress: connectionAddress)
        exchanges[ObjectIdentifier(exchange)] = exchange
        updateAccepting()
        exchange.start(timeout: timeout)
    }

    /// A static-site answer the stream did not take at once: the connection is its until it is written.
    func serveSite(_ exchange: SiteExchange) {
        siteExchanges[ObjectIdentifier(exchange)] = exchange
        exchange.start()
    }

    func siteExchangeEnded(_ exchange: SiteExchange) {
        siteExchanges[ObjectIdentifier(exchange)] = nil
    }

    /// A kept-alive connection's next request is a handshake like a new client's.
    func resumeHandshake(connection: TCPStream, stream: ByteStream, connectionAddress: PeerAddress, received: [UInt8], closing: Bool) {
        guard !isShuttingDown else { return stream.close() }
        let exchange = HandshakeExchange(loop: loop, connection: connection, stream: stream, server: self,
                                         maximumHeadSize: configuration.maximumHeadSize, connectionAddress: connectionAddress)
        exchanges[ObjectIdentifier(exchange)] = exchange
        exchange.resume(received: received, closing: closing, timeout: configuration.handshakeTimeout)
    }

    func exchangeEnded(_ exchange: HandshakeExchange) {
        exchanges[ObjectIdentifier(exchange)] = nil
        // Checked later: an accepted exchange is handed over right after it ends.
        if configuration.oneClientAtATime { loop.later { [weak self] in self?.updateAccepting() } }
    }

    /// One client at a time: accepting pauses while a handshake or connection is under way.
    private func updateAccepting() {
        guard configuration.oneClientAtATime, !isShuttingDown else { return }
        let busy = !exchanges.isEmpty || !proxyReaders.isEmpty || !connections.isEmpty
        for listener in listeners {
            if busy { listener.pause() } else { listener.resume() }
        }
    }

    func noteTLSFailure(remoteAddress: String, _ why: StreamFailure) {
        tlsFailureCount += 1
        onEvent?(.tlsFailed(remoteAddress: remoteAddress, why))
    }

    func noteNotHTTP(remoteAddress: String, firstByte: UInt8) {
        onEvent?(.notHTTP(remoteAddress: remoteAddress, firstByte: firstByte))
    }

    func noteSiteAnswer(_ answer: SiteAnswer) {
        siteAnswers[answer.status, default: 0] += 1
        if let notServed = answer.notServed { onEvent?(.notServed(target: notServed.target, notServed.why)) }
    }

    func noteRefusal(status: Int, remoteAddress: String, reason: String?, origin: String?) {
        refusals[status, default: 0] += 1
        onEvent?(.refused(status: status, remoteAddress: remoteAddress, reason: reason, origin: origin))
    }

    /// The permessage-deflate answer to `request`'s offers and the extension as agreed, or
    /// nil (not configured, nothing acceptable offered, or libz missing).
    func negotiateDeflate(_ request: HandshakeRequest) -> (response: ExtensionOffer, agreed: PerMessageDeflate)? {
        guard let deflate = configuration.deflate, !request.extensions.isEmpty,
              let negotiated = deflate.negotiate(request.extensions) else { return nil }
        if zlibLoaded == nil {
            do throws(ZlibLoadError) {
                try Zlib.load()
                zlibLoaded = true
            } catch {
                zlibLoaded = false
                onEvent?(.compressionUnavailable(error.reason))
            }
        }
        return zlibLoaded == true ? negotiated : nil
    }

    /// The 101 is written: the client gets its driver (its events to `delegate`, or to the
    /// mode's handler). `stream` is `connection` or the TLS stream over it. Nil when the
    /// server is shutting down (the stream is closed).
    @discardableResult
    func handOver(_ stream: ByteStream, connection: TCPStream, clientAddress: PeerAddress, request: HandshakeRequest, subprotocol: String?,
                  deflate: (response: ExtensionOffer, agreed: PerMessageDeflate)?,
                  received: ByteBuffer?, parsed: Int, delegate: ConnectionDelegate? = nil) -> ServerConnection? {
        guard let mode, !isShuttingDown else { stream.close(); return nil }
        let id = nextID
        nextID += 1
        acceptedCount += 1
        let local = connection.localAddress ?? connection.remoteAddress
        let tls = stream as? TLSStream
        let info = ClientInfo(id: id, request: request, clientAddress: clientAddress, localAddress: local,
                              isSecure: tls != nil, clientCertificateSubject: tls?.peerSubject, subprotocol: subprotocol,
                              deflate: deflate.map { ($0.response, $0.agreed.configuration) }, tlsSummary: tls?.summary)
        let connection = ServerConnection(info: info, server: self)
        connections[id] = connection
        if let settings = configuration.perAddress, let key = AddressKey(clientAddress, ipv6PrefixBits: settings.ipv6PrefixBits) {
            addressTable?.connected(key, now: RateKeeper.seconds(.now()))
            clientKeys[id] = key
        }
        if delegate == nil, mode.parksIdleClients, deflate == nil, let plain = stream as? TCPStream,
           received.map({ parsed >= $0.count }) ?? true, mayPark {
            onEvent?(.connected(connection))
            if !mode.keepsRequests { connection.forgetRequest() }
            connection.park(stream: plain, loop: loop)
            mode.connectionDidPark(connection)
            return connection
        }
        connection.handler = delegate ?? mode.handler(for: connection)
        let agreement = ServerHandshake.agreement(subprotocol: subprotocol, deflate: deflate?.agreed)
        let driver = ConnectionDriver(loop: loop, stream: stream, agreement: agreement,
                                      maximumMessageSize: configuration.maximumMessageSize, options: configuration.connection,
                                      received: received, parsed: parsed, delegate: connection)
        onEvent?(.connected(connection))
        mode.connectionWillStart(connection, driver: driver)
        connection.start(driver, limits: configuration.perClient, rates: configuration.rates)
        mode.connectionDidStart(connection)
        if !mode.keepsRequests { connection.forgetRequest() }
        return connection
    }

    /// Nothing per client asks for a driver from the start: no keepalive pings (a timer),
    /// no per-client limits or rates (a keeper attached to the driver).
    private var mayPark: Bool {
        configuration.connection.pingInterval == nil && configuration.connection.pingTimeout == nil
            && configuration.perClient == ConnectionLimits() && configuration.rates == nil
    }

    /// A parked client's socket has something (or the server needs its driver): it gets its
    /// driver and handler now, as `handOver` would have made them.
    /// With the mode gone (the server holds it weakly) nobody serves the client: it still
    /// gets a driver, which says 1001 and ends it as any connection ends (the server's
    /// table, its events, a drain waiting for it), not a closed socket still counted.
    func unpark(_ connection: ServerConnection, stream: TCPStream) -> ConnectionDriver? {
        let mode = self.mode
        connection.handler = mode?.handler(for: connection)
        let agreement = ServerHandshake.agreement(subprotocol: connection.info.subprotocol, deflate: nil)
        let driver = ConnectionDriver(loop: loop, stream: stream, agreement: agreement,
                                      maximumMessageSize: configuration.maximumMessageSize, options: configuration.connection,
                                      delegate: connection)
        mode?.connectionWillStart(connection, driver: driver)
        connection.start(driver, limits: ConnectionLimits())
        guard let mode else {
            driver.close(ClosePayload(code: .goingAway))
            return driver
        }
        mode.connectionDidStart(connection)
        return driver
    }

    func connectionEnded(_ connection: ServerConnection, _ driver: ConnectionDriver, _ ending: ConnectionEnding) {
        connections[connection.info.id] = nil
        if let key = clientKeys.removeValue(forKey: connection.info.id) { addressTable?.disconnected(key, now: RateKeeper.seconds(.now())) }
        endedTotals.add(driver)
        if let received = driver.closeReceived { endedTotals.closes[received.code?.rawValue ?? 1005, default: 0] += 1 }
        if connection.info.deflate != nil { noteDeflateEnded() }
        onEvent?(.disconnected(connection, ending))
        updateAccepting()
        if isShuttingDown && connections.isEmpty { drained() }
    }

    /// Every client's counts so far: the ended ones and those connected (read at a scrape,
    /// not kept up to date per message).
    public var totals: ServerTotals {
        var totals = endedTotals
        for connection in connections.values {
            // A parked client has sent and been sent nothing: it is not woken for a scrape.
            guard let driver = connection.activeDriver else { continue }
            totals.add(driver)
        }
        totals.bytesSent &+= mode?.encodedPayloadSent ?? 0
        return totals
    }

    /// The metrics as the endpoint shows them now.
    public var exposition: MetricsExposition {
        var metrics = MetricsExposition()
        metrics.totals = totals
        metrics.clientsConnected = connections.count
        var handshakes: [Int: UInt64] = acceptedCount > 0 ? [101: UInt64(acceptedCount)] : [:]
        for (status, count) in refusals { handshakes[status, default: 0] += UInt64(count) }
        metrics.handshakes = handshakes
        metrics.httpRequests = siteAnswers
        metrics.childrenRunning = mode?.childrenRunning
        metrics.busLosses = mode?.busLosses
        metrics.startTime = startTime
        if configuration.perAddress != nil || configuration.rates != nil { metrics.limited = limitCounts }
        return metrics
    }

    /// Stops accepting, drops handshakes under way, and closes every client with `payload`
    /// (1001 going away), each ending within `limit` seconds. `onDrained` follows when the
    /// last connection has ended (at once without clients).
    public func shutdown(_ payload: ClosePayload, within limit: Double) {
        guard !isShuttingDown else { return }
        mode?.serverWillShutDown()
        isShuttingDown = true
        for listener in listeners { listener.close() }
        listeners.removeAll()
        for reader in Array(proxyReaders.values) { reader.cancel() }
        proxyReaders.removeAll()
        for exchange in Array(exchanges.values) { exchange.end() }
        for exchange in Array(siteExchanges.values) { exchange.end() }
        if connections.isEmpty { return drained() }
        // A client already closing (a mode closed it: 1013) keeps its own Close, and its
        // close timeout bounds it.
        for connection in Array(connections.values) where connection.driver?.canSendData == true {
            connection.driver?.close(payload, within: limit)
        }
    }

    /// Deflate clients ended since the heap was last trimmed.
    private var deflateEndedSinceTrim = 0
    private var trimScheduled = false

    /// zlib's states are freed with their connection, but into malloc's free lists: after a
    /// wave of deflate clients leaves (every 256), free pages go back to the system
    /// (malloc_trim), so RSS falls with the clients instead of staying at its peak.
    private func noteDeflateEnded() {
        deflateEndedSinceTrim += 1
        guard deflateEndedSinceTrim >= 256, !trimScheduled else { return }
        trimScheduled = true
        loop.later { [weak self] in
            guard let self else { return }
            self.trimScheduled = false
            self.deflateEndedSinceTrim = 0
            _ = wsp_malloc_trim()
        }
    }

    private var drainedOnce = false
    private func drained() {
        guard !drainedOnce else { return }
        drainedOnce = true
        loop.later { [weak self] in self?.onDrained?() }
    }
}
