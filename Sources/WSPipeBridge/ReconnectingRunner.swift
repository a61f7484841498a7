import WebSocketCore
import WebSocketEngine
import WebSocketTransport

/// The client that stays connected (--reconnect): the loop runs from the start, attempts are
/// made from it (each opening on a thread, `ClientOpening`: stdin goes on into the offline
/// queue, timers fire and signals are heard while a dial waits), and stdin goes to the
/// offline queue while there is no connection. This runner owns what is the reconnection's
/// (the attempts, the backoff and its timer, the offline queue, the token read again, how
/// the last attempt failed, the metrics --stats adds) and drives the session through its
/// methods (`queueInput`, `connectionOpened`, `sendQueuedInput`, `connectionLeft`,
/// `endedByItself`, `inputCloses`, `timeoutPassed`, `emit`, `finishRun`) and hooks
/// (`Session.Hooks`: a connection's end, an end without a connection, round trips). The
/// session does not know it exists.
final class ReconnectingRunner {
    private let session: Session
    private let settings: ClientConfiguration.Reconnection
    private let config: BridgeConfiguration
    private let log: Diagnostics
    private let loop: EventLoop
    /// stdin's messages while disconnected; drained into each new connection first.
    private let offlineQueue: OfflineQueue
    private let opening: ClientOpening
    /// Connections, up and down times and round trips, for --stats.
    private var metrics = ConnectionMetrics(start: .now())
    /// The last attempt failed before a connection (the outcome's open error).
    private var lastOpenError: OpenError?
    private var backoff: Backoff
    private var jitter = SystemJitter()
    private var attempts = 0
    private var retryTimer: EventLoop.Timer?
    /// The exit status the last failure's class gives, once retrying stopped.
    private var givingUp: Int32?
    /// --bearer-file's token as last read (kept when a later read fails).
    private var bearerToken: String?
    /// The session ended while an attempt was opening: its result, once back, is dropped.
    private var endedWhileOpening = false
    /// The first failed attempt, a drop and the return said without -v.
    private let notices: ReconnectionNotices

    init(session: Session, settings: ClientConfiguration.Reconnection) throws(Failure) {
        self.session = session
        self.settings = settings
        config = session.config
        log = session.log
        loop = session.loop
        backoff = settings.backoff
        bearerToken = config.client.bearerToken
        offlineQueue = OfflineQueue(messageLimit: settings.queueSize, byteLimit: settings.queueBytes,
                                    policy: settings.queuePolicy)
        opening = try ClientOpening(loop: session.loop)
        // The console tells a drop and a return itself (its closed and connected lines, its
        // status row between them).
        notices = ReconnectionNotices(consoleTellsConnections: session.console != nil)
    }

    /// Runs attempts until one ending is not retried (or stdin's end, a signal, --timeout)
    /// and returns the exit status (errors already printed).
    func run() -> ExitStatus {
        session.hooks = Session.Hooks(continuesAfter: { [unowned self] ending in connectionEnded(ending) },
                                      endsWithoutConnection: { [unowned self] in endWithoutConnection() },
                                      roundTrip: { [unowned self] seconds in metrics.roundTrip(seconds) },
                                      preambleDone: { [unowned self] in session.sendQueuedInput() })
        session.startLoop()
        loop.later { [unowned self] in attempt() }
        session.queueInput(in: offlineQueue)
        session.runLoop()

        if let status = givingUp { say(.givingUp(attempts: attempts, exit: status)) }
        return session.finishRun(Session.RunnerFacts(openError: lastOpenError, statistics: statistics()))
    }

    /// One attempt: the dial and handshake start on their thread; `opened` takes the result.
    private func attempt() {
        retryTimer.map { loop.arm($0, at: nil) }
        guard !session.endedByItself || session.leftForNextConnection else { return session.stopLoop() }
        attempts += 1
        say(.connecting(url: Diagnostics.redactedTarget(config.client.url.description), attempt: attempts))
        session.submitOutput()
        var attemptConfig = config
        attemptConfig.client.bearerToken = freshBearerToken()
        opening.start(Opener(config: attemptConfig, log: log), notAfter: session.sessionDeadline) { [unowned self] result in
            opened(result)
        }
    }

    /// An attempt's result: the connection goes under the session (its preamble again,
    /// then what was queued: `Hooks.preambleDone`), or the next attempt is scheduled.
    private func opened(_ result: ClientOpening.Result) {
        let done: ClientOpening.Opened
        switch result {
        case .opened(let opened) where endedWhileOpening:
            opened.opened.stream.close()
            return session.stopLoop()
        case .failed where endedWhileOpening:
            return session.stopLoop()
        case .failed(let error):
            if session.timeoutPassed() { return session.stopLoop() }
            lastOpenError = error
            let failure = Self.attemptFailure(error)
            let why = report(.open(error)).message ?? "connection attempt failed"
            log.event(why)
            notices.attemptFailed(why)
            var retryAfter: Double?
            if case .handshakeStatus(_, let seconds) = failure { retryAfter = seconds }
            if !scheduleRetry(failure, retryAfter: retryAfter) {
                givingUp = report(.open(error)).status.rawValue
                session.stopLoop()
            }
            return
        case .opened(let opened):
            done = opened
        }
        lastOpenError = nil
        metrics.connected(at: .now())
        say(.connected(url: Diagnostics.redactedTarget(done.opened.url.description), subprotocol: done.opened.subprotocol,
                                attempt: attempts))
        session.submitOutput()
        session.connectionOpened(done.opened, received: done.buffer)
        session.submitOutput()
    }

