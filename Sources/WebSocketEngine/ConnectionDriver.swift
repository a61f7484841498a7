import Glibc
import WebSocketCore
import WebSocketTransport

/// What a connection tells its owner. Called on the loop's thread, in order.
///
/// Payload bytes arrive as pieces of the driver's receive buffers (`didReceive`): keep the
/// `ByteBuffer` to keep the bytes; nothing is copied. Text is valid UTF-8 so far; a message
/// counts only once `connectionDidEndMessage` comes (an ending before that drops it).
public protocol ConnectionDelegate: AnyObject {
    func connection(_ connection: ConnectionDriver, didStartMessage kind: MessageKind)
    func connection(_ connection: ConnectionDriver, didReceive bytes: UnsafeMutableRawPointer, count: Int, in buffer: ByteBuffer)
    func connectionDidEndMessage(_ connection: ConnectionDriver)
    /// A Ping arrived; the pong is already queued while the connection is open.
    func connection(_ connection: ConnectionDriver, didReceivePing payload: [UInt8])
    /// A Pong arrived (not the barrier's); `roundTrip` in seconds if it answers our ping.
    func connection(_ connection: ConnectionDriver, didReceivePong payload: [UInt8], roundTrip: Double?)
    /// The peer's Close arrived (its echo, if we closed first, is queued).
    func connection(_ connection: ConnectionDriver, didReceiveClose payload: ClosePayload)
    /// The peer broke the protocol: we are failing the connection with `error.closeCode`.
    func connection(_ connection: ConnectionDriver, didFail error: ReceiveError)
    /// Everything of one socket read has been reported (a good moment to flush output).
    func connectionDidProcessInput(_ connection: ConnectionDriver)
    /// The receive buffer is about to be let go (the connection went idle): copy out small
    /// pieces you hold of it, so that it can be reused (`ByteBuffer` stays valid anyway).
    func connectionWillReleaseReceiveBuffer(_ connection: ConnectionDriver)
    func connection(_ connection: ConnectionDriver, note: ConnectionNote)
    /// The socket took bytes and the queue is below `queueLimit`: there is room to send.
    func connectionHasRoom(_ connection: ConnectionDriver)
    /// Everything sent before `reportWhenWritten(token)` was written to the socket, for
    /// `token` and every token asked for before it.
    func connection(_ connection: ConnectionDriver, wroteThrough token: UInt64)
    /// The connection is over; the stream is closed and the driver does nothing more.
    func connection(_ connection: ConnectionDriver, didEnd ending: ConnectionEnding)
    /// While `pausesReading`, the peer shut down its sending side or the socket hung up:
    /// nothing will come after what is buffered (the ending follows once reading resumes).
    /// An owner whose output is stuck can give up on it and unpause.
    func connectionPeerShutDownWhilePaused(_ connection: ConnectionDriver)
}

public extension ConnectionDelegate {
    func connection(_ connection: ConnectionDriver, didReceivePing payload: [UInt8]) {}
    func connection(_ connection: ConnectionDriver, didReceivePong payload: [UInt8], roundTrip: Double?) {}
    func connection(_ connection: ConnectionDriver, didReceiveClose payload: ClosePayload) {}
    func connection(_ connection: ConnectionDriver, didFail error: ReceiveError) {}
    func connectionDidProcessInput(_ connection: ConnectionDriver) {}
    func connectionWillReleaseReceiveBuffer(_ connection: ConnectionDriver) {}
    func connection(_ connection: ConnectionDriver, note: ConnectionNote) {}
    func connectionHasRoom(_ connection: ConnectionDriver) {}
    func connection(_ connection: ConnectionDriver, wroteThrough token: UInt64) {}
    func connectionPeerShutDownWhilePaused(_ connection: ConnectionDriver) {}
}

/// Where outgoing data frames go: a connection, or (later) a queue that holds messages
/// while there is none. `owner` keeps the payload alive; a large payload may be masked in
/// place there, so do not change it after.
public protocol MessageSink: AnyObject {
    func send(_ opcode: Opcode, fin: Bool, _ payload: UnsafeMutableRawPointer?, count: Int, in owner: ByteBuffer?)
    func send(_ opcode: Opcode, fin: Bool, bytes: [UInt8])
}

/// Settings of one connection driver.
public struct ConnectionOptions: Sendable {
    /// Seconds the closing handshake may go without progress (RFC 6455 §7.1.1).
    public var closeTimeout: Double = 5
    /// Seconds between our keepalive pings; nil: none.
    public var pingInterval: Double?
    /// Seconds to wait for a pong once a ping is written; nil: no limit.
    public var pingTimeout: Double?
    /// Size of a receive buffer, in bytes (taken from the pool when reading, let go when
    /// idle).
    public var receiveBufferSize = 256 * 1024
    /// Framed bytes waiting for the socket beyond which sends wait as messages (framed only
    /// when the socket takes the queue below this) and pongs wait in the core.
    public var queueLimit = 192 * 1024
    /// Keep the receive buffer and the queue's arena between reads (one busy connection:
    /// a read continues where the last ended). Off: an idle connection holds no buffer.
    public var keepsBuffersWhenIdle = false

    public init() {}
}

/// One WebSocket connection on an `EventLoop`, after its opening handshake, in either role.
///
/// Owns the stream, the protocol state machine (`WebSocketConnection`), the outbound queue
/// and keepalive pings, and ends exactly once with a `ConnectionEnding` reported to its
/// delegate. Outgoing messages are framed (and, for a client, masked) when the socket has
/// room: until then they wait as messages behind any control frame. Large payloads are
/// masked in place and written from where the owner put them; small ones are copied next
/// to their headers so a burst of them goes out in one writev(2).
public final class ConnectionDriver: MessageSink {
    public let loop: EventLoop
    public let options: ConnectionOptions
    private var delegate: ConnectionDelegate?
    private let stream: ByteStream
    private var watch: EventLoop.Watch!
    private var timer: EventLoop.Timer!

