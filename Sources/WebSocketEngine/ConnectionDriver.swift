import Glibc
import WebSocketCore
import WebSocketTransport

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
    /// Gets every event. Set by the server's connection when it hands its driver straight
    /// to the mode's handler (`ServerConnection.start`).
    internal(set) var delegate: ConnectionDelegate?
    /// Told of the ending after the delegate: the server's connection when the mode's
    /// handler is the delegate, so the server's bookkeeping costs nothing per message.
    var endObserver: ConnectionEndObserver?
    private let stream: ByteStream
    private var watch: EventLoop.Watch!
    /// Made when a deadline first comes (pings, a close under way): an idle connection
    /// without either has none (56 bytes each).
    private var timer: EventLoop.Timer?
    /// Tests: whether the timer has been made.
    var hasTimer: Bool { timer != nil }

    // Hot state, mutated per message: exclusivity checks off (single thread).
    @exclusivity(unchecked) public internal(set) var core: WebSocketConnection
    @exclusivity(unchecked) var outbound = OutboundQueue()
    @exclusivity(unchecked) var waiting = MessageQueue()
    /// Asked for with `reportWhenWritten`; empty unless an owner waits for its bytes.
    var writtenMarks = WrittenMarks()
    @exclusivity(unchecked) private var receiveBuffer: ByteBuffer?
    @exclusivity(unchecked) private var parsed = 0
    /// permessage-deflate (RFC 7692), when agreed.
    @exclusivity(unchecked) var deflate: MessageDeflate?
    /// The message being received is compressed (RSV1 on its first frame).
    @exclusivity(unchecked) var inflating = false

    /// What the socket has done and what it waits for.
    @exclusivity(unchecked) private var socket = SocketProgress()
    var serviceQueued = false
    /// The socket took bytes while the owner was not to be called (in the middle of a
    /// read): `connectionHasRoom` is due at the next flush.
    private var roomUnreported = false
    /// Data messages given to `send` (counted at their last frame): a server's per-client
    /// idle check sees traffic toward the client with it.
    public internal(set) var messagesSent: UInt64 = 0
    /// Reading is stopped while the owner cannot take more (its output is behind):
    /// `pauseReading`, `resumeReading`. The time it lasts counts toward neither the close
    /// timeout nor a ping's timeout: the peer's answer may be waiting behind what we have
    /// not read.
    public private(set) var pausesReading = false
    /// Our Close waits while this is true (the owner is still delivering what came before
    /// it, and may yet replace it with another code through `close`): `holdClose`,
    /// `releaseClose`.
    public private(set) var holdsClose = false
    /// Reading is stopped by a rate limit (`throttle`), apart from the owner's pause: the
    /// owner's `resumeReading` does not end it, and what was read stays unprocessed from
    /// the event that went over the rate until `unthrottle`.
    public private(set) var throttled = false
    /// A throttle, or the turn's message budget, stopped `processReceived` before the end
    /// of what was read.
    private var holdsInput = false
    /// Messages this turn may still deliver (`messagesPerTurn`, set at each service).
    @exclusivity(unchecked) private var turnMessages = ConnectionDriver.messagesPerTurn

    /// Stops reading the socket until `resumeReading`.
    public func pauseReading() {
        guard !pausesReading else { return }
        pausesReading = true
        readingWaited(at: .now())
    }

    public func resumeReading() {
        guard pausesReading else { return }
        pausesReading = false
        readingWaited(at: .now())
        scheduleService()
    }

    /// Stops reading, and handling what was read, after the current event, until
    /// `unthrottle` (--rate-limit, --byte-rate): the peer's Pings and Close wait too.
    public func throttle() {
        guard !throttled else { return }
        throttled = true
        readingWaited(at: .now())
    }

    public func unthrottle() {
        guard throttled else { return }
        throttled = false
        readingWaited(at: .now())
        scheduleService()
    }

    /// Keeps our Close (asked for or to come) from going out until `releaseClose`.
    public func holdClose() { holdsClose = true }

    public func releaseClose() {
        guard holdsClose else { return }
        holdsClose = false
        scheduleService()
    }
    /// The peer's Close is answered by the owner's `close(_:)`, not echoed at once: until
    /// then the owner may still send (a program's output after its client closed). Time
    /// without that answer counts toward no timeout: the owner bounds it. Set before `start`.
    public var answersCloseItself: Bool {
        get { !core.echoesClose }
        set { core.echoesClose = !newValue }
    }

    /// The ending: which Close waits for what, its deadlines, how it ends.
    @exclusivity(unchecked) var closing: ConnectionClosing
    /// How the connection ended, once it has.
    public var ending: ConnectionEnding? { ended?.ending }
    /// Boxed: a value set once, at the end, was 40 bytes of every live connection.
    private(set) var ended: Ended?
    final class Ended {
        let ending: ConnectionEnding
        init(_ ending: ConnectionEnding) { self.ending = ending }
    }
    /// How long, in close timeouts from the barrier ping, data from the peer keeps the
    /// ending waiting.
    public static let barrierIncomingLimit = ConnectionClosing.barrierIncomingLimit
    /// Keepalive pings, when --ping-interval or --ping-timeout asks for them: boxed, so a
    /// connection without them (every server's by default) carries a word, not 80 bytes.
    private var keepalive: Keepalive?
    private final class Keepalive {
        var pings: PingTracker
        init(_ pings: PingTracker) { self.pings = pings }
    }
    /// The random bits of the end-of-input ping's payload (`barrierPayload`), kept as one
    /// word: the payload itself is made only when that ping goes (an array per connection
    /// was 80 bytes of every idle client's heap).
    private let barrierBits: UInt64
    /// Random payload of the end-of-input ping: a ping the owner sends cannot mimic it.
    /// Text, so that a peer logging ping payloads logs something readable: "wspipe:eof:"
    /// and the 16 hex digits of one 64-bit draw (a draw each was 16 getrandom calls).
    var barrierPayload: [UInt8] {
        let digits = Array("0123456789abcdef".utf8)
        return Array("wspipe:eof:".utf8) + (0..<16).map { digits[Int((barrierBits >> (UInt64($0) * 4)) & 15)] }
    }

    /// Most bytes read (and dropped) after the connection is closed or failed.
    public static let drainLimit = 1 << 20
    /// Longest wait for the peer to close TCP once both Close frames are exchanged.
    public static let tcpCloseWait = ConnectionClosing.tcpCloseWait
    /// Read the socket again only after at least this much room is free in the buffer.
    static let minimumRead = 16 * 1024
    /// Messages delivered in one turn of the loop before the others (stdin, timers, other
    /// clients) get theirs: a read of 256 KiB holds 87,000 three-byte messages, and a client
    /// flooded with them read stdin 16.7 s late (debug build) when only reads were counted.
    /// What is left of the read waits in the buffer for the next turn (`holdsInput`).
    static let messagesPerTurn = 4096
    /// Payloads up to this size are copied next to their header instead of referenced.
    public static let copyLimit = 4096

    /// The one door from a finished opening handshake to a running connection: the client
    /// (the CLI's session and reconnecting runner, --forward-listen's pairs, WSKit) and the
    /// server make their drivers here, so a core always carries what its handshake agreed.
    /// - Parameters:
    ///   - stream: the connected stream, after the opening handshake.
    ///   - agreement: what the handshake settled (role, extensions, subprotocol).
    ///   - maximumMessageSize: largest message accepted from the peer, in bytes.
    ///   - received: bytes already read after the handshake head, at `received.base + parsed`.
    public convenience init(loop: EventLoop, stream: ByteStream, agreement: HandshakeAgreement, maximumMessageSize: UInt64,
                            options: ConnectionOptions = .init(), received: ByteBuffer? = nil, parsed: Int = 0,
                            delegate: ConnectionDelegate) {
        self.init(loop: loop, stream: stream, core: WebSocketConnection(agreement, maximumMessageSize: maximumMessageSize),
                  options: options, received: received, parsed: parsed, delegate: delegate)
    }

    /// Tests of this package: a driver over a core built by hand.
    /// - Parameters:
    ///   - core: the protocol state machine in the connection's role.
    package init(loop: EventLoop, stream: ByteStream, core: WebSocketConnection, options: ConnectionOptions = .init(),
                received: ByteBuffer? = nil, parsed: Int = 0, delegate: ConnectionDelegate) {
        self.loop = loop
        self.stream = stream
        self.core = core
        self.options = options
        self.delegate = delegate
        receiveBuffer = received
        self.parsed = parsed
        closing = ConnectionClosing(closeTimeout: options.closeTimeout)
        if let interval = options.pingInterval ?? options.pingTimeout {
            keepalive = Keepalive(PingTracker(interval: interval, timeout: options.pingTimeout))
        }
        var random = SystemRandomNumberGenerator()
        barrierBits = random.next()
        deflate = MessageDeflate(core: core)
    }

    /// What the loop's closures hold: the driver from start until it ends, so a started
    /// driver lives until then whether or not its owner keeps a reference, and nothing
    /// after. (Not a weak reference: that gives the driver a side table, and then every
    /// retain and release of it anywhere takes the slow path: 28 % of a broadcast server's
    /// CPU with 1,000 clients, each driver retained once per message sent.)
    private final class LoopReference: LoopTask {
        var driver: ConnectionDriver?
        func runLater() { driver?.service() }
    }
    private let loopReference = LoopReference()

    /// Starts: reports bytes that came with the handshake, then services the socket.
    public func start() {
        let reference = loopReference
        reference.driver = self
        watch = loop.watch(stream.fileDescriptor) { events in reference.driver?.handle(events) }
        keepalive?.pings.start(at: .now())
        processReceived()
        scheduleService()
    }

    // MARK: - What the owner does

    /// The state of the closing handshake.
    public var state: WebSocketConnection.State { core.state }
    /// Our side: the client masks what it sends, the server does not.
    public var role: Role { core.role }
    /// Whether data may still be sent.
    public var canSendData: Bool { closing.acceptsData && core.canSendData }
    /// Bytes waiting to be written: framed, plus messages not framed yet, each of those
    /// counted with its entry's cost (`MessageQueue.entryCost`): what backpressure and the
    /// queue limits compare, so that many empty messages are bounded as bytes are.
    public var queuedBytes: Int { outbound.byteCount + waiting.weight }
    /// The round trip of the last answered keepalive ping, in seconds.
    public var lastRoundTrip: Double? { keepalive?.pings.lastRoundTrip }
    /// The Close we sent and the one we received.
    public var closeSent: ClosePayload? { core.closeSent }
    public var closeReceived: ClosePayload? { core.closeReceived }

    /// Ends the connection at once without a closing handshake.
    public func abandon() {
        guard ended == nil else { return }
        closing.lose(.abandoned)
        finish()
    }

    /// Reading is paused for the owner, or has just resumed: the timeouts that wait for
    /// the peer's answers start over.
    private func readingWaited(at now: Instant) {
        closing.progressed(at: now)
        keepalive?.pings.readingWaited(at: now)
    }

    // MARK: - The loop's side

    func scheduleService() {
        guard !serviceQueued, ended == nil, watch != nil else { return }
        serviceQueued = true
        loop.later(loopReference)  // no closure made: a turn of a busy connection allocates nothing
    }

    private var drained: Bool { socket.drained }

    private var mayRead: Bool {
        !socket.endOfStream && socket.discardedAfterClose <= ConnectionDriver.drainLimit && !pausesReading && !throttled
    }

    private func handle(_ events: IOEvents) {
        if !events.isDisjoint(with: [.error, .hangUp]) { closing.peerReset(closeSent: core.closeSent != nil) }
        if pausesReading && !socket.shutDownWhilePaused && !events.isDisjoint(with: [.readHangUp, .error, .hangUp]) {
            socket.shutDownWhilePaused = true
            delegate?.connectionPeerShutDownWhilePaused(self)
        }
        if drained && !events.isDisjoint(with: [.readHangUp, .error, .hangUp]) { socket.endOfStream = true }
        let error = !events.isDisjoint(with: [.error, .hangUp])
        if events.contains(IOEvents(socket.readInterest)) || error { socket.readReady = true }
        if let blocked = socket.writeBlocked, events.contains(IOEvents(blocked)) || error { socket.writeBlocked = nil }
        service()
    }

    private func service() {
        serviceQueued = false
        guard ended == nil else { return }
        turnMessages = ConnectionDriver.messagesPerTurn
        // What a throttle left unprocessed goes first, before more is read.
        if holdsInput && mayRead {
            holdsInput = false
            processReceived(resuming: true)
        }
        if socket.readReady && mayRead && !holdsInput { readSocket() }
        guard ended == nil else { return }
        checkTimers(now: .now())
        // Frame waiting messages as the socket takes the queue, until it is full.
        // Pongs go ahead of waiting messages; one held back behind an unwritten pong
        // follows once the socket has taken that.
        repeat {
            queueControlFrames()
            frameWaiting()
            if socket.writeBlocked == nil { flush() }
        } while socket.writeBlocked == nil && (!waiting.isEmpty || core.hasOutboundControl) && !socket.outputShutDown && closing.loss == nil
        if finishedStep() {
            finish()
            return
        }
        var interest: IOEvents = []
        if mayRead && !socket.readReady { interest.insert(IOEvents(socket.readInterest)) }
        if let blocked = socket.writeBlocked { interest.insert(IOEvents(blocked)) }
        if drained { interest.insert(.readHangUp) }
        // Paused, the socket is out of epoll: a peer that goes away would go unnoticed.
        if (pausesReading || throttled) && !socket.endOfStream && !socket.shutDownWhilePaused { interest.insert(.readHangUp) }
        loop.setInterest(watch, interest)
        // readReady stays set while a read may find more (bytes the stream holds count: a
        // read goes on past a short one then). Buffered input after a read met EAGAIN is a
        // TLS record not complete yet: it waits for the socket like everything else.
        if (socket.readReady || holdsInput) && mayRead {
            scheduleService()  // more to read or deliver: come back after a look at the other descriptors
        } else if mayRead && !options.keepsBuffersWhenIdle {
            releaseIdleBuffers()
        }
        let deadline = nextDeadline
        if let timer {
            loop.arm(timer, at: deadline)
        } else if deadline != nil {
            let reference = loopReference
            let timer = loop.timer { reference.driver?.service() }
            self.timer = timer
            loop.arm(timer, at: deadline)
        }
    }

    private func readSocket() {
        var reads = 0
        while mayRead && reads < 16 && ended == nil && !holdsInput {
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
                    socket.discardedAfterClose += n
                    parsed = buffer.count
                    if socket.discardedAfterClose > ConnectionDriver.drainLimit { return }
                }
                processReceived()
                if closing.incomingCountsUntil != nil { receivedAfterBarrier() }
                if n < room && !stream.hasBufferedInput {
                    socket.readReady = false
                    return
                }
            case .wouldBlock(let interest):
                socket.readInterest = interest
                socket.readReady = false
                return
            case .endOfStream:
                socket.endOfStream = true
                closing.peerEndedStream(closeReceived: core.closeReceived != nil, ownerAnswers: core.state == .closeReceived,
                                        closeSent: core.closeSent != nil)
                return
            case .failed(let why):
                socket.endOfStream = true
                if core.closeReceived == nil { closing.lose(.readFailed(why)) }
                return
            }
        }
    }

    /// Hands everything new in the receive buffer to the protocol and reports the events.
    /// `resuming`: after a throttle, the core may still owe events for bytes already parsed
    /// (a message's end after its last data).
    private func processReceived(resuming: Bool = false) {
        guard let buffer = receiveBuffer, parsed < buffer.count || resuming, let delegate else { return }
        // Mutable: a server unmasks client payloads in place.
        let input = UnsafeMutableRawBufferPointer(start: buffer.base, count: buffer.count)
        do throws(ReceiveError) {
            receiving: while true {
                // A whole message in one step: one call to the core and one to the
                // delegate, not three of each (a compressed one, RSV1 set, is not taken: it
                // goes through the inflater below).
                if let whole = core.receiveWholeMessage(input, &parsed) {
                    delegate.connection(self, didReceiveMessage: whole.kind, bytes: buffer.base + whole.range.lowerBound,
                                        count: whole.range.count, in: buffer)
                    turnMessages &-= 1
                    if turnMessages == 0 || throttled {
                        holdsInput = true
                        break
                    }
                    continue
                }
                guard let event = try core.receive(input, &parsed) else { break }
                switch event {
                case .messageStart(let kind):
                    if let deflate { inflating = deflate.beginMessage(kind, rsv: core.receivingMessageRSV) }
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
                    turnMessages &-= 1
                    if turnMessages == 0 {
                        holdsInput = true
                        break receiving
                    }
                case .ping(let payload):
                    // The pong goes out ahead of data the owner sends after this point (an
                    // echo of a message the ping interrupted): peers expect it first.
                    queueControlFrames()
                    delegate.connection(self, didReceivePing: payload)
                case .pong(let payload):
                    if closing.awaitsBarrier && payload == barrierPayload {
                        delegate.connection(self, note: .barrierAnswered)
                        carryOut(closing.barrierAnswered(now: .now()))
                    } else {
                        let rtt = keepalive?.pings.pongReceived(payload, at: .now())
                        delegate.connection(self, didReceivePong: payload, roundTrip: rtt)
                    }
                case .close(let payload):
                    peerClosed(payload, delegate: delegate)
                }
                if throttled {
                    holdsInput = true
                    break
                }
            }
        } catch {
            delegate.connection(self, didFail: error)
            waiting.removeAll()
            closing.failed(now: .now())
        }
        delegate.connectionDidProcessInput(self)
    }

    /// Moves the core's control frames to the queue. At most one pong waits unwritten in
    /// the queue: while it has not left, the next one waits in the core, which then keeps
    /// only the most recent (RFC 6455 §5.5.3), so a peer that floods pings without reading
    /// grows neither our memory nor the queue (which would hold back data: stdin, echoes).
    /// A peer that reads gets every ping answered: the socket is tried first. A Close or
    /// our own ping always goes at once (after the pong waiting, if any). The core's echo of
    /// the peer's Close waits while messages sent before it are unframed (`echoPending`).
    func queueControlFrames() {
        guard core.hasOutboundControl, !closing.echoPending else { return }
        if core.hasPendingPong && outbound.holdsUnwrittenPong {
            if socket.writeBlocked == nil { flush(reportsRoom: false) }
            core.keepOnlyMostRecentPong()
            if outbound.holdsUnwrittenPong && !core.hasOutboundCloseOrPing { return }
        }
        let carryingPong = core.hasPendingPong
        outbound.appendControl(core.takeOutboundControl(), carryingPong: carryingPong)
    }

    private func flush(reportsRoom: Bool = true) {
        defer {
            if reportsRoom && roomUnreported && ended == nil {
                roomUnreported = false
                if queuedBytes < options.queueLimit && canSendData { delegate?.connectionHasRoom(self) }
            }
            if reportsRoom, ended == nil, let end = writtenMarks.firstEnd, end <= outbound.totalWritten,
               let token = writtenMarks.takeReached(written: outbound.totalWritten) {
                delegate?.connection(self, wroteThrough: token)
            }
        }
        guard !outbound.isEmpty || stream.hasPendingOutput, !socket.outputShutDown else { return }
        let before = outbound.totalWritten
        switch outbound.write(to: stream, vectors: loop.vectors) {
        case .done, .endOfStream:
            break
        case .wouldBlock(let interest):
            socket.writeBlocked = interest
        case .failed(let why):
            outbound.discard()
            waiting.removeAll()
            socket.outputShutDown = true
            if core.closeReceived == nil { closing.lose(.writeFailed(why)) }
        }
        let now = Instant.now()
        if outbound.totalWritten > before {
            keepalive?.pings.written(upTo: outbound.totalWritten, at: now)
            closing.wrote(from: before, now: now)
            roomUnreported = true
        }
    }

    private func checkTimers(now: Instant) {
        // Our Close waits for the owner's output, or reading waits for it (the peer's answer
        // may be behind what we have not read yet): that is progress of ours, not silence
        // of the peer's.
        if holdsClose && closing.closePending || awaitsOwnersAnswer { closing.progressed(at: now) }
        if pausesReading || throttled { readingWaited(at: now) }
        if let keepalive, keepalive.pings.pingDue(at: now), core.state == .open {
            let payload = keepalive.pings.nextPayload()
            core.ping(payload)
            queueControlFrames()
            keepalive.pings.queued(payload, endingAt: outbound.totalQueued, at: now)
            delegate?.connection(self, note: .pingQueued(payload.count))
        }
        if pongTimeoutCounts, let overdue = keepalive?.pings.overdue(at: now) { closing.lose(.pingTimeout(seconds: overdue)) }
        carryOut(closing.checkBarrier(now: now))
    }

    /// True when the connection is over.
    private func finishedStep() -> Bool {
        if closing.loss != nil || socket.endOfStream && !writesAfterPeersShutdown {
            // Deliver what already arrived and send what is queued, if the socket takes it.
            if holdsInput && !throttled {
                holdsInput = false
                turnMessages = .max
                processReceived(resuming: true)
            }
            if !socket.endOfStream { readSocket() }
            if socket.writeBlocked == nil { flush() }
            return true
        }
        let now = Instant.now()
        if core.state == .closed && outbound.isEmpty && !stream.hasPendingOutput && !socket.outputShutDown {
            // Both Close frames are exchanged (or we failed the connection): end our side and
            // wait, up to the close deadline, for the peer to close TCP (RFC 6455 §7.1.1).
            stream.shutdownOutput()
            socket.outputShutDown = true
            closing.outputShutDown(now: now)
        }
        return closing.isOverdue(at: now)
    }

    /// A missing Pong ends the connection only until a Close arrives or we failed it: after
    /// that no frame comes (the owner's answer, then the wait for TCP, are left).
    private var pongTimeoutCounts: Bool { core.state == .open || core.state == .closeSent }

    /// The peer's Close waits for the owner's answer (`answersCloseItself`).
    private var awaitsOwnersAnswer: Bool { core.state == .closeReceived && !closing.closePending }

    /// The peer half-closed after its Close: the owner's output and answer still go.
    private var writesAfterPeersShutdown: Bool {
        closing.writesAfterPeersShutdown(ownerAnswers: core.state == .closeReceived, outputShutDown: socket.outputShutDown,
                                         unwritten: !waiting.isEmpty || !outbound.isEmpty || stream.hasPendingOutput)
    }

    private var nextDeadline: Instant? {
        // Keepalive pings only while open, pong deadlines only while they count: a deadline
        // that passes without being acted on must not keep the timer in the past.
        let soonest = core.state == .open ? keepalive?.pings.nextDeadline : pongTimeoutCounts ? keepalive?.pings.pongDeadline : nil
        guard let deadline = closing.nextDeadline else { return soonest }
        return soonest.map { min($0, deadline) } ?? deadline
    }

    /// Lets go of the receive buffer and the queue's arena while nothing is under way, so an
    /// idle connection holds no buffer (they return to the pool).
    private func releaseIdleBuffers() {
        if let buffer = receiveBuffer, parsed >= buffer.count {
            delegate?.connectionWillReleaseReceiveBuffer(self)
            receiveBuffer = nil
            parsed = 0
            deflate?.releaseBuffers(receiving: inflating)
        }
        if outbound.isEmpty { outbound.releaseArena() }
    }

    private func finish() {
        guard ended == nil else { return }
        let result = closing.end(failure: core.failure, closeSent: core.closeSent, closeReceived: core.closeReceived,
                                 totalWritten: outbound.totalWritten, now: .now())
        if core.closeReceived == nil && core.failure == nil { core.abandon() }
        ended = Ended(result)
        loop.remove(watch)
        if let timer { loop.arm(timer, at: nil) }
        stream.close()
        outbound.discard()
        waiting.removeAll()
        receiveBuffer = nil
        // zlib's state goes with the connection.
        deflate?.end()
        let owner = delegate
        delegate = nil
        owner?.connection(self, didEnd: result)
        if let observer = endObserver {
            endObserver = nil
            observer.driver(self, didEnd: result)
        }
        loopReference.driver = nil
    }
}

/// The socket's side of a driver: readiness as epoll last reported it, its ends, and what
/// was read after the connection ended.
struct SocketProgress {
    /// What a read waits for (a TLS read may need the socket writable).
    var readInterest = PollInterest.read
    /// A read may find more: set by readiness, cleared by a short or blocked read.
    var readReady = true
    var endOfStream = false
    /// A write waits for this readiness.
    var writeBlocked: PollInterest?
    var outputShutDown = false
    /// Bytes read (and dropped) after the peer's Close or a failure.
    var discardedAfterClose = 0
    /// The peer's shutdown was seen (and reported) while reading was paused.
    var shutDownWhilePaused = false

    /// More than `drainLimit` bytes were dropped after the end and the peer has not closed:
    /// reading stops, and only its hang-up is watched.
    var drained: Bool { !endOfStream && discardedAfterClose > ConnectionDriver.drainLimit }
}
