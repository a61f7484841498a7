import WebSocketCore
import WebSocketTransport

/// A connection's ending as one state, without sockets: which Close waits for what, the
/// deadlines of the close timeout (RFC 6455 §7.1.1, the man page's CLOSING), and the
/// `ConnectionEnding` it comes to. The driver tells it what happened (with the instant and
/// the core's facts); the transitions that ask for I/O return a `ClosingAction` the driver
/// carries out. Nothing here runs per message: the frame path reads `acceptsData` only.
struct ConnectionClosing {
    enum Phase: Equatable {
        /// Data flows; no ending asked for.
        case open
        /// End of input: a Ping goes behind the waiting messages (`pingQueued` once it has),
        /// and `close` follows its Pong (§5.5.2: pongs answer in order).
        case barrier(close: ClosePayload, pingQueued: Bool)
        /// Our Close (or the owner's answer to the peer's) waits to be queued: behind
        /// waiting messages, or while the owner holds it.
        case closePending(ClosePayload)
        /// The peer's Close arrived and the owner answers it (`answersCloseItself`).
        case ownerAnswers
        /// The peer's Close arrived and the core queued its echo, which waits behind the
        /// messages sent before that are not framed yet (an echo server's answers to what
        /// came before the Close): it goes once they are framed, and nothing follows it.
        case echoPending
        /// A Close is queued (ours, the core's echo, or a failure's): the handshake ends
        /// with the peer's Close, or the close timeout.
        case closing
        /// Both Close frames are exchanged and our side of TCP is shut: the peer closes its
        /// side, or `tcpCloseWait` runs out.
        case waitingForTCP
    }

    /// What the driver does for a transition.
    enum Action: Equatable {
        case none
        /// Queue the barrier Ping, then `barrierPingQueued` (or `barrierPingRefused`).
        case queueBarrierPing
        /// Hand the Close to the core and queue it, then `closeQueued`.
        case queueClose(ClosePayload)
        /// Come back from the loop: a Close may go now.
        case service
        /// Queue the core's echo of the peer's Close, held until now (`echoPending`).
        case releaseEcho
        /// Say that the barrier Ping went unanswered (`waited` seconds since the ending
        /// began); the Close goes anyway (`service`).
        case barrierUnanswered(waited: Double)
    }

    let closeTimeout: Double
    private(set) var phase = Phase.open
    /// False from the moment a Close is asked for (or arrives, or the connection fails or
    /// ends): the one stored flag the frame path reads.
    private(set) var acceptsData = true
    private(set) var weStartedClose = false
    private(set) var loss: ConnectionLoss?
    /// The peer ended its side of TCP (a FIN, not an error) after its Close, which the
    /// owner answers: it may still read, so the owner's output and answer are still written.
    private(set) var peerShutDownAfterClose = false
    /// When the ending began (barrier ping or Close asked for) and how long it may go
    /// without progress; the hard limit (`close(within:)`, a failure, the TCP wait).
    private(set) var since: Instant?
    private(set) var progressDeadline: Instant?
    private(set) var hardDeadline: Instant?
    /// Bytes queued before the barrier Ping or the Close: writing them is progress.
    private(set) var endingMark: UInt64 = 0
    /// Bytes queued up to our Close: its written-ness for `CloseWait.closeWritten`.
    private(set) var closeWrittenMark: UInt64?
    /// Set at the barrier ping: until this instant (and the peer's Close), data from the
    /// peer counts as progress. A peer that sends is still working through our messages
    /// (its replies; Python `websockets` reads our Close only once its handler has caught
    /// up), but one that streams forever must still end.
    private(set) var incomingCountsUntil: Instant?

    /// How long, in close timeouts from the barrier ping, data from the peer keeps the
    /// ending waiting.
    static let barrierIncomingLimit = 10.0
    /// Longest wait for the peer to close TCP once both Close frames are exchanged.
    static let tcpCloseWait = 1.0

    init(closeTimeout: Double) {
        self.closeTimeout = closeTimeout
    }

    /// Waiting for the barrier's Pong (or for its Ping to be queued).
    var awaitsBarrier: Bool {
        if case .barrier = phase { return true }
        return false
    }

    /// Our Close waits to be queued.
    var closePending: Bool {
        if case .closePending = phase { return true }
        return false
    }

    /// The core's echo of the peer's Close waits in the core behind unframed messages.
    var echoPending: Bool {
        if case .echoPending = phase { return true }
        return false
    }

    // MARK: - What the owner asks

    /// The owner's Close: replaces one not queued yet (waiting for the hold, or for the
    /// barrier). `limit`: a hard limit in seconds for the whole ending. `closeSent`: the
    /// core has sent one already (then only the limit applies).
    mutating func close(_ payload: ClosePayload, within limit: Double?, closeSent: Bool, now: Instant) -> Action {
        if let limit { capHardDeadline(at: now.adding(seconds: limit)) }
        guard !closeSent else { return .service }
        acceptsData = false
        incomingCountsUntil = nil
        if !closePending { begin(at: now) }
        phase = .closePending(payload)
        return .service
    }

