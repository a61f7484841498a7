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
    ///
    /// permessage-deflate: a client that agreed server_no_context_takeover gets the copy
    /// compressed once for every such client with the same window (the same frame bytes);
    /// a client with context takeover has its own compressor, whose window refers to what
    /// that client was sent before, so its driver compresses its copy.
    public func send(_ opcode: Opcode, fin: Bool, _ payload: UnsafeMutableRawPointer?, count: Int, in owner: ByteBuffer?) {
        precondition(fin, "broadcast sends whole messages")
        var shared = SharedCopies()
        for (id, driver) in clients where driver.canSendData {
            if driver.queuedBytes + count > queueLimit {
                droppedSlowClients += 1
                clients[id] = nil
                driver.close(ClosePayload(code: CloseCode(1013), reason: Array("too slow: the broadcast went on".utf8)))
                continue
            }
            if let payload, count >= ConnectionDriver.compressionThreshold, let agreed = driver.compression,
               agreed.outgoingNoContextTakeover, let copy = shared.copy(windowBits: agreed.outgoingWindowBits, mode: self,
                                                                        payload, count: count) {
                driver.sendCompressed(opcode, copy.base, count: copy.count, in: copy, payloadSize: count)
                continue
            }
            driver.send(opcode, fin: true, payload, count: count, in: owner)
        }
        compressedOnce += shared.made
        sharedSends += shared.sends
    }

    /// zlib's memLevel of the shared compressors (the server's setting).
    public var memoryLevel = 5
    /// Messages compressed once for the clients without context takeover, and the copies
    /// those sent (so `sharedSends - compressedOnce` compressions were saved).
    public private(set) var compressedOnce = 0
    public private(set) var sharedSends = 0
    /// One compressor per window size, reset after every message (no context kept).
    private var compressors: [Int: Deflater] = [:]

    /// The compressed copies of one message, made on first need, one per window size.
    private struct SharedCopies {
        var copies: [Int: ByteBuffer?] = [:]
        var made = 0
        var sends = 0

        mutating func copy(windowBits: Int, mode: BroadcastMode, _ payload: UnsafeMutableRawPointer, count: Int) -> ByteBuffer? {
            if let known = copies[windowBits] {
                if known != nil { sends += 1 }
                return known
            }
            let made = mode.compressOnce(windowBits: windowBits, payload, count: count)
            copies[windowBits] = made
            if made != nil { self.made += 1; sends += 1 }
            return made
        }
    }

    /// `payload` deflated without context for a `windowBits` window, tail removed; nil
    /// when zlib cannot (an 8-bit window, no memory): the driver then sends it as usual.
    fileprivate func compressOnce(windowBits: Int, _ payload: UnsafeMutableRawPointer, count: Int) -> ByteBuffer? {
        if compressors[windowBits] == nil {
            guard let made = Deflater(windowBits: windowBits, memoryLevel: memoryLevel, resetsContext: true) else { return nil }
            compressors[windowBits] = made
        }
        guard let deflater = compressors[windowBits],
              let bytes = deflater.compress(UnsafeRawPointer(payload), count: count, final: true) else { return nil }
        let buffer = ByteBuffer(capacity: max(bytes.count, 1))
        if let base = bytes.baseAddress { buffer.base.copyMemory(from: base, byteCount: bytes.count) }
        buffer.count = bytes.count
        return buffer
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
