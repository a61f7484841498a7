import WebSocketCore
import WebSocketEngine
import WebSocketTransport

/// Why a session is ending, as one value without sockets: the session's `ConnectionClosing`.
/// The session tells it what happened (a signal, --timeout, -n, --stale-timeout, a local
/// failure, stdin's end or its Close, the offline queue overflowing) with what it needs to
/// know of the connection (`Connection`); each transition records the reason and returns
/// the actions the session carries out, in order. The runners ask it questions
/// (`endedByItself`, `inputCloses`, ...) through the session; `Outcome` gets its facts.
struct SessionEnding: Equatable {
    /// What the session does for a transition.
    enum Action: Equatable {
        /// No more stdin for the session.
        case stopStdin
        /// Let a held Close go (stdout's backlog no longer holds it).
        case releaseClose
        case close(ClosePayload)
        /// A Close whose handshake waits at most a second more (--timeout: the run ends
        /// close to the limit the user set).
        case closeSoon(ClosePayload)
        /// A Close once the peer has read what was sent (the end-of-input ping first).
        case closeAfterDelivery(ClosePayload)
        /// A Close unless a local end came meanwhile (it closes its own way).
        case closeUnlessEndedLocally(ClosePayload)
        /// --linger: the Close after delivery, `seconds` from now.
        case lingerThenClose(seconds: Double, ClosePayload)
        /// --linger's wait is over: its Close is not sent.
        case cancelLinger
        /// What stdout holds is written (before the Close).
        case submitOutput
        /// Drop the connection without a closing handshake (it counts as dead).
        case abandon
        /// There is no connection to close: the run ends now (or once its opening is back).
        case endWithoutConnection
    }

    /// What a transition needs to know of the connection under the session.
    enum Connection: Equatable {
        /// None: before the first, between two (--reconnect, the server's clients).
        case none
        /// Open or closing; `closeSent`: our Close (or the core's) is on its way.
        case open(closeSent: Bool)
    }

    /// Ended from our side (a signal, a local failure, the offline queue overflowing).
    private(set) var localEnd: LocalEnd?
    /// --timeout expired.
    private(set) var timedOut = false
    /// -n's count came: the session closes (and stops counting).
    private(set) var countClosing = false
    /// --until's message came: the session closes.
    private(set) var untilMatched = false
    /// An --expect missed on the current connection (exit 13 unless a retry follows).
    private(set) var expectMissed = false
    /// --stale-timeout declared the current connection dead.
    private(set) var stale = false
    /// A --jsonl close object: stdin's end, with its Close.
    private(set) var closeAskedOnStdin = false
    /// stdin ended.
    private(set) var endOfInputAt: Instant?
    /// A Close stdin asked for while there was no connection (its end, an error, a --jsonl
    /// close): the next connection gets it after what was queued for it.
    private(set) var closeForNextConnection: ClosePayload?

    // MARK: - Transitions

    /// SIGINT, SIGTERM or SIGHUP: a Close with 1001 (it goes even while stdout lags), or
    /// the end of the run when there is no connection.
    mutating func signal(_ number: Int32, _ connection: Connection) -> [Action] {
        guard case .open = connection else {
            localEnd = .signal(number)
            return [.endWithoutConnection]
        }
        if localEnd == nil || localEnd == .readerGone { localEnd = .signal(number) }
        return [.stopStdin, .releaseClose, .close(ClosePayload(code: .goingAway))]
    }

    /// --timeout is up: a quick Close (the first time), or the end without a connection.
    mutating func timeLimit(_ connection: Connection) -> [Action] {
        guard case .open(let closeSent) = connection else {
            timedOut = true
            return [.endWithoutConnection]
        }
        var actions: [Action] = []
        if !closeSent {
            timedOut = true
            actions = [.stopStdin, .cancelLinger]
        }
        return actions + [.releaseClose, .closeSoon(ClosePayload(code: .normalClosure))]
    }

    /// A run that reconnects found --timeout passed after a failed attempt: it ends timed out.
    mutating func timeLimitPassedWhileDisconnected() { timedOut = true }

    /// --idle-timeout: no message for that long, a normal Close (nothing without a connection).
    func idle(_ connection: Connection) -> [Action] {
        guard case .open = connection else { return [] }
        return [.stopStdin, .cancelLinger, .close(ClosePayload(code: .normalClosure))]
    }

    /// -n's count came: once, what stdout holds goes out first, then a normal Close (the
    /// messages that still arrive before the peer's are not written).
    mutating func countReached() -> [Action] {
        guard !countClosing else { return [] }
        countClosing = true
        return [.stopStdin, .submitOutput, .closeUnlessEndedLocally(ClosePayload(code: .normalClosure))]
    }

    /// --until's message came: once, what stdout holds goes out first, then a normal
    /// Close (what arrives after it is not written).
    mutating func untilReached() -> [Action] {
        guard !untilMatched else { return [] }
        untilMatched = true
        return [.stopStdin, .submitOutput, .closeUnlessEndedLocally(ClosePayload(code: .normalClosure))]
    }