    /// End of input: close once the peer has read everything sent so far. Nil: a Close is
    /// under way already (nothing changes).
    mutating func closeAfterDelivery(_ payload: ClosePayload, closeSent: Bool, waitingEmpty: Bool,
                                     totalQueued: UInt64, now: Instant) -> Action? {
        guard !closeSent, phase == .open || phase == .ownerAnswers else { return nil }
        acceptsData = false
        begin(at: now)
        phase = .barrier(close: payload, pingQueued: false)
        return barrierIfReady(waitingEmpty: waitingEmpty, totalQueued: totalQueued)
    }

    // MARK: - What the driver reports

    /// Every waiting message is framed (or some still wait): the barrier Ping may go.
    mutating func barrierIfReady(waitingEmpty: Bool, totalQueued: UInt64) -> Action {
        guard case .barrier(let close, false) = phase, waitingEmpty, since != nil, progressDeadline != nil
        else { return .none }
        phase = .barrier(close: close, pingQueued: true)
        endingMark = totalQueued
        return .queueBarrierPing
    }

    /// The barrier Ping is queued: data from the peer counts as progress for a while.
    mutating func barrierPingQueued(now: Instant) {
        incomingCountsUntil = now.adding(seconds: closeTimeout * ConnectionClosing.barrierIncomingLimit)
    }

    /// The core would not queue the Ping (a Close is under way): the Close goes at once.
    mutating func barrierPingRefused() -> Action { releaseBarrier() }

    /// The barrier's Pong: the peer has read everything before it.
    mutating func barrierAnswered(now: Instant) -> Action {
        progressed(at: now)
        return releaseBarrier()
    }

    /// The pending Close (or the held echo of the peer's) may be queued: nothing waits
    /// unframed and the owner does not hold it. The handshake is ours only if this Close
    /// reaches the core before the peer's: one read before it (behind the barrier's Pong, in
    /// the same read) was echoed by the core.
    mutating func closeIfReady(waitingEmpty: Bool, held: Bool, peerClosed: Bool, totalQueued: UInt64) -> Action {
        guard waitingEmpty else { return .none }
        switch phase {
        case .closePending(let payload) where !held:
            if !peerClosed { weStartedClose = true }
            phase = .closing
            endingMark = totalQueued
            return .queueClose(payload)
        case .echoPending:
            phase = .closing
            endingMark = totalQueued
            return .releaseEcho
        default:
            return .none
        }
    }

    /// The Close is queued, up to `totalQueued` bytes.
    mutating func closeQueued(totalQueued: UInt64) {
        closeWrittenMark = totalQueued
    }

    /// The peer's Close arrived. `ownerAnswers`: the core leaves the answer to the owner
    /// (else it has queued the echo, which waits while messages sent before it are not
    /// framed: `waitingEmpty` false).
    mutating func peerClosed(ownerAnswers: Bool, waitingEmpty: Bool, totalQueued: UInt64, now: Instant) -> Action {
        var action = Action.none
        if ownerAnswers {
            // A barrier's Close need not wait for a Pong that will not come.
            if awaitsBarrier {
                action = releaseBarrier()
            } else if phase == .open {
                phase = .ownerAnswers
            }
        } else {
            acceptsData = false
            phase = waitingEmpty ? .closing : .echoPending
        }
        if since == nil {
            begin(at: now)
            endingMark = totalQueued
        }
        // Until the echo is queued, every byte written is progress (what it waits behind).
        if echoPending { endingMark = .max }
        return action
    }

    /// We failed the connection (the core queued its Close): at most a short wait for the
    /// peer's.
    mutating func failed(now: Instant) {
        acceptsData = false
        phase = .closing
        capHardDeadline(at: now.adding(seconds: min(closeTimeout, ConnectionClosing.tcpCloseWait)))
    }

    /// The connection is lost without a closing handshake (the first reason stays).
    mutating func lose(_ reason: ConnectionLoss) {
        if loss == nil { loss = reason }
    }

    /// The peer ended its side of TCP (a clean end of stream). Before its Close that is a
    /// loss; after a Close the owner answers (`ownerAnswers`) or whose echo waits behind
    /// unframed messages (`echoPending`), the peer may still read (a client that half-closes
    /// once it has said all).
    mutating func peerEndedStream(closeReceived: Bool, ownerAnswers: Bool, closeSent: Bool) {
        if (ownerAnswers || echoPending) && loss == nil { peerShutDownAfterClose = true }
        if !closeReceived { lose(.peerClosedTCP(afterOurClose: closeSent)) }
    }

    /// The socket reports an error or hang-up: after the peer's half-close, it is gone both
    /// ways now and nothing written would reach it.
    mutating func peerReset(closeSent: Bool) {
        if peerShutDownAfterClose { lose(.peerClosedTCP(afterOurClose: closeSent)) }
    }