    // Hot state, mutated per message: exclusivity checks off (single thread).
    @exclusivity(unchecked) public private(set) var core: WebSocketConnection
    @exclusivity(unchecked) private var outbound = OutboundQueue()
    @exclusivity(unchecked) private var waiting = MessageQueue()
    /// Asked for with `reportWhenWritten`; empty unless an owner waits for its bytes.
    private var writtenMarks = WrittenMarks()
    @exclusivity(unchecked) private var receiveBuffer: ByteBuffer?
    @exclusivity(unchecked) private var parsed = 0
    // permessage-deflate (RFC 7692), when agreed: nil otherwise, so a connection that
    // negotiated nothing pays one nil check per message start and per frame sent.
    @exclusivity(unchecked) private var inflater: Inflater?
    @exclusivity(unchecked) private var deflater: Deflater?
    private var deflateConfiguration: DeflateConfiguration?
    /// The message being received is compressed (RSV1 on its first frame).
    @exclusivity(unchecked) private var inflating = false
    /// The message being sent (fragmented) is compressed.
    private var sendingCompressed = false
    /// Its first frame's opcode while no frame of it is framed yet (zlib kept the bytes).
    private var unsentOpcode: Opcode?
    /// Compressed messages received and sent: wire bytes against payload bytes.
    public private(set) var compressionIn = CompressionCount()
    public private(set) var compressionOut = CompressionCount()
    /// Messages below this many bytes go uncompressed: deflate's block header and the
    /// flush make them no smaller, and the CPU is not worth it.
    public static let compressionThreshold = 64

    private var readInterest = PollInterest.read
    private var readReady = true
    private var endOfStream = false
    /// The peer ended its side of TCP (a FIN, not an error) after its Close, which the
    /// owner answers (`answersCloseItself`): it may still read, so what the owner sends and
    /// its answer are still written (`writesAfterPeersShutdown`).
    private var shutDownAfterClose = false
    private var writeBlocked: PollInterest?
    private var outputShutDown = false
    private var discardedAfterClose = 0
    private var serviceQueued = false
    /// The peer's shutdown was seen (and reported) while reading was paused.
    private var shutDownWhilePaused = false
    /// Reading stops while the owner cannot take more (its output is behind).
    /// The time it lasts counts toward neither the close timeout nor a ping's timeout: the
    /// peer's answer may be waiting behind what we have not read.
    public var pausesReading = false {
        didSet {
            guard oldValue != pausesReading else { return }
            readingWaited(at: .now())
            if !pausesReading { scheduleService() }
        }
    }
    /// Our Close waits while this is true (the owner is still delivering what came before
    /// it, and may yet replace it with another code through `close`).
    public var holdsClose = false {
        didSet { if oldValue && !holdsClose { scheduleService() } }
    }
    /// The peer's Close is answered by the owner's `close(_:)`, not echoed at once: until
    /// then the owner may still send (a program's output after its client closed). Time
    /// without that answer counts toward no timeout: the owner bounds it. Set before `start`.
    public var answersCloseItself: Bool {
        get { !core.echoesClose }
        set { core.echoesClose = !newValue }
    }

    // The ending.
    public private(set) var ending: ConnectionEnding?
    private var loss: ConnectionLoss?
    private var weStartedClose = false
    /// When the ending began (barrier ping or Close queued) and how long it may go without
    /// progress; `endingMark`: bytes queued before it (writing them is progress).
    private var closingSince: Instant?
    private var progressDeadline: Instant?
    private var hardDeadline: Instant?
    private var endingMark: UInt64 = 0
    private var closeWrittenMark: UInt64?
    private var closeAfterQueue: ClosePayload?
    private var barrier: (payload: [UInt8], close: ClosePayload)?
    /// Set at the barrier ping: until this instant (and the peer's Close), data from the
    /// peer counts as progress. A peer that sends is still working through our messages
    /// (its replies; Python `websockets` reads our Close only once its handler has caught
    /// up), but one that streams forever must still end.
    private var incomingCountsUntil: Instant?
    /// How long, in close timeouts from the barrier ping, data from the peer keeps the
    /// ending waiting.
    public static let barrierIncomingLimit = 10.0
    private var pings: PingTracker
    /// Random payload of the end-of-input ping: a ping the owner sends cannot mimic it.
    private let barrierPayload: [UInt8]

    /// Most bytes read (and dropped) after the connection is closed or failed.
    public static let drainLimit = 1 << 20
    /// Longest wait for the peer to close TCP once both Close frames are exchanged.
    public static let tcpCloseWait = 1.0
    /// Read the socket again only after at least this much room is free in the buffer.
    static let minimumRead = 16 * 1024
    /// Payloads up to this size are copied next to their header instead of referenced.
    public static let copyLimit = 4096

    /// - Parameters:
    ///   - stream: the connected stream, after the opening handshake.
    ///   - core: the protocol state machine in the connection's role.
    ///   - received: bytes already read after the handshake head, at `received.base + parsed`.
    public init(loop: EventLoop, stream: ByteStream, core: WebSocketConnection, options: ConnectionOptions = .init(),
                received: ByteBuffer? = nil, parsed: Int = 0, delegate: ConnectionDelegate) {
        self.loop = loop
        self.stream = stream
        self.core = core
        self.options = options
        self.delegate = delegate
        receiveBuffer = received
        self.parsed = parsed
        pings = PingTracker(interval: options.pingInterval ?? options.pingTimeout, timeout: options.pingTimeout)
        // Text, so that a peer logging ping payloads logs something readable; one 64-bit
        // draw gives the 16 hex digits (a draw each was 16 getrandom calls per connection).
        var random = SystemRandomNumberGenerator()
        let bits = random.next()
        let digits = Array("0123456789abcdef".utf8)
        barrierPayload = Array("wspipe:eof:".utf8) + (0..<16).map { digits[Int((bits >> (UInt64($0) * 4)) & 15)] }
        setUpCompression(core: core)
    }

