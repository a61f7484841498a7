import WebSocketCore
import WebSocketEngine
import WebSocketTransport

/// The client that stays connected (--reconnect): the loop runs from the start, attempts are
/// made from it, and stdin goes to the offline queue while there is no connection. This
/// runner owns what is the reconnection's (the attempts, the backoff and its timer, the
/// offline queue, the token read again, how the last attempt failed, the metrics --stats
/// adds) and drives the session through its calls (`connectionOpened`, `connectionLeft`,
/// `endedByItself`, `inputCloses`, `timeoutPassed`, below, and `emit`, `conclude`); the
/// session reaches back (`Session.reconnecting`, weak: this runner lives for `Session.run`)
/// only for the offline queue, the Close stdin left for the next connection, round trips,
/// the last open error and the members --stats adds.
final class ReconnectingRunner {
    private let session: Session
    private let settings: ClientConfiguration.Reconnection
    /// stdin's messages while disconnected; drained into each new connection first.
    let offlineQueue: OfflineQueue
    /// A Close stdin asked for (its end, an error, a --jsonl close) while disconnected: sent
    /// on the next connection after the queue.
    var pendingClose: ClosePayload?
    /// Connections, up and down times and round trips, for --stats.
    private(set) var metrics = ConnectionMetrics(start: .now())
    /// The last attempt failed before a connection (the outcome's open error).
    private(set) var lastOpenError: OpenError?
    private var backoff: Backoff
    private var jitter = SystemJitter()
    private var attempts = 0
    private var retryTimer: EventLoop.Timer?
    /// The exit status the last failure's class gives, once retrying stopped.
    private var givingUp: Int32?
    /// --bearer-file's token as last read (kept when a later read fails).
    private var bearerToken: String?
    /// The drop and the return said without -v.
    let notices = ReconnectionNotices()

    init(session: Session, settings: ClientConfiguration.Reconnection) {
        self.session = session
        self.settings = settings
        backoff = settings.backoff
        bearerToken = session.config.client.bearerToken
        offlineQueue = OfflineQueue(messageLimit: settings.queueSize, byteLimit: settings.queueBytes,
                                    policy: settings.queuePolicy)
    }

    /// Runs attempts until one ending is not retried (or stdin's end, a signal, --timeout)
    /// and returns the exit status (errors already printed).
    func run() -> ExitStatus {
        let session = self.session
        session.reconnecting = self
        session.startStandardStreams()
        session.continuesAfter = { [unowned self] ending in connectionEnded(ending) }
        session.startTimers()
        session.loop.later { [unowned self] in attempt() }
        session.refreshStdin()
        session.loop.run()

        Signals.exitAtOnce.store(true, ordering: .relaxed)
        if let status = givingUp { session.emit(.givingUp(attempts: attempts, exit: status)) }
        session.submitOutput()
        session.stdout.drain()
        return session.conclude()
    }

