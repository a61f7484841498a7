import CWSPipeShims
import Glibc
import WebSocketCore
import WebSocketTransport

/// Settings of a `WebSocketServer`.
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
    /// permessage-deflate (RFC 7692) as the server answers it (`PerMessageDeflate.server()`:
    /// 4 KiB windows, memLevel 5); nil declines every offer (no extension in the 101).
    public var deflate: PerMessageDeflate?

    public init() {}
}

/// What a server tells its owner, on the loop's thread.
public enum ServerEvent {
    /// A client's handshake is done and its driver started (its 101 is written).
    case connected(ServerConnection)
    /// A client's connection ended (exactly once per `connected`).
    case disconnected(ServerConnection, ConnectionEnding)
    /// A handshake was refused with this HTTP status (a 200 for the health path counts too).
    case refused(status: Int)
    /// libz could not be loaded (the reason): permessage-deflate offers are declined from now on.
    case compressionUnavailable(String)
}

/// Serves a mode: gives each new client the delegate of its driver.
public protocol ServerMode: AnyObject {
    /// `connection` completed its handshake; its driver is about to start. Return the
    /// delegate for its events (one object per connection, or one shared by all).
    func handler(for connection: ServerConnection) -> ConnectionDelegate
    /// See the extension: nil accepts.
    func refusal(for request: HandshakeRequest) -> ModeRefusal?
    /// The connection's driver has started (`connection.driver` is set).
    func connectionDidStart(_ connection: ServerConnection)
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

    func connectionDidStart(_ connection: ServerConnection) {}
}

/// A WebSocket server on one `EventLoop`: listeners, the opening handshake of each accepted
/// connection in the loop (RFC 6455 §4.2), the handshake policy, and one `ConnectionDriver`
/// in the server role per client. No stdio: the faces give it a `ServerMode`.
///
/// Many connections share the loop; an idle client costs its driver and a `ServerConnection`.
public final class WebSocketServer {
    public let loop: EventLoop
    public let configuration: ServerConfiguration
    public weak var mode: ServerMode?
    /// Events for the faces (-v lines, --jsonl objects).
    public var onEvent: ((ServerEvent) -> Void)?
    /// Called once after `shutdown`, when the last client's connection has ended.
    public var onDrained: (() -> Void)?

    private var listeners: [(listener: Listener, secure: Bool)] = []
    private var exchanges: [ObjectIdentifier: HandshakeExchange] = [:]
    public private(set) var connections: [Int: ServerConnection] = [:]
    private var nextID = 1
    public private(set) var isShuttingDown = false
    /// Handshakes refused, by HTTP status.
    public private(set) var refusals: [Int: Int] = [:]
    /// Clients served so far (handshakes completed).
    public private(set) var acceptedCount = 0
    /// libz is mapped on the first offer we would accept (a server whose clients offer
    /// nothing never maps it); nil until then, false if it cannot be loaded (offers declined).
    private var zlibLoaded: Bool?

    public init(loop: EventLoop, configuration: ServerConfiguration, mode: ServerMode) {
        self.loop = loop
        self.configuration = configuration
        self.mode = mode
    }

    /// Accepts on `socket` from now on.
    public func listen(on socket: any ListeningSocket) {
        let listener = Listener(loop: loop, socket: socket) { [weak self] stream in self?.accepted(stream) }
        listeners.append((listener, false))
        listener.start()
    }

    /// Connected clients.
    public var clientCount: Int { connections.count }
    /// Handshakes under way.
    public var handshakeCount: Int { exchanges.count }
    /// Times accepting paused because descriptors ran out (EMFILE/ENFILE).
    public var exhaustedCount: Int { listeners.reduce(0) { $0 + $1.listener.exhaustedCount } }
    var isFull: Bool { connections.count >= configuration.maximumClients }

    private func accepted(_ stream: TCPStream) {
        guard !isShuttingDown else { return stream.close() }
        let exchange = HandshakeExchange(loop: loop, stream: stream, server: self, maximumHeadSize: configuration.maximumHeadSize)
        exchanges[ObjectIdentifier(exchange)] = exchange
        exchange.start(timeout: configuration.handshakeTimeout)
    }

    func exchangeEnded(_ exchange: HandshakeExchange) {
        exchanges[ObjectIdentifier(exchange)] = nil
    }

    func noteRefusal(status: Int) {
        refusals[status, default: 0] += 1
        onEvent?(.refused(status: status))
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

    /// The 101 is written: the client gets its driver.
    func handOver(_ stream: TCPStream, request: HandshakeRequest, subprotocol: String?, deflate: (response: ExtensionOffer, agreed: PerMessageDeflate)?,
                  received: ByteBuffer?, parsed: Int) {
        guard let mode, !isShuttingDown else { return stream.close() }
        let id = nextID
        nextID += 1
        acceptedCount += 1
        let local = stream.localAddress ?? stream.remoteAddress
        let info = ClientInfo(id: id, request: request, remoteAddress: stream.remoteAddress, localAddress: local,
                              isSecure: false, clientCertificateSubject: nil, subprotocol: subprotocol,
                              deflate: deflate.map { ($0.response, $0.agreed.configuration) })
        let connection = ServerConnection(info: info, server: self)
        connections[id] = connection
        connection.handler = mode.handler(for: connection)
        let core = WebSocketConnection(role: .server, maximumMessageSize: configuration.maximumMessageSize,
                                       extensions: deflate.map { [$0.agreed] } ?? [])
        let driver = ConnectionDriver(loop: loop, stream: stream, core: core, options: configuration.connection,
                                      received: received, parsed: parsed, delegate: connection)
        onEvent?(.connected(connection))
        connection.start(driver)
        mode.connectionDidStart(connection)
    }

    func connectionEnded(_ connection: ServerConnection, _ ending: ConnectionEnding) {
        connections[connection.info.id] = nil
        if connection.info.deflate != nil { noteDeflateEnded() }
        onEvent?(.disconnected(connection, ending))
        if isShuttingDown && connections.isEmpty { drained() }
    }

    /// Stops accepting, drops handshakes under way, and closes every client with `payload`
    /// (1001 going away), each ending within `limit` seconds. `onDrained` follows when the
    /// last connection has ended (at once without clients).
    public func shutdown(_ payload: ClosePayload, within limit: Double) {
        guard !isShuttingDown else { return }
        isShuttingDown = true
        for entry in listeners { entry.listener.close() }
        listeners.removeAll()
        for exchange in Array(exchanges.values) { exchange.end() }
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