    /// What the loop's closures hold: the driver from start until it ends, so a started
    /// driver lives until then whether or not its owner keeps a reference, and nothing
    /// after. (Not a weak reference: that gives the driver a side table, and then every
    /// retain and release of it anywhere takes the slow path: 28 % of a broadcast server's
    /// CPU with 1,000 clients, each driver retained once per message sent.)
    private final class LoopReference {
        var driver: ConnectionDriver?
    }
    private let loopReference = LoopReference()

    /// Starts: reports bytes that came with the handshake, then services the socket.
    public func start() {
        let reference = loopReference
        reference.driver = self
        watch = loop.watch(stream.fileDescriptor) { events in reference.driver?.handle(events) }
        timer = loop.timer { reference.driver?.service() }
        pings.start(at: .now())
        processReceived()
        scheduleService()
    }

    // MARK: - What the owner does

    /// The state of the closing handshake.
    public var state: WebSocketConnection.State { core.state }
    /// Our side: the client masks what it sends, the server does not.
    public var role: Role { core.role }
    /// Whether data may still be sent.
    public var canSendData: Bool { acceptsData && core.canSendData }
    /// False from the moment a Close is asked for (or arrives, or the connection ends):
    /// one stored flag, read for every message sent.
    private var acceptsData = true
    /// Bytes waiting to be written: framed, plus messages not framed yet.
    public var queuedBytes: Int { outbound.byteCount + waiting.byteCount }
    /// The round trip of the last answered keepalive ping, in seconds.
    public var lastRoundTrip: Double? { pings.lastRoundTrip }
    /// The Close we sent and the one we received.
    public var closeSent: ClosePayload? { core.closeSent }
    public var closeReceived: ClosePayload? { core.closeReceived }
    /// Data messages given to `send` (counted at their last frame): a server's per-client
    /// idle check sees traffic toward the client with it.
    public private(set) var messagesSent: UInt64 = 0

    /// Whether a send is framed at once: nothing waits unframed and the socket queue has
    /// room (else it waits as a message, so control frames need not queue behind it).
    private var framesNow: Bool { waiting.isEmpty && outbound.byteCount < options.queueLimit }

    /// Sends one data frame (a whole message with `fin`, or a fragment). `owner` keeps the
    /// payload alive; a large payload is masked in place there, so do not change it after.
    /// Does nothing once `canSendData` is false.
    public func send(_ opcode: Opcode, fin: Bool = true, _ payload: UnsafeMutableRawPointer?, count: Int, in owner: ByteBuffer?) {
        guard acceptsData else { return }
        if fin { messagesSent &+= 1 }
        if framesNow {
            frame(opcode, fin: fin, payload, count: count, in: owner)
        } else {
            waiting.append(opcode, fin: fin, payload, count: count, in: owner, copyLimit: ConnectionDriver.copyLimit)
        }
        if !serviceQueued { scheduleService() }
    }

    /// Sends one whole message already deflated for this connection's agreed parameters
    /// (RFC 7692 §7.2.1, the tail removed), as one frame with RSV1: a broadcast compressed
    /// once for every client without server context takeover. `payloadSize` is the size
    /// before deflating (for the counts). `owner` keeps the bytes; they are never changed
    /// (a server does not mask). Call only when `compression` is agreed.
    public func sendCompressed(_ opcode: Opcode, _ payload: UnsafeMutableRawPointer, count: Int, in owner: ByteBuffer?, payloadSize: Int) {
        guard acceptsData, deflateConfiguration != nil else { return }
        if framesNow {
            framePrecompressed(opcode, payload, count: count, in: owner, payloadSize: payloadSize)
        } else {
            waiting.append(opcode, fin: true, payload, count: count, in: owner, copyLimit: ConnectionDriver.copyLimit,
                           precompressedSize: payloadSize)
        }
        if !serviceQueued { scheduleService() }
    }

    /// Sends `messages` whole messages already encoded as frames for the server role
    /// (unmasked, RSV bits clear: valid on any server connection, with extensions or
    /// without). The bytes stay in `owner` and are referenced, not copied, so one buffer
    /// goes to every client of a broadcast; they must not change afterwards. Does nothing
    /// once `canSendData` is false.
    public func sendFrames(_ frames: UnsafeMutableRawPointer, count: Int, in owner: ByteBuffer, messages: Int) {
        precondition(!core.role.masksOutgoingFrames, "encoded frames are a server's (unmasked)")
        guard acceptsData else { return }
        messagesSent &+= UInt64(messages)
        if framesNow {
            outbound.appendEncoded(owner, frames, count: count)
        } else {
            waiting.appendEncoded(owner, frames, count: count)
        }
        if !serviceQueued { scheduleService() }
    }

    /// Sends a data frame from bytes (copied).
    public func send(_ opcode: Opcode, fin: Bool = true, bytes: [UInt8]) {
        var copy = bytes
        copy.withUnsafeMutableBytes { send(opcode, fin: fin, $0.baseAddress, count: $0.count, in: nil) }
    }

    /// Calls `connection(_:wroteThrough:)` with `token` once every byte of what was sent
    /// before is written to the socket (tokens ascending; a report may cover several). False,
    /// and nothing is reported, once data is no longer accepted (what was just sent was
    /// dropped). Bytes never written (the connection ended first) are never reported.
    public func reportWhenWritten(_ token: UInt64) -> Bool {
        guard acceptsData else { return false }
        if waiting.isEmpty {
            writtenMarks.add(token: token, end: outbound.totalQueued)
        } else {
            writtenMarks.add(token: token, afterWaiting: waiting.count)
        }
        if !serviceQueued { scheduleService() }
        return true
    }

    /// Queues a Ping (at most 125 bytes) behind the messages sent before it and ahead of
    /// those sent after (unless messages wait unframed: control frames go ahead of them).
    /// False once closing.
    @discardableResult
    public func ping(_ payload: [UInt8]) -> Bool {
        guard ending == nil, core.ping(payload) else { return false }
        if framesNow { queueControlFrames() }
        scheduleService()
        return true
    }