    /// One attempt: dial and handshake (blocking until the connect deadline; stdin waits
    /// in its pipe meanwhile), then the connection goes under the session, or the next
    /// attempt is scheduled.
    private func attempt() {
        let session = self.session
        retryTimer.map { session.loop.arm($0, at: nil) }
        guard !session.endedByItself || leftForNextConnection else { return session.loop.stop() }
        attempts += 1
        session.emit(.connecting(url: Diagnostics.redactedTarget(session.config.client.url.description), attempt: attempts))
        session.submitOutput()
        var attemptConfig = session.config
        attemptConfig.client.bearerToken = freshBearerToken()
        let receiveBuffer = ByteBuffer(capacity: Session.receiveBufferSize)
        let opened: Opener.Opened
        do {
            opened = try open(attemptConfig, into: receiveBuffer)
        } catch {
            if session.timeoutPassed() { return session.loop.stop() }
            lastOpenError = error
            let failure = Self.attemptFailure(error)
            session.log.event(report(.open(error)).message ?? "connection attempt failed")
            var retryAfter: Double?
            if case .handshakeStatus(_, let seconds) = failure { retryAfter = seconds }
            if !scheduleRetry(failure, retryAfter: retryAfter) {
                givingUp = report(.open(error)).status.rawValue
                session.loop.stop()
            }
            return
        }
        lastOpenError = nil
        metrics.connected(at: .now())
        session.emit(.connected(url: Diagnostics.redactedTarget(opened.url.description), subprotocol: opened.subprotocol,
                                attempt: attempts))
        session.submitOutput()
        guard let (driver, resent) = session.connectionOpened(opened, received: receiveBuffer) else { return }
        // --send and --send-file went first on this connection, again.
        if !session.config.stdio.sendMessages.isEmpty || session.config.client.sendFile != nil {
            session.emit(.resubscribed(messages: Int(resent)))
        }
        let drained = offlineQueue.drain(into: driver)
        if drained > 0 { session.log.event("sent \(drained) queued message\(drained == 1 ? "" : "s")") }
        if let close = pendingClose { driver.closeAfterDelivery(close) }
        session.submitOutput()
    }

    /// The dial and handshake, which hold the loop: a signal meanwhile exits at once (nothing
    /// to close yet). Back on the loop, failed or not, a signal ends the run as usual (exit
    /// status, --stats, stdout written), also while waiting for the next attempt: it exited
    /// at once there after a failed attempt, and only there.
    private func open(_ config: BridgeConfiguration, into buffer: ByteBuffer) throws(OpenError) -> Opener.Opened {
        Signals.exitAtOnce.store(true, ordering: .relaxed)
        defer { Signals.exitAtOnce.store(false, ordering: .relaxed) }
        return try Opener(config: config, log: session.log).open(into: buffer, notAfter: session.sessionDeadline)
    }

    /// A stdin error while disconnected ended the run's input but not the run: the lines
    /// before the bad one (in the queue) and its Close (1011) go on the next connection, as
    /// after stdin's end, and that connection's end is the run's (exit 1). The attempt used
    /// to stop the run instead: the queue lost, the Close unsent, the exit status the last
    /// attempt's failure (3) when there was one.
    private var leftForNextConnection: Bool {
        session.localEnd == .inputError && pendingClose != nil && !session.timedOut && !session.limitClosing
    }

    /// Decides, when a connection ended, whether to go on; schedules the next attempt.
    private func connectionEnded(_ ending: ConnectionEnding) -> Bool {
        let session = self.session
        let up = metrics.disconnected(at: .now())
        backoff.connectionEnded(upFor: up)
        let stale = session.staleDetected
        session.emit(Self.disconnection(ending, stale: stale, up: up))
        session.submitOutput()
        guard !session.endedByItself else { return false }
        if session.inputCloses {
            // stdin is over and its end closes: what went on this connection is not sent
            // again, so a retry would have nothing to send, and its connection nothing to
            // end it (the run sat on it until killed: the server's Close had come before
            // ours, a 1001 or --reconnect-on-close). It ends here, as this ending says;
            // messages still in the offline queue go on the next connection, then its Close.
            guard !offlineQueue.isEmpty else { return false }
            pendingClose = pendingClose ?? session.endOfInputClose
        }
        guard scheduleRetry(stale ? .stale : .ended(ending), retryAfter: nil) else {
            let status = Session.status(of: ending, stale: stale)
            if status != .success { givingUp = status.rawValue }
            return false
        }
        session.connectionLeft()
        return true
    }

    /// Arms the next attempt if `failure` is retried and retries are left.
    private func scheduleRetry(_ failure: AttemptFailure, retryAfter: Double?) -> Bool {
        guard settings.policy.retries(failure),
              let delay = backoff.nextDelay(retryAfter: retryAfter, jitter: &jitter) else { return false }
        session.emit(.retry(seconds: delay, attempt: attempts + 1, retryAfter: retryAfter.map { $0 >= delay - 1e-9 } ?? false))
        session.submitOutput()
        let timer = retryTimer ?? session.loop.timer { [unowned self] in attempt() }
        retryTimer = timer
        session.loop.arm(timer, at: Instant.now().adding(seconds: delay))
        return true
    }