    /// After the peer's half-close, the connection goes on while the owner's answer is to
    /// come or something is `unwritten` (then it ends: the peer's FIN came already), until a
    /// write fails (`outputShutDown`) or the peer resets.
    func writesAfterPeersShutdown(ownerAnswers: Bool, outputShutDown: Bool, unwritten: Bool) -> Bool {
        peerShutDownAfterClose && loss == nil && !outputShutDown && (ownerAnswers || unwritten)
    }

    /// A hard limit on the ending from `now`, whatever is under way (paused reading and the
    /// peer's data do not extend it), for an owner that has stopped reading.
    mutating func limit(within seconds: Double, now: Instant) {
        capHardDeadline(at: now.adding(seconds: seconds))
    }

    /// Bytes from `before` on were written: progress while they are ours from before the
    /// barrier Ping or Close.
    mutating func wrote(from before: UInt64, now: Instant) {
        if before < endingMark { progressed(at: now) }
    }

    /// The peer sent something while `incomingCountsUntil` is set: progress, up to then.
    mutating func peerSent(now: Instant) {
        guard let until = incomingCountsUntil, now < until, let deadline = progressDeadline else { return }
        progressDeadline = max(deadline, min(now.adding(seconds: closeTimeout), until))
    }

    /// Time in which we, not the peer, were the ones waiting (reading paused for the owner,
    /// a Close the owner holds, the owner's answer to the peer's Close): the close timeout
    /// starts over.
    mutating func progressed(at now: Instant) {
        guard progressDeadline != nil else { return }
        progressDeadline = now.adding(seconds: closeTimeout)
    }

    /// The timers' look: a barrier Ping without progress for the close timeout gives up
    /// on it (the Close goes anyway, with a short wait for its echo).
    mutating func checkBarrier(now: Instant) -> Action {
        guard awaitsBarrier, let deadline = progressDeadline, now >= deadline else { return .none }
        let waited = since.map { now.seconds(since: $0) } ?? closeTimeout
        capHardDeadline(at: now.adding(seconds: min(closeTimeout, ConnectionClosing.tcpCloseWait)))
        progressDeadline = nil
        incomingCountsUntil = nil
        _ = releaseBarrier()
        return .barrierUnanswered(waited: waited)
    }

    /// Both Close frames are exchanged and written, and our side of TCP is shut: the peer
    /// has `tcpCloseWait` (at most the close timeout) to close its side.
    mutating func outputShutDown(now: Instant) {
        phase = .waitingForTCP
        capHardDeadline(at: now.adding(seconds: min(ConnectionClosing.tcpCloseWait, closeTimeout)))
        progressDeadline = nil
    }

    /// A deadline has passed: the connection ends.
    func isOverdue(at now: Instant) -> Bool {
        if let deadline = hardDeadline, now >= deadline { return true }
        if let deadline = progressDeadline, now >= deadline { return true }
        return false
    }

    /// The sooner deadline, for the driver's timer.
    var nextDeadline: Instant? {
        guard let hard = hardDeadline else { return progressDeadline }
        guard let progress = progressDeadline else { return hard }
        return min(hard, progress)
    }

    /// The connection is over: how it ended. `closeWritten`: the socket took our Close.
    mutating func end(failure: ReceiveError?, closeSent: ClosePayload?, closeReceived: ClosePayload?,
                      totalWritten: UInt64, now: Instant) -> ConnectionEnding {
        acceptsData = false
        if let failure { return .failed(failure) }
        if let received = closeReceived {
            return .closed(ClosingHandshake(initiatedByUs: weStartedClose, sent: closeSent, received: received))
        }
        if let loss { return .lost(loss) }
        let written = closeWrittenMark.map { totalWritten >= $0 } ?? false
        // The bound on the peer's data after the barrier ping ended the wait, not silence.
        let capped = progressDeadline != nil && progressDeadline == incomingCountsUntil
        return .timedOut(CloseWait(limit: closeTimeout, waited: since.map { now.seconds(since: $0) } ?? 0,
                                   closeWritten: written, peerKeptSending: capped))
    }

    // MARK: - Within

    private mutating func begin(at now: Instant) {
        endingMark = .max  // until the barrier ping or Close is queued, every byte written is progress
        if since == nil { since = now }
        progressDeadline = now.adding(seconds: closeTimeout)
    }

    /// The barrier is over (answered, refused, given up, or the peer closed): its Close
    /// goes out from `service` (after the owner has seen this read's messages).
    private mutating func releaseBarrier() -> Action {
        guard case .barrier(let close, _) = phase else { return .none }
        phase = .closePending(close)
        return .service
    }

    private mutating func capHardDeadline(at cap: Instant) {
        hardDeadline = min(hardDeadline ?? cap, cap)
    }
}