    /// Starts the closing handshake after the messages already sent. A Close not yet
    /// written (waiting for `holdsClose`, or for the barrier ping) is replaced by this one.
    /// `within`: a hard limit in seconds for the whole ending, below the close timeout.
    public func close(_ payload: ClosePayload, within limit: Double? = nil) {
        if let limit {
            let cap = Instant.now().adding(seconds: limit)
            hardDeadline = min(hardDeadline ?? cap, cap)
        }
        guard core.closeSent == nil, ending == nil else { scheduleService(); return }
        acceptsData = false
        barrier = nil  // a Close asked for now replaces one waiting for the barrier ping
        incomingCountsUntil = nil
        if closeAfterQueue == nil { beginEnding() }
        closeAfterQueue = payload
        scheduleService()
    }

    /// Closes once the peer has read everything sent so far: a Ping goes behind the
    /// messages, and the Close follows its Pong (§5.5.2: pongs answer in order). Without a
    /// Pong within the close timeout the Close goes anyway, with a short wait for its echo.
    public func closeAfterDelivery(_ payload: ClosePayload) {
        guard core.closeSent == nil, closeAfterQueue == nil, barrier == nil, ending == nil else { return }
        acceptsData = false
        beginEnding()
        barrier = (barrierPayload, payload)
        queueBarrierIfReady()
        scheduleService()
    }

    /// Ends the connection at the latest `seconds` from now, whatever is under way (the
    /// time reading is paused counts here, unlike for the close timeout): for an owner that
    /// has stopped reading and whose ending must not wait for it.
    public func limitEnding(within seconds: Double) {
        let cap = Instant.now().adding(seconds: seconds)
        hardDeadline = min(hardDeadline ?? cap, cap)
        scheduleService()
    }

    /// Ends the connection at once without a closing handshake.
    public func abandon() {
        guard ending == nil else { return }
        loss = loss ?? .abandoned
        finish()
    }

    // MARK: - Framing

    private func frame(_ opcode: Opcode, fin: Bool, _ payload: UnsafeMutableRawPointer?, count: Int, in owner: ByteBuffer?) {
        if deflater != nil, frameCompressed(opcode, fin: fin, payload, count: count) { return }
        let header = core.makeHeader(opcode: opcode, fin: fin, payloadLength: count)
        if count <= ConnectionDriver.copyLimit || owner == nil {
            outbound.appendFrame(header, copying: payload, count: count)
        } else if let owner, let payload {
            outbound.appendFrame(header, inPlace: owner, payload, count: count)
        }
    }

    private func framePrecompressed(_ opcode: Opcode, _ payload: UnsafeMutableRawPointer?, count: Int, in owner: ByteBuffer?,
                                    payloadSize: Int) {
        let header = core.makeHeader(opcode: opcode, fin: true, rsv: .rsv1, payloadLength: count)
        if count <= ConnectionDriver.copyLimit || owner == nil {
            outbound.appendFrame(header, copying: payload, count: count)
        } else if let owner, let payload {
            outbound.appendFrame(header, inPlace: owner, payload, count: count)
        }
        compressionOut.wire += UInt64(count)
        compressionOut.payload += UInt64(payloadSize)
        compressionOut.messages += 1
    }

    /// Frames waiting messages while the socket queue has room.
    private func frameWaiting() {
        while outbound.byteCount < options.queueLimit, let message = waiting.popFirst() {
            if message.encoded, let owner = message.owner, let start = message.start {
                outbound.appendEncoded(owner, start, count: message.count)
            } else if let size = message.precompressedSize {
                message.withPayload { framePrecompressed(message.opcode, $0, count: $1, in: message.owner, payloadSize: size) }
            } else {
                message.withPayload { frame(message.opcode, fin: message.fin, $0, count: $1, in: message.owner) }
            }
            if writtenMarks.waitsForFraming { writtenMarks.framedOne(total: outbound.totalQueued) }
        }
        releaseQueuedClose()
        queueBarrierIfReady()
    }

    /// The Close goes only after every waiting message is framed (nothing follows a Close).
    private func releaseQueuedClose() {
        guard let payload = closeAfterQueue, waiting.isEmpty, !holdsClose else { return }
        closeAfterQueue = nil
        endingMark = outbound.totalQueued
        // Ours only if it goes first: a peer's Close read before this (behind the barrier's
        // Pong, in the same read) was echoed by the core, and the handshake is the peer's.
        if core.closeReceived == nil { weStartedClose = true }
        core.close(payload)
        delegate?.connection(self, note: .closeQueued(payload))
        queueControlFrames()
        closeWrittenMark = outbound.totalQueued
    }

    private func queueBarrierIfReady() {
        guard let pending = barrier, waiting.isEmpty, closingSince != nil, progressDeadline != nil,
              !pingQueuedForBarrier else { return }
        pingQueuedForBarrier = true
        endingMark = outbound.totalQueued
        if core.ping(pending.payload) {
            incomingCountsUntil = Instant.now().adding(seconds: options.closeTimeout * ConnectionDriver.barrierIncomingLimit)
            delegate?.connection(self, note: .barrierQueued)
            queueControlFrames()
        } else {
            releaseBarrier()
        }
    }
    private var pingQueuedForBarrier = false

    /// The Close goes out from `service` (after the owner has seen this read's messages).
    private func releaseBarrier() {
        guard let pending = barrier else { return }
        barrier = nil
        closeAfterQueue = pending.close
        scheduleService()
    }

    private func beginEnding() {
        let now = Instant.now()
        endingMark = .max  // until the barrier ping or Close is queued, every byte written is progress
        if closingSince == nil { closingSince = now }
        progressDeadline = now.adding(seconds: options.closeTimeout)
    }