    /// A keepalive ping's round trip, for --stats.
    func roundTrip(_ seconds: Double) { metrics.roundTrip(seconds) }

    /// --bearer-file again (tokens rotate); the last good token when it cannot be read.
    private func freshBearerToken() -> String? {
        guard let path = session.config.client.bearerFile else { return bearerToken }
        let kept = "; using the token read before"
        guard let bytes = SmallFile.contents(of: path) else {
            session.log.warning("cannot read --bearer-file '\(path)' again: \(SmallFile.whyUnreadable(path))" + kept)
            return bearerToken
        }
        do throws(BearerToken.Problem) {
            bearerToken = try BearerToken(fileContents: bytes).value
        } catch {
            session.log.warning("--bearer-file '\(path)' read again: \(error.text)" + kept)
        }
        return bearerToken
    }

    /// The members --stats adds for a run that reconnects.
    func statistics() -> String {
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

    /// The event a connection's end is told as.
    static func disconnection(_ ending: ConnectionEnding, stale: Bool, up: Double) -> ConnectionEvent {
        func text(_ bytes: [UInt8]) -> String { String(decoding: bytes, as: UTF8.self) }
        switch ending {
        case .closed(let handshake):
            return .disconnected(code: handshake.received.code?.rawValue, reason: text(handshake.received.reason),
                                 cause: .closed, upSeconds: up)
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
    var endedByItself: Bool { localEnd != nil || timedOut || limitClosing }

    /// Whether stdin has ended and its end closes the connection, or it asked for a Close
    /// (--jsonl): the connection's end is then the run's (a retried one sat with stdin
    /// stopped until killed, when the server had not answered that Close).
    var inputCloses: Bool { endOfInputAt != nil && config.stdio.closesAtEndOfInput || closeAskedOnStdin }

    /// After a failed attempt: whether --timeout has passed meanwhile (the run then ends as
    /// timed out, not as the attempt's failure).
    func timeoutPassed() -> Bool {
        guard let deadline = sessionDeadline, Instant.now() >= deadline else { return false }
        timedOut = true
        return true
    }

    /// An attempt's connection comes under the session (--send and --send-file go first,
    /// then stdin flows): its driver, and how many messages went first; nil when it ended
    /// as it started.
    func connectionOpened(_ opened: Opener.Opened, received: ByteBuffer) -> (driver: ConnectionDriver, resent: UInt64)? {
        endedDriver = nil
        let sentBefore = sent.messages
        attach(opened, received: received)
        return driver.map { ($0, sent.messages - sentBefore) }
    }

    /// The connection ended and the next attempt follows: stdin goes to the queue meanwhile.
    func connectionLeft() {
        staleDetected = false
        endedDriver = driver
        driver = nil
        refreshStdin()
    }

    /// After stdin went into the queue: drops are told, a full `fail` queue ends the run.
    func queueChanged(_ queue: OfflineQueue) {
        let dropped = queue.takeDropped()
        if dropped > 0 { emit(.dropped(count: dropped)) }
        if queue.overflowed && localEnd == nil {
            localEnd = .queueFull
            stopStdin()
            loop.stop()
        }
        submitOutput()
    }

    /// Says an event: -v on stderr, --jsonl on stdout in order with the messages.
    func emit(_ event: ConnectionEvent) {
        log.event(event.text)
        reconnecting?.notices.note(event, log)
        if config.stdio.jsonLines { stdout.assembler.event(event.json) }
    }

    /// A Close for the next connection, when stdin asks for one while disconnected (the
    /// first one asked stays).
    func closeOnNextConnection(_ payload: ClosePayload) {
        guard let reconnecting, reconnecting.pendingClose == nil else { return }
        reconnecting.pendingClose = payload
    }
}