    /// A signal, --timeout or the queue full while disconnected: the run ends now, or once
    /// the attempt under way (cancelled) is back.
    private func endWithoutConnection() {
        guard opening.isOpening else { return session.stopLoop() }
        endedWhileOpening = true
        opening.cancel()
    }

    /// Decides, when a connection ended, whether to go on; schedules the next attempt.
    private func connectionEnded(_ ending: ConnectionEnding) -> Bool {
        let up = metrics.disconnected(at: .now())
        // A preamble that missed is a failed attempt: the backoff goes on growing.
        let missed = session.preambleMissed
        if !missed { backoff.connectionEnded(upFor: up) }
        // The server's own Close during a wait is retried by its code, as at any other time
        // (4003 "unauthorized" is not): only a miss wspipe closed for (the wait's timeout) or
        // a lost connection is a failed attempt whatever happened.
        let serverClosed = Self.closedByServer(ending)
        let stale = session.connectionWasStale
        say(Self.disconnection(ending, stale: stale, missed: missed && !serverClosed, up: up))
        session.submitOutput()
        guard !session.endedByItself else {
            session.sayUnsaidMiss()
            return false
        }
        if session.inputCloses && !missed {
            // stdin is over and its end closes: what went on this connection is not sent
            // again, so a retry would have nothing to send, and its connection nothing to
            // end it (the run sat on it until killed: the server's Close had come before
            // ours, a 1001 or --reconnect-on-close). It ends here, as this ending says;
            // messages still in the offline queue go on the next connection, then its Close.
            // (A preamble that missed delivered nothing of stdin: the next one does.)
            guard !offlineQueue.isEmpty else { return false }
            session.closeNextConnectionAtEndOfInput()
        }
        guard scheduleRetry(missed && !serverClosed ? .preambleFailed : stale ? .stale : .ended(ending), retryAfter: nil,
                            saying: session.unsaidMiss.map(ReconnectionNotices.missed)) else {
            session.sayUnsaidMiss()
            let status = missed ? .expectFailed : Session.status(of: ending, stale: stale)
            if status != .success { givingUp = status.rawValue }
            return false
        }
        session.connectionLeft()
        return true
    }

    /// Says an event as the session does (-v, --jsonl), and the drop and the return
    /// without -v (`ReconnectionNotices`).
    private func say(_ event: ConnectionEvent) {
        session.emit(event)
        notices.note(event, log)
        session.console?.reconnection(event)
    }

    /// Arms the next attempt if `failure` is retried and retries are left; `saying`: a
    /// notice that goes before the retry's (a missed wait, told as retried).
    private func scheduleRetry(_ failure: AttemptFailure, retryAfter: Double?, saying notice: String? = nil) -> Bool {
        guard settings.policy.retries(failure),
              let delay = backoff.nextDelay(retryAfter: retryAfter, jitter: &jitter) else { return false }
        if let notice {
            session.unsaidMiss = nil
            log.notice(notice)
        }
        say(.retry(seconds: delay, attempt: attempts + 1, retryAfter: retryAfter.map { $0 >= delay - 1e-9 } ?? false))
        session.submitOutput()
        let timer = retryTimer ?? loop.timer { [unowned self] in attempt() }
        retryTimer = timer
        loop.arm(timer, at: Instant.now().adding(seconds: delay))
        return true
    }

    /// --bearer-file again (tokens rotate); the last good token when it cannot be read.
    private func freshBearerToken() -> String? {
        guard let path = config.client.bearerFile else { return bearerToken }
        let kept = "; using the token read before"
        guard let bytes = SmallFile.contents(of: path) else {
            log.warning("cannot read --bearer-file '\(path)' again: \(SmallFile.whyUnreadable(path))" + kept)
            return bearerToken
        }
        do throws(BearerToken.Problem) {
            bearerToken = try BearerToken(fileContents: bytes).value
        } catch {
            log.warning("--bearer-file '\(path)' read again: \(error.text)" + kept)
        }
        return bearerToken
    }