    /// Reading is paused for the owner, or has just resumed: the timeouts that wait for
    /// the peer's answers start over.
    private func readingWaited(at now: Instant) {
        progressed(at: now)
        pings.readingWaited(at: now)
    }

    private func progressed(at now: Instant) {
        guard progressDeadline != nil else { return }
        progressDeadline = now.adding(seconds: options.closeTimeout)
    }

    /// The peer sent something after the barrier ping: progress, up to `until`.
    @inline(never)
    private func receivedAfterBarrier(until: Instant) {
        let now = Instant.now()
        guard now < until, let deadline = progressDeadline else { return }
        progressDeadline = max(deadline, min(now.adding(seconds: options.closeTimeout), until))
    }

    // MARK: - The loop's side

    private func scheduleService() {
        guard !serviceQueued, ending == nil, watch != nil else { return }
        serviceQueued = true
        let reference = loopReference
        loop.later { reference.driver?.service() }
    }

    private var drained: Bool { !endOfStream && discardedAfterClose > ConnectionDriver.drainLimit }

    private var mayRead: Bool {
        !endOfStream && discardedAfterClose <= ConnectionDriver.drainLimit && !pausesReading
    }

    private func handle(_ events: IOEvents) {
        if shutDownAfterClose && loss == nil && !events.isDisjoint(with: [.error, .hangUp]) {
            // Gone both ways now: nothing written would reach it.
            loss = .peerClosedTCP(afterOurClose: core.closeSent != nil)
        }
        if pausesReading && !shutDownWhilePaused && !events.isDisjoint(with: [.readHangUp, .error, .hangUp]) {
            shutDownWhilePaused = true
            delegate?.connectionPeerShutDownWhilePaused(self)
        }
        if drained && !events.isDisjoint(with: [.readHangUp, .error, .hangUp]) { endOfStream = true }
        let error = !events.isDisjoint(with: [.error, .hangUp])
        if events.contains(IOEvents(readInterest)) || error { readReady = true }
        if let blocked = writeBlocked, events.contains(IOEvents(blocked)) || error { writeBlocked = nil }
        service()
    }

    private func service() {
        serviceQueued = false
        guard ending == nil else { return }
        if readReady && mayRead { readSocket() }
        guard ending == nil else { return }
        checkTimers(now: .now())
        // Frame waiting messages as the socket takes the queue, until it is full.
        // Pongs go ahead of waiting messages; one held back behind an unwritten pong
        // follows once the socket has taken that.
        repeat {
            queueControlFrames()
            frameWaiting()
            if writeBlocked == nil { flush() }
        } while writeBlocked == nil && (!waiting.isEmpty || core.hasOutboundControl) && !outputShutDown && loss == nil
        if finishedStep() {
            finish()
            return
        }
        var interest: IOEvents = []
        if mayRead && !readReady { interest.insert(IOEvents(readInterest)) }
        if let blocked = writeBlocked { interest.insert(IOEvents(blocked)) }
        if drained { interest.insert(.readHangUp) }
        // Paused, the socket is out of epoll: a peer that goes away would go unnoticed.
        if pausesReading && !endOfStream && !shutDownWhilePaused { interest.insert(.readHangUp) }
        loop.setInterest(watch, interest)
        // readReady stays set while a read may find more (bytes the stream holds count: a
        // read goes on past a short one then). Buffered input after a read met EAGAIN is a
        // TLS record not complete yet: it waits for the socket like everything else.
        if readReady && mayRead {
            scheduleService()  // more to read: come back after a look at the other descriptors
        } else if mayRead && !options.keepsBuffersWhenIdle {
            releaseIdleBuffers()
        }
        loop.arm(timer, at: nextDeadline)
    }

    private func readSocket() {
        var reads = 0
        while mayRead && reads < 16 && ending == nil {
            if receiveBuffer == nil || receiveBuffer!.free < ConnectionDriver.minimumRead {
                // Pieces of the old one may still wait in the owner: they keep it alive.
                if receiveBuffer != nil { delegate?.connectionWillReleaseReceiveBuffer(self) }
                if receiveBuffer == nil { receiveBuffer = ByteBuffer(capacity: options.receiveBufferSize) }
                else { ByteBuffer.reuse(&receiveBuffer!, orMake: options.receiveBufferSize) }
                parsed = 0
            }
            let buffer = receiveBuffer!
            let room = buffer.free
            switch stream.read(into: buffer.end, count: room) {
            case .done(let n):
                buffer.count += n
                reads += 1
                if core.state == .closed || core.state == .closeReceived {
                    // After the peer's Close or a failure, bytes are read only so the peer gets
                    // to read our Close (closing with unread data sends a reset that can
                    // destroy it). A peer that keeps streaming gets a megabyte of that.
                    discardedAfterClose += n
                    parsed = buffer.count
                    if discardedAfterClose > ConnectionDriver.drainLimit { return }
                }
                processReceived()
                if let until = incomingCountsUntil { receivedAfterBarrier(until: until) }
                if n < room && !stream.hasBufferedInput {
                    readReady = false
                    return
                }
            case .wouldBlock(let interest):
                readInterest = interest
                readReady = false
                return
            case .endOfStream:
                endOfStream = true
                if core.state == .closeReceived && loss == nil { shutDownAfterClose = true }
                if core.closeReceived == nil && loss == nil {
                    loss = .peerClosedTCP(afterOurClose: core.closeSent != nil)
                }
                return
            case .failed(let why):
                endOfStream = true
                if core.closeReceived == nil && loss == nil { loss = .readFailed(why) }
                return
            }
        }
    }

