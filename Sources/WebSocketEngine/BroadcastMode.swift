import WebSocketCore

/// Every message given to `send` goes to every connected client; every client message is
/// reported whole to `onMessage`. A server's frames are unmasked, so the frames are the
/// same bytes for every client that gets them uncompressed: the messages sent since the
/// last `flush` are encoded once into one buffer, and every such client's queue references
/// it (one copy per batch, not per client; a client is touched once per batch, not once
/// per message). `flush` runs when the batch reaches `batchLimit`, before a ping, a client
/// joining, `readingPaused` or the server's shutdown, and at the latest in the loop's next
/// turn.
///
/// A slow client never stalls the others: when more than `queueLimit` bytes wait for it
/// (besides room for the largest message sent, so that one message larger than the limit
/// still reaches every client that keeps up), it is closed with 1013 (try again later),
/// counted in `droppedSlowClients` and reported to `onSlowClient`.
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
    /// A client is being closed with 1013: its id and the bytes waiting for it.
    public var onSlowClient: ((Int, Int) -> Void)?
    private var clients: [Int: ConnectionDriver] = [:]
    /// Clients that have sent nothing and been sent nothing since their handshake: they have
    /// no driver (`parksIdleClients`) until the next message, ping or their own first data.
    private var parked: [Int: ServerConnection] = [:]
    /// How many of `clients` agreed permessage-deflate: they get each message as it is
    /// sent (compressed for them), not the batch.
    private var compressingClients = 0
    private let loop: EventLoop

    /// Whether the source should go on: no client, or one with less than a quarter of
    /// `queueLimit` waiting.
    public var hasRoom: Bool {
        clients.isEmpty || clients.values.contains { $0.queuedBytes < queueLimit / 4 }
    }

    /// - Parameters:
    ///   - loop: the clients' loop (a batch not flushed goes out in its next turn).
    ///   - queueLimit: bytes per client, 4 MiB by default.
    public init(loop: EventLoop, queueLimit: Int = 4 << 20) {
        self.loop = loop
        self.queueLimit = queueLimit
    }

    public var clientCount: Int { clients.count + parked.count }

    /// A client idle from its handshake costs no driver until something is sent to it.
    public var parksIdleClients: Bool { true }

    public func connectionDidPark(_ connection: ServerConnection) {
        flush()  // what was sent before it joined is not for it
        parked[connection.info.id] = connection
    }

    /// Gives every parked client its driver, before a message or ping that is for them: the
    /// batch then holds nothing sent before they joined (each park flushed it), so joining
    /// now (`connectionDidStart`'s flush) loses them nothing.
    private func wakeParked() {
        let waking = parked
        parked = [:]
        for connection in waking.values { _ = connection.driver }
    }

    public func handler(for connection: ServerConnection) -> ConnectionDelegate {
        BroadcastHandler(mode: self, connection: connection)
    }

    public func connectionDidStart(_ connection: ServerConnection) {
        parked[connection.info.id] = nil
        guard let driver = connection.activeDriver else { return }
        flush()  // what was sent before it joined is not for it
        clients[connection.info.id] = driver
        if driver.compression != nil { compressingClients += 1 }
        if readingPaused { driver.pauseReading() }
    }

    /// The batch goes before the Close of the shutdown.
    public func serverWillShutDown() { flush() }

    /// Stops (or resumes) reading every client, new ones included: the owner's output of
    /// their messages lags (stdout is slow), so they wait in TCP instead of in memory.
    public var readingPaused = false {
        didSet {
            guard readingPaused != oldValue else { return }
            flush()
            for driver in clients.values { if readingPaused { driver.pauseReading() } else { driver.resumeReading() } }
        }
    }

    func left(_ id: Int) {
        remove(id)
        onRoom?()
    }

    private func remove(_ id: Int) {
        guard let driver = clients.removeValue(forKey: id) else { return }
        if driver.compression != nil { compressingClients -= 1 }
    }

    /// The largest message sent so far, in bytes: a client may have that much waiting
    /// beyond `queueLimit` (one message larger than the limit, still on its way to every
    /// client, is not a client falling behind).
    private var largestMessage = 0

    /// Whether a client has fallen too far behind: more than `queueLimit` waiting, besides
    /// room for the largest message.
    private func isBehind(_ driver: ConnectionDriver) -> Bool { driver.queuedBytes > queueLimit + largestMessage }

    /// Closes a client that is behind (`isBehind`) with 1013.
    private func dropSlow(_ id: Int, _ driver: ConnectionDriver) {
        droppedSlowClients += 1
        onSlowClient?(id, driver.queuedBytes)
        remove(id)
        driver.close(ClosePayload(code: CloseCode(1013), reason: Array("too slow: the broadcast went on".utf8)))
    }

    // MARK: - The batch

    /// Bytes of frames a batch collects before it goes out without waiting for `flush`.
    public static let batchLimit = 64 * 1024
    /// Size of the buffers batches are encoded into, one after the other: consecutive
    /// batches are contiguous, so a client behind by many small batches references a few
    /// buffers about as full as what it has waiting (not one mostly empty buffer for each),
    /// and its queue holds them as one run.
    public static let arenaSize = 256 * 1024
    /// The buffer being filled (nil: none yet), and where in it the batch not flushed yet
    /// starts; `batchMessages` counts the messages since.
    private var arena: ByteBuffer?
    /// The arena's base and capacity and how much of it is filled, kept here rather than
    /// read from it: appending a message then touches no reference (no retain or release
    /// per message). `arena.count` is brought up to date when the batch goes out.
    private var arenaBase: UnsafeMutableRawPointer?
    private var arenaCapacity = 0
    private var filled = 0
    private var batchStart = 0
    private var batchMessages = 0
    /// Payload bytes of the batch's messages (the metrics' bytes sent).
    private var batchPayload = 0
    public private(set) var encodedPayloadSent: UInt64 = 0
    /// Times the face's message bus was lost (--bus), for the metrics; nil: no bus.
    public var busLosses: UInt64?
    private var flushScheduled = false

    /// Encodes one whole message at the end of the batch (a frame of the server role: no
    /// mask, RSV bits clear). A payload of `batchLimit` or more that has an owner is not
    /// copied: its header ends the batch, and the payload follows it from where it is.
    @inline(__always)  // one caller, `send`: one call less per message
    private func appendToBatch(_ opcode: Opcode, _ payload: UnsafeMutableRawPointer?, count: Int, in owner: ByteBuffer?) {
        let referenced = count >= BroadcastMode.batchLimit && owner != nil && payload != nil
        let headerSize = FrameHeader.encodedSize(payloadLength: UInt64(count), masked: false)
        let size = headerSize + (referenced ? 0 : count)
        if arenaBase == nil || arenaCapacity - filled < size { startArena(size) }
        guard let base = arenaBase else { return }
        let start = base + filled
        FrameHeader.encodeFinal(opcode, payloadLength: count, into: start)
        if !referenced, count > 0, let payload { (start + headerSize).copyMemory(from: payload, byteCount: count) }
        filled += size
        batchMessages += 1
        batchPayload += count
        if referenced, let payload, let owner {
            flush(then: (payload, count, owner))
        } else if filled - batchStart >= BroadcastMode.batchLimit {
            flush()
        } else if !flushScheduled {
            flushScheduled = true
            loop.later { [weak self] in
                self?.flushScheduled = false
                self?.flush()
            }
        }
        // A buffer made for one outsized message is not kept for the next.
        if arenaBase != nil, arenaCapacity != BroadcastMode.arenaSize, batchMessages == 0 { dropArena() }
    }

    /// Sends the batch and starts a new arena with room for `size` bytes.
    private func startArena(_ size: Int) {
        flush()
        let made = ByteBuffer(capacity: max(BroadcastMode.arenaSize, size))
        arena = made
        arenaBase = made.base
        arenaCapacity = made.capacity
        filled = 0
        batchStart = 0
    }

    private func dropArena() {
        arena = nil
        arenaBase = nil
        arenaCapacity = 0
        filled = 0
        batchStart = 0
    }

    /// Gives the batch to every client that takes uncompressed frames (a client that is
    /// behind, `isBehind`, is closed with 1013 instead).
    public func flush() { flush(then: nil) }

    /// `payload`: the last frame's payload, which stays in its owner.
    private func flush(then payload: (start: UnsafeMutableRawPointer, count: Int, owner: ByteBuffer)?) {
        guard batchMessages > 0, let arena else { return }
        arena.count = filled
        let frames = arena.base + batchStart
        let count = filled - batchStart
        let messages = batchMessages
        let payloadBytes = UInt64(batchPayload)
        batchStart = filled
        batchMessages = 0
        batchPayload = 0
        for (id, driver) in clients where driver.canSendData && driver.compression == nil {
            if isBehind(driver) {
                dropSlow(id, driver)
                continue
            }
            driver.sendFrames(frames, count: count, in: arena, messages: messages)
            encodedPayloadSent &+= payloadBytes
            if let payload { driver.sendFrames(payload.start, count: payload.count, in: payload.owner, messages: 0) }
        }
    }

    /// Sends one whole message to every client that can take it. `fin` must be true
    /// (fragments would reach a client that joined mid-message as a protocol error).
    /// Clients without permessage-deflate get it with the batch (see `flush`).
    ///
    /// permessage-deflate: a client that agreed server_no_context_takeover gets the copy
    /// compressed once for every such client with the same window (the same frame bytes);
    /// a client with context takeover has its own compressor, whose window refers to what
    /// that client was sent before, so its driver compresses its copy.
    public func send(_ opcode: Opcode, fin: Bool, _ payload: UnsafeMutableRawPointer?, count: Int, in owner: ByteBuffer?) {
        precondition(fin, "broadcast sends whole messages")
        if !parked.isEmpty { wakeParked() }
        largestMessage = max(largestMessage, count)
        if compressingClients < clients.count { appendToBatch(opcode, payload, count: count, in: owner) }
        if compressingClients > 0 { sendCompressing(opcode, payload, count: count, in: owner) }
    }

    /// `send` to the clients with permessage-deflate; out of line, so that the common path
    /// (no such client) stays a few instructions.
    @inline(never)
    private func sendCompressing(_ opcode: Opcode, _ payload: UnsafeMutableRawPointer?, count: Int, in owner: ByteBuffer?) {
        var shared = SharedCopies()
        for (id, driver) in clients where driver.canSendData {
            guard let agreed = driver.compression else { continue }
            if isBehind(driver) {
                dropSlow(id, driver)
                continue
            }
            if let payload, count >= ConnectionDriver.compressionThreshold, agreed.outgoingNoContextTakeover,
               let copy = shared.copy(windowBits: agreed.outgoingWindowBits, mode: self, payload, count: count) {
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
        if !parked.isEmpty { wakeParked() }
        flush()
        for driver in clients.values { driver.ping(payload) }
    }
}

/// One broadcast client: collects its messages for `onMessage`.
final class BroadcastHandler: ConnectionDelegate {
    private unowned let mode: BroadcastMode
    /// Not a copy of its `ClientInfo`: that would keep the request the connection lets go.
    /// The connection outlives its handler (it drops it at the end).
    private unowned let client: ServerConnection
    private var kind = MessageKind.text
    private var message: [UInt8] = []

    init(mode: BroadcastMode, connection: ServerConnection) {
        self.mode = mode
        client = connection
    }

    func connection(_ connection: ConnectionDriver, didStartMessage kind: MessageKind) {
        self.kind = kind
        message.removeAll(keepingCapacity: false)
    }
    func connection(_ connection: ConnectionDriver, didReceive bytes: UnsafeMutableRawPointer, count: Int, in buffer: ByteBuffer) {
        message.append(contentsOf: UnsafeRawBufferPointer(start: bytes, count: count))
    }
    func connectionDidEndMessage(_ connection: ConnectionDriver) {
        mode.onMessage?(client.info, kind, message)
        message = []
    }
    func connectionHasRoom(_ connection: ConnectionDriver) { mode.onRoom?() }
    func connection(_ connection: ConnectionDriver, didEnd ending: ConnectionEnding) { mode.left(client.info.id) }
}