    /// The members --stats adds for a run that reconnects.
    private func statistics() -> String {
        let now = Instant.now()
        func ms(_ seconds: Double?) -> String { seconds.map { String(($0 * 1e6).rounded() / 1000) } ?? "null" }
        func s(_ seconds: Double?) -> String { seconds.map { String(ConnectionEvent.rounded($0)) } ?? "null" }
        return "\"reconnects\":\(metrics.reconnects),\"attempts\":\(attempts),"
            + "\"uptime_s\":\(s(metrics.totalUptime(at: now))),\"current_uptime_s\":\(s(metrics.currentUptime(at: now))),"
            + "\"disconnected_s\":\(s(metrics.totalDowntime(at: now))),"
            + "\"rtt_ms\":{\"min\":\(ms(metrics.rttMin)),\"avg\":\(ms(metrics.rttAverage)),\"max\":\(ms(metrics.rttMax))},"
            + "\"queued\":\(offlineQueue.queuedTotal),\"dropped\":\(offlineQueue.droppedTotal),"
    }

    static func attemptFailure(_ error: OpenError) -> AttemptFailure { AttemptFailure(error) }

    /// Whether the server started the closing handshake that ended the connection.
    static func closedByServer(_ ending: ConnectionEnding) -> Bool {
        if case .closed(let handshake) = ending { return !handshake.initiatedByUs }
        return false
    }

    /// The event a connection's end is told as.
    static func disconnection(_ ending: ConnectionEnding, stale: Bool, missed: Bool, up: Double) -> ConnectionEvent {
        func text(_ bytes: [UInt8]) -> String { String(decoding: bytes, as: UTF8.self) }
        switch ending {
        case .closed(let handshake):
            // After an --expect missed, wspipe started the Close: the server only answered.
            return .disconnected(code: handshake.received.code?.rawValue, reason: text(handshake.received.reason),
                                 cause: missed ? .expectFailed : .closed, upSeconds: up)
        case .failed(let error):
            return .disconnected(code: error.closeCode.rawValue, reason: nil, cause: .failed, upSeconds: up)
        case .lost(.pingTimeout):
            return .disconnected(code: nil, reason: nil, cause: .pingTimeout, upSeconds: up)
        case .lost:
            return .disconnected(code: nil, reason: nil, cause: stale ? .stale : .lost, upSeconds: up)
        case .timedOut:
            return .disconnected(code: nil, reason: nil, cause: .timedOut, upSeconds: up)
        }
    }
}

// MARK: - The session's side

extension Session {
    /// Whether the session ended the run itself (a local end, --timeout, -n's Close): no
    /// attempt follows.
    var endedByItself: Bool { ending.endedByItself }

    /// A stdin error while disconnected left its queued lines and Close (1011) for the next
    /// connection: an attempt follows still.
    var leftForNextConnection: Bool { ending.leftForNextConnection }

    /// Whether stdin has ended and its end closes the connection, or it asked for a Close
    /// (--jsonl): the connection's end is then the run's (a retried one sat with stdin
    /// stopped until killed, when the server had not answered that Close).
    var inputCloses: Bool { ending.inputCloses(closesAtEndOfInput: config.closesAtEndOfInput) }

    /// --stale-timeout declared the connection that just ended dead.
    var connectionWasStale: Bool { ending.stale }

    /// stdin's messages go to `queue` while there is no connection (and stdin is read now).
    func queueInput(in queue: OfflineQueue) {
        offline = queue
        refreshStdin()
    }

    /// An attempt's connection comes under the session: its preamble goes first, then
    /// what was queued (`Hooks.preambleDone`) and stdin.
    func connectionOpened(_ opened: Opener.Opened, received: ByteBuffer) {
        endedDriver = nil
        attach(opened, received: received)
    }

    /// What stdin left while there was no connection goes on the new one: the offline
    /// queue's messages, then the Close stdin asked for.
    func sendQueuedInput() {
        guard let driver, let offline else { return }
        let drained = offline.drain(into: driver)
        if drained > 0 { log.event("sent \(drained) queued message\(drained == 1 ? "" : "s")") }
        if let close = ending.closeForNextConnection { driver.closeAfterDelivery(close) }
    }

    /// A retried connection ended after stdin's end with messages still queued: the next
    /// one sends them, then stdin's end's Close.
    func closeNextConnectionAtEndOfInput() { ending.closeNextConnection(endOfInputClose) }

    /// The connection ended and the next attempt follows: stdin goes to the queue meanwhile.
    func connectionLeft() {
        ending.connectionLeft()
        endedDriver = driver
        driver = nil
        refreshStdin()
        refreshStdout()  // stdout's reader is watched while disconnected too
    }

    /// After stdin went into the queue: drops are told, a full `fail` queue ends the run.
    func queueChanged(_ queue: OfflineQueue) {
        let dropped = queue.takeDropped()
        if dropped > 0 { emit(.dropped(count: dropped)) }
        if queue.overflowed { carryOut(ending.queueOverflowed()) }
        submitOutput()
    }

    /// Says an event: -v on stderr, --jsonl on stdout in order with the messages (not with
    /// --print-match-only, whose stdout is the one message --until matched).
    func emit(_ event: ConnectionEvent) {
        log.event(event.text)
        if config.stdio.jsonLines && !config.client.conversation.printMatchOnly { stdout.assembler.event(event.json) }
    }
}