    /// Hands everything new in the receive buffer to the protocol and reports the events.
    private func processReceived() {
        guard let buffer = receiveBuffer, parsed < buffer.count, let delegate else { return }
        // Mutable: a server unmasks client payloads in place.
        let input = UnsafeMutableRawBufferPointer(start: buffer.base, count: buffer.count)
        do throws(ReceiveError) {
            while let event = try core.receive(input, &parsed) {
                switch event {
                case .messageStart(let kind):
                    if inflater != nil { beginInflating(kind) }
                    delegate.connection(self, didStartMessage: kind)
                case .messageData(let range):
                    if inflating {
                        try inflate(buffer.base + range.lowerBound, count: range.count, delegate: delegate)
                    } else {
                        delegate.connection(self, didReceive: buffer.base + range.lowerBound, count: range.count, in: buffer)
                    }
                case .messageEnd:
                    if inflating { try finishInflating(delegate: delegate) }
                    delegate.connectionDidEndMessage(self)
                case .ping(let payload):
                    // The pong goes out ahead of data the owner sends after this point (an
                    // echo of a message the ping interrupted): peers expect it first.
                    queueControlFrames()
                    delegate.connection(self, didReceivePing: payload)
                case .pong(let payload):
                    if barrier != nil && payload == barrierPayload {
                        delegate.connection(self, note: .barrierAnswered)
                        progressed(at: .now())
                        releaseBarrier()
                    } else {
                        let rtt = pings.pongReceived(payload, at: .now())
                        delegate.connection(self, didReceivePong: payload, roundTrip: rtt)
                    }
                case .close(let payload):
                    peerClosed(payload, delegate: delegate)
                }
            }
        } catch {
            delegate.connection(self, didFail: error)
            acceptsData = false
            waiting.removeAll()
            barrier = nil
            closeAfterQueue = nil
            let cap = Instant.now().adding(seconds: min(options.closeTimeout, 1))
            hardDeadline = min(hardDeadline ?? cap, cap)
        }
        delegate.connectionDidProcessInput(self)
    }

    /// The peer's Close arrived. Out of line: once per connection, and its body inlined into
    /// `processReceived` cost that loop 2 instructions per message (scripts/profile).
    @inline(never)
    private func peerClosed(_ payload: ClosePayload, delegate: ConnectionDelegate) {
        delegate.connection(self, didReceiveClose: payload)
        if core.state == .closeReceived {
            // The owner answers (`answersCloseItself`); a barrier's Close need not wait for a
            // Pong that will not come.
            if barrier != nil { releaseBarrier() }
        } else {
            acceptsData = false
            barrier = nil
            closeAfterQueue = nil
            waiting.removeAll()
        }
        if closingSince == nil {
            beginEnding()
            endingMark = outbound.totalQueued
        }
    }

    /// Moves the core's control frames to the queue. At most one pong waits unwritten in
    /// the queue: while it has not left, the next one waits in the core, which then keeps
    /// only the most recent (RFC 6455 §5.5.3), so a peer that floods pings without reading
    /// grows neither our memory nor the queue (which would hold back data: stdin, echoes).
    /// A peer that reads gets every ping answered: the socket is tried first. A Close or
    /// our own ping always goes at once (after the pong waiting, if any).
    private func queueControlFrames() {
        guard core.hasOutboundControl else { return }
        if core.hasPendingPong && outbound.holdsUnwrittenPong {
            if writeBlocked == nil { flush(reportsRoom: false) }
            core.keepOnlyMostRecentPong()
            if outbound.holdsUnwrittenPong && !core.hasOutboundCloseOrPing { return }
        }
        let carryingPong = core.hasPendingPong
        outbound.appendControl(core.takeOutboundControl(), carryingPong: carryingPong)
    }

    /// The socket took bytes while the owner was not to be called (in the middle of a
    /// read): `connectionHasRoom` is due at the next flush.
    private var roomUnreported = false

    private func flush(reportsRoom: Bool = true) {
        defer {
            if reportsRoom && roomUnreported && ending == nil {
                roomUnreported = false
                if queuedBytes < options.queueLimit && canSendData { delegate?.connectionHasRoom(self) }
            }
            if reportsRoom, ending == nil, let end = writtenMarks.firstEnd, end <= outbound.totalWritten,
               let token = writtenMarks.takeReached(written: outbound.totalWritten) {
                delegate?.connection(self, wroteThrough: token)
            }
        }
        guard !outbound.isEmpty || stream.hasPendingOutput, !outputShutDown else { return }
        let before = outbound.totalWritten
        switch outbound.write(to: stream, vectors: loop.vectors) {
        case .done, .endOfStream:
            break
        case .wouldBlock(let interest):
            writeBlocked = interest
        case .failed(let why):
            outbound.discard()
            waiting.removeAll()
            outputShutDown = true
            if core.closeReceived == nil && loss == nil { loss = .writeFailed(why) }
        }
        let now = Instant.now()
        if outbound.totalWritten > before {
            pings.written(upTo: outbound.totalWritten, at: now)
            if before < endingMark { progressed(at: now) }
            roomUnreported = true
        }
    }

    private func checkTimers(now: Instant) {
        // Our Close waits for the owner's output, or reading waits for it (the peer's answer
        // may be behind what we have not read yet): that is progress of ours, not silence
        // of the peer's.
        if holdsClose && closeAfterQueue != nil || awaitsOwnersAnswer { progressed(at: now) }
        if pausesReading { readingWaited(at: now) }
        if pings.pingDue(at: now), core.state == .open {
            let payload = pings.nextPayload()
            core.ping(payload)
            queueControlFrames()
            pings.queued(payload, endingAt: outbound.totalQueued, at: now)
            delegate?.connection(self, note: .pingQueued(payload.count))
        }
        if pongTimeoutCounts, let overdue = pings.overdue(at: now), loss == nil {
            loss = .pingTimeout(seconds: overdue)
        }
        if barrier != nil, let deadline = progressDeadline, now >= deadline {
            // The peer answered nothing in time: Close anyway, with a short wait for its echo.
            let waited = closingSince.map { now.seconds(since: $0) } ?? options.closeTimeout
            delegate?.connection(self, note: .barrierUnanswered(waited: waited, messages: messagesSent))
            let cap = now.adding(seconds: min(options.closeTimeout, ConnectionDriver.tcpCloseWait))
            hardDeadline = min(hardDeadline ?? cap, cap)
            progressDeadline = nil
            incomingCountsUntil = nil
            releaseBarrier()
        }
    }