    /// An --expect missed (its timeout, or the connection ended during the wait): an open
    /// connection closes with `close` (1000 or --close-code); the run ends with 13 unless a
    /// retry follows (`connectionLeft`). stdin stays for the next connection.
    mutating func expectFailed(close: ClosePayload, _ connection: Connection) -> [Action] {
        expectMissed = true
        guard case .open(closeSent: false) = connection else { return [] }
        return [.cancelLinger, .close(close)]
    }

    /// --stale-timeout: nothing came for that long on an open connection.
    mutating func staleDetected() -> [Action] {
        stale = true
        return [.abandon]
    }

    /// stdout's reader left, or stdout or --decompress failed: the first local end closes
    /// with its code (a later one changes nothing; a payload that does not inflate still
    /// closes with 1003), or ends the run when there is no connection (--reconnect between
    /// attempts: it sat retrying, its reader gone, until killed).
    mutating func outputFailed(_ end: LocalEnd, _ connection: Connection) -> [Action] {
        guard localEnd == nil || end == .decompressError else { return [] }
        localEnd = end
        guard case .open = connection else { return [.stopStdin, .endWithoutConnection] }
        return [.stopStdin, .close(SessionEnding.close(for: end))]
    }

    /// stdin could not be read or framed: the lines before the bad one were sent, so their
    /// replies come first (a Close after delivery), now or on the next connection.
    mutating func inputFailed(_ connection: Connection) -> [Action] {
        localEnd = localEnd ?? .inputError
        let close = SessionEnding.close(for: .inputError)
        guard case .open = connection else {
            closeForNextConnection = close
            return [.stopStdin]
        }
        return [.stopStdin, .closeAfterDelivery(close)]
    }

    /// A --jsonl close object on stdin: no more stdin, and its Close after delivery (now
    /// or on the next connection, where the first one asked stays).
    mutating func closeAsked(_ payload: ClosePayload, _ connection: Connection) -> [Action] {
        closeAskedOnStdin = true
        guard case .open = connection else {
            closeForNextConnection = closeForNextConnection ?? payload
            return [.stopStdin]
        }
        return [.stopStdin, .closeAfterDelivery(payload)]
    }

    /// stdin's end: when it closes (`close`, nil with --no-close), the Close after delivery,
    /// after --linger's seconds, or on the next connection.
    mutating func inputEnded(at instant: Instant, close: ClosePayload?, linger: Double?, _ connection: Connection) -> [Action] {
        endOfInputAt = instant
        guard let close else { return [] }
        switch connection {
        case .none:
            closeForNextConnection = closeForNextConnection ?? close
            return []
        case .open(closeSent: true):
            return []
        case .open(closeSent: false):
            return [linger.map { .lingerThenClose(seconds: $0, close) } ?? .closeAfterDelivery(close)]
        }
    }

    /// --reconnect's `fail` policy: the offline queue is full, the run ends (the first
    /// local end stays).
    mutating func queueOverflowed() -> [Action] {
        guard localEnd == nil else { return [] }
        localEnd = .queueFull
        return [.stopStdin, .endWithoutConnection]
    }

    /// A connection ended and another follows: --stale-timeout's verdict was that one's.
    mutating func connectionLeft() {
        stale = false
        expectMissed = false
    }

    /// A retried connection ended after stdin's end, with messages still queued: they go on
    /// the next one, then this Close (unless stdin asked for one already).
    mutating func closeNextConnection(_ payload: ClosePayload) {
        closeForNextConnection = closeForNextConnection ?? payload
    }

    /// The stdio server's next client: -n and --timeout count afresh.
    mutating func clientArrives() {
        countClosing = false
        timedOut = false
    }

    // MARK: - Questions

    /// The session ended the run itself (a local end, --timeout, -n's Close): no other
    /// connection follows.
    var endedByItself: Bool { localEnd != nil || timedOut || countClosing || untilMatched }

    /// stdin has ended and its end closes (`closesAtEndOfInput`), or it asked for a Close:
    /// the connection's end is then the run's.
    func inputCloses(closesAtEndOfInput: Bool) -> Bool {
        endOfInputAt != nil && closesAtEndOfInput || closeAskedOnStdin
    }

    /// A stdin error while disconnected ended the input but not the run: the lines before
    /// the bad one (queued) and its Close go on the next connection, whose end is the run's.
    var leftForNextConnection: Bool {
        localEnd == .inputError && closeForNextConnection != nil && !timedOut && !countClosing && !untilMatched
    }

    /// Neither a local end nor stdin's end: stdin may flow to another client.
    var inputGoesOn: Bool { localEnd == nil && endOfInputAt == nil }

    /// The Close a local end sends.
    static func close(for end: LocalEnd) -> ClosePayload {
        switch end {
        case .readerGone, .signal, .queueFull: ClosePayload(code: .goingAway)
        case .outputError: ClosePayload(code: .internalError, reason: Array("stdout error".utf8))
        case .inputError: ClosePayload(code: .internalError, reason: Array("stdin error".utf8))
        case .decompressError: ClosePayload(code: .unsupportedData, reason: Array("cannot inflate".utf8))
        }
    }
}
