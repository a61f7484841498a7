import WebSocketCore

/// Every message given to `send` goes to every connected client; every client message is
/// reported whole to `onMessage`. A server's frames are unmasked, so a payload over
/// `ConnectionDriver.copyLimit` is written from the one buffer it is in to every client
/// (each driver references it; only the 2-10 byte headers are per client).
///
/// A slow client never stalls the others: when more than `queueLimit` bytes already wait
/// for it, it is closed with 1013 (try again later) and counted in `droppedSlowClients`.
/// The source is paced by the fastest client instead: `hasRoom` is false while every
/// client has a quarter of the limit waiting, and `onRoom` says when that may have changed.
public final class BroadcastMode: ServerMode, MessageSink {
    /// Bytes that may wait for one client before it is dropped.
    public var queueLimit: Int
    /// Clients closed with 1013 because they fell behind.
    public private(set) var droppedSlowClients = 0
    /// A client's complete message: the client, its type and its payload.
    public var onMessage: ((ClientInfo, MessageKind, [UInt8]) -> Void)?
    /// A client's socket took bytes: `hasRoom` may have become true.
    public var onRoom: (() -> Void)?
    private var clients: [Int: ConnectionDriver] = [:]

    /// Whether the source should go on: no client, or one with less than a quarter of
    /// `queueLimit` waiting.
    public var hasRoom: Bool {
        clients.isEmpty || clients.values.contains { $0.queuedBytes < queueLimit / 4 }
    }

    /// - Parameter queueLimit: bytes per client, 4 MiB by default.
    public init(queueLimit: Int = 4 << 20) { self.queueLimit = queueLimit }

    public var clientCount: Int { clients.count }

    public func handler(for connection: ServerConnection) -> ConnectionDelegate {
        BroadcastHandler(mode: self, info: connection.info)
    }

    public func connectionDidStart(_ connection: ServerConnection) {
        guard let driver = connection.driver else { return }
        clients[connection.info.id] = driver
        if readingPaused { driver.pausesReading = true }
    }

    /// Stops (or resumes) reading every client, new ones included: the owner's output of
    /// their messages lags (stdout is slow), so they wait in TCP instead of in memory.
    public var readingPaused = false {
        didSet {
            guard readingPaused != oldValue else { return }
            for driver in clients.values { driver.pausesReading = readingPaused }
        }
    }

    func left(_ id: Int) {
        clients[id] = nil
        onRoom?()
    }

    /// Sends one whole message to every client that can take it. `fin` must be true
    /// (fragments would reach a client that joined mid-message as a protocol error).
    public func send(_ opcode: Opcode, fin: Bool, _ payload: UnsafeMutableRawPointer?, count: Int, in owner: ByteBuffer?) {
        precondition(fin, "broadcast sends whole messages")
        for (id, driver) in clients where driver.canSendData {
            if driver.queuedBytes + count > queueLimit {
                droppedSlowClients += 1
                clients[id] = nil
                driver.close(ClosePayload(code: CloseCode(1013), reason: Array("too slow: the broadcast went on".utf8)))
                continue
            }
            driver.send(opcode, fin: true, payload, count: count, in: owner)
        }
    }

    public func send(_ opcode: Opcode, fin: Bool, bytes: [UInt8]) {
        var copy = bytes
        copy.withUnsafeMutableBytes { send(opcode, fin: fin, $0.baseAddress, count: $0.count, in: nil) }
    }

    /// Pings every client (a stdin `{"type":"ping"}`).
    public func ping(_ payload: [UInt8]) {
        for driver in clients.values { driver.ping(payload) }
    }
}

/// One broadcast client: collects its messages for `onMessage`.
final class BroadcastHandler: ConnectionDelegate {
    private unowned let mode: BroadcastMode
    private let info: ClientInfo
    private var kind = MessageKind.text
    private var message: [UInt8] = []

    init(mode: BroadcastMode, info: ClientInfo) {
        self.mode = mode
        self.info = info
    }

    func connection(_ connection: ConnectionDriver, didStartMessage kind: MessageKind) {
        self.kind = kind
        message.removeAll(keepingCapacity: false)
    }
    func connection(_ connection: ConnectionDriver, didReceive bytes: UnsafeMutableRawPointer, count: Int, in buffer: ByteBuffer) {
        message.append(contentsOf: UnsafeRawBufferPointer(start: bytes, count: count))
    }
    func connectionDidEndMessage(_ connection: ConnectionDriver) {
        mode.onMessage?(info, kind, message)
        message = []
    }
    func connectionHasRoom(_ connection: ConnectionDriver) { mode.onRoom?() }
    func connection(_ connection: ConnectionDriver, didEnd ending: ConnectionEnding) { mode.left(info.id) }
}