    /// True when the connection is over.
    private func finishedStep() -> Bool {
        if loss != nil || endOfStream && !writesAfterPeersShutdown {
            // Deliver what already arrived and send what is queued, if the socket takes it.
            if !endOfStream { readSocket() }
            if writeBlocked == nil { flush() }
            return true
        }
        let now = Instant.now()
        if core.state == .closed && outbound.isEmpty && !stream.hasPendingOutput && !outputShutDown {
            // Both Close frames are exchanged (or we failed the connection): end our side and
            // wait, up to the close deadline, for the peer to close TCP (RFC 6455 §7.1.1).
            stream.shutdownOutput()
            outputShutDown = true
            let tcp = now.adding(seconds: min(ConnectionDriver.tcpCloseWait, options.closeTimeout))
            hardDeadline = min(hardDeadline ?? tcp, tcp)
            progressDeadline = nil
        }
        if let deadline = hardDeadline, now >= deadline { return true }
        if let deadline = progressDeadline, now >= deadline { return true }
        return false
    }

    /// A missing Pong ends the connection only until a Close arrives or we failed it: after
    /// that no frame comes (the owner's answer, then the wait for TCP, are left).
    private var pongTimeoutCounts: Bool { core.state == .open || core.state == .closeSent }

    /// The peer's Close waits for the owner's answer (`answersCloseItself`).
    private var awaitsOwnersAnswer: Bool { core.state == .closeReceived && closeAfterQueue == nil }

    /// The peer shut its side after its Close (a client that half-closes once it has said
    /// all): the owner's output and answer still go, until written (then the connection
    /// ends: no wait for a TCP close that came already) or the write fails.
    private var writesAfterPeersShutdown: Bool {
        shutDownAfterClose && !outputShutDown
            && (core.state == .closeReceived || !waiting.isEmpty || !outbound.isEmpty || stream.hasPendingOutput)
    }

    private var nextDeadline: Instant? {
        // Keepalive pings only while open, pong deadlines only while they count: a deadline
        // that passes without being acted on must not keep the timer in the past.
        var soonest = core.state == .open ? pings.nextDeadline : pongTimeoutCounts ? pings.pongDeadline : nil
        for deadline in [hardDeadline, progressDeadline].compactMap({ $0 }) {
            soonest = soonest.map { min($0, deadline) } ?? deadline
        }
        return soonest
    }

    /// Lets go of the receive buffer and the queue's arena while nothing is under way, so an
    /// idle connection holds no buffer (they return to the pool).
    private func releaseIdleBuffers() {
        if let buffer = receiveBuffer, parsed >= buffer.count {
            delegate?.connectionWillReleaseReceiveBuffer(self)
            receiveBuffer = nil
            parsed = 0
            // The inflater's 64 KiB output buffer too (pieces handed out keep theirs): held
            // by every idle deflate client, it was most of what 1,000 of them cost once
            // their traffic had touched it (scripts/bench-server, deflate row).
            if !inflating { inflater?.releaseBuffer() }
            if !sendingCompressed { deflater?.releaseScratch() }
        }
        if outbound.isEmpty { outbound.releaseArena() }
    }

    private func finish() {
        guard ending == nil else { return }
        let result: ConnectionEnding
        if let failure = core.failure {
            result = .failed(failure)
        } else if let received = core.closeReceived {
            result = .closed(ClosingHandshake(initiatedByUs: weStartedClose, sent: core.closeSent, received: received))
        } else if let loss {
            result = .lost(loss)
        } else {
            let now = Instant.now()
            let written = closeWrittenMark.map { outbound.totalWritten >= $0 } ?? false
            // The bound on the peer's data after the barrier ping ended the wait, not silence.
            let capped = progressDeadline != nil && progressDeadline == incomingCountsUntil
            result = .timedOut(CloseWait(limit: options.closeTimeout,
                                         waited: closingSince.map { now.seconds(since: $0) } ?? 0, closeWritten: written,
                                         peerKeptSending: capped))
        }
        if core.closeReceived == nil && core.failure == nil { core.abandon() }
        acceptsData = false
        ending = result
        loop.remove(watch)
        loop.arm(timer, at: nil)
        stream.close()
        outbound.discard()
        waiting.removeAll()
        receiveBuffer = nil
        // zlib's state goes with the connection.
        inflater = nil
        deflater = nil
        let owner = delegate
        delegate = nil
        owner?.connection(self, didEnd: result)
        loopReference.driver = nil
    }
}

/// Messages sent while the socket queue was full, not framed yet (masking happens when
/// they are framed). Small payloads are copied here; large ones stay in their owner.
struct MessageQueue {
    struct Message {
        let opcode: Opcode
        let fin: Bool
        let owner: ByteBuffer?
        let start: UnsafeMutableRawPointer?
        var count: Int
        let copy: [UInt8]?
        /// Already deflated (`sendCompressed`): the size before.
        var precompressedSize: Int? = nil
        /// Whole frames already encoded (`sendFrames`), referenced in `owner`.
        var encoded = false

        func withPayload(_ body: (UnsafeMutableRawPointer?, Int) -> Void) {
            if var bytes = copy {
                bytes.withUnsafeMutableBytes { body($0.baseAddress, $0.count) }
            } else {
                body(start, count)
            }
        }
    }

    private var messages: [Message] = []
    private var head = 0
    private(set) var byteCount = 0

    var isEmpty: Bool { head == messages.count }
    /// Entries waiting (a broadcast's consecutive batches are one).
    var count: Int { messages.count - head }

    mutating func append(_ opcode: Opcode, fin: Bool, _ payload: UnsafeMutableRawPointer?, count: Int,
                         in owner: ByteBuffer?, copyLimit: Int, precompressedSize: Int? = nil) {
        byteCount += count
        if count <= copyLimit || owner == nil {
            let bytes = payload.map { Array(UnsafeRawBufferPointer(start: $0, count: count)) } ?? []
            messages.append(Message(opcode: opcode, fin: fin, owner: nil, start: nil, count: count, copy: bytes,
                                    precompressedSize: precompressedSize))
        } else {
            messages.append(Message(opcode: opcode, fin: fin, owner: owner, start: payload, count: count, copy: nil,
                                    precompressedSize: precompressedSize))
        }
    }

    /// Frames that continue the last entry's in the same buffer extend it (a broadcast's
    /// consecutive batches, for a client that is behind).
    mutating func appendEncoded(_ owner: ByteBuffer, _ start: UnsafeMutableRawPointer, count: Int) {
        byteCount += count
        if let last = messages.indices.last, last >= head, messages[last].encoded, messages[last].owner === owner,
           messages[last].start.map({ $0 + messages[last].count }) == start {
            messages[last].count += count
            return
        }
        messages.append(Message(opcode: .binary, fin: true, owner: owner, start: start, count: count, copy: nil,
                                encoded: true))
    }

    mutating func popFirst() -> Message? {
        guard head < messages.count else { return nil }
        let message = messages[head]
        head += 1
        byteCount -= message.count
        if head == messages.count {
            messages.removeAll(keepingCapacity: true)
            head = 0
        }
        return message
    }

    mutating func removeAll() {
        messages.removeAll()
        head = 0
        byteCount = 0
    }
}

// MARK: - permessage-deflate (RFC 7692 §6, §7.2)

extension ConnectionDriver {
    /// Makes the inflater (and, lazily on the first compressed send, the deflater) when
    /// the core's extensions include an agreed `PerMessageDeflate`. zlib must be loaded.
    private func setUpCompression(core: WebSocketConnection) {
        guard !core.extensions.isEmpty,
              let deflate = core.extensions.lazy.compactMap({ $0 as? PerMessageDeflate }).first,
              let agreed = deflate.configuration else { return }
        deflateConfiguration = agreed
        inflater = Inflater(windowBits: max(agreed.incomingWindowBits, 9), limit: core.maximumMessageSize)
        deflater = Deflater(windowBits: agreed.outgoingWindowBits, memoryLevel: deflate.memoryLevel,
                            resetsContext: agreed.outgoingNoContextTakeover)
    }

    /// The agreed permessage-deflate configuration, if any.
    public var compression: DeflateConfiguration? { deflateConfiguration }

    @inline(never)
    private func beginInflating(_ kind: MessageKind) {
        inflating = core.receivingMessageRSV.contains(.rsv1)
        if inflating, let inflater {
            inflater.begin(text: kind == .text)
            compressionIn.messages += 1
        }
    }

    @inline(never)
    private func inflate(_ bytes: UnsafeMutableRawPointer, count: Int, delegate: ConnectionDelegate) throws(ReceiveError) {
        guard let inflater else { return }
        compressionIn.wire += UInt64(count)
        // The closure runs before this returns, while the caller holds both: unretained
        // captures spare a retain and a release per piece each, slow ones for the driver
        // (the loop's weak references give it a side table): 20 % of wspipe's CPU on a
        // feed of small compressed messages.
        let driver = Unmanaged.passUnretained(self)
        unowned(unsafe) let owner = delegate
        do {
            try inflater.feed(bytes, count: count) { buffer, start, n in
                driver._withUnsafeGuaranteedRef { owner.connection($0, didReceive: start, count: n, in: buffer) }
            }
        } catch {
            inflating = false
            core.fail(error)
            throw error
        }
    }

    @inline(never)
    private func finishInflating(delegate: ConnectionDelegate) throws(ReceiveError) {
        inflating = false
        guard let inflater, let agreed = deflateConfiguration else { return }
        let before = inflater.messageSize
        let driver = Unmanaged.passUnretained(self)  // as in inflate(_:count:delegate:)
        unowned(unsafe) let owner = delegate
        do {
            try inflater.finish(resetsContext: agreed.incomingNoContextTakeover) { buffer, start, n in
                driver._withUnsafeGuaranteedRef { owner.connection($0, didReceive: start, count: n, in: buffer) }
            }
        } catch {
            core.fail(error)
            throw error
        }
        _ = before
        compressionIn.payload += inflater.messageSize
    }

    /// Frames a data frame compressed, if its message is (or, for a first frame, should
    /// be): RSV1 on the first frame only. False: frame it as it is. A non-final frame whose
    /// bytes zlib keeps for now is not framed: the message's next frame takes its place
    /// (with the first frame's opcode and RSV1 if none went out yet).
    @inline(never)
    fileprivate func frameCompressed(_ opcode: Opcode, fin: Bool, _ payload: UnsafeMutableRawPointer?, count: Int) -> Bool {
        guard let deflater, !opcode.isControl else { return false }
        if opcode != .continuation {
            sendingCompressed = count >= ConnectionDriver.compressionThreshold
            unsentOpcode = sendingCompressed ? opcode : nil
        }
        guard sendingCompressed else { return false }
        if fin { sendingCompressed = false }
        guard let compressed = deflater.compress(payload.map { UnsafeRawPointer($0) }, count: count, final: fin) else {
            // zlib could not make its state: this message (a first frame) goes as it is.
            if opcode != .continuation { sendingCompressed = false; unsentOpcode = nil; return false }
            return false
        }
        compressionOut.payload += UInt64(count)
        if !fin && compressed.count == 0 { return true }
        let first = unsentOpcode
        unsentOpcode = nil
        let header = core.makeHeader(opcode: first ?? .continuation, fin: fin, rsv: first == nil ? [] : .rsv1,
                                     payloadLength: compressed.count)
        outbound.appendFrame(header, copying: compressed.baseAddress, count: compressed.count)
        compressionOut.wire += UInt64(compressed.count)
        if first != nil { compressionOut.messages += 1 }
        return true
    }
}
