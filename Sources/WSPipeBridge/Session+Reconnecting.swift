import Glibc
import WebSocketCore
import WebSocketEngine
import WebSocketTransport

/// What a run that reconnects keeps across its connections (--reconnect): unused on a
/// one-connection run.
final class Reconnection {
    var offlineQueue: OfflineQueue?
    var backoff = Backoff()
    var jitter = SystemJitter()
    var metrics = ConnectionMetrics(start: .now())
    var attempts = 0
    var retryTimer: EventLoop.Timer?
    var lastOpenError: OpenError?       // the last attempt failed before a connection
    var givingUp: Int32?                // the exit status the last failure's class gives
    var pendingClose: ClosePayload?     // stdin ended (or asked to close) while disconnected
    var bearerToken: String?
    var sendFileMessages: UInt64 = 0
}

// MARK: - Staying connected (--reconnect)

extension Session {
    /// A run that reconnects: the loop runs from the start, attempts are made from it, and
    /// stdin goes to the offline queue while there is no connection.
    func runReconnecting() -> ExitStatus {
        guard let reconnect = config.client.reconnect else { return runSession() }
        startStandardStreams()
        reconnection.backoff = reconnect.backoff
        reconnection.bearerToken = config.client.bearerToken
        reconnection.offlineQueue = OfflineQueue(messageLimit: reconnect.queueSize, byteLimit: reconnect.queueBytes,
                                    policy: reconnect.queuePolicy)
        continuesAfter = { [unowned self] ending in connectionEnded(ending) }
        startTimers()
        loop.later { [unowned self] in attempt() }
        refreshStdin()
        loop.run()

        Signals.exitAtOnce.store(true, ordering: .relaxed)
        if let status = reconnection.givingUp { emit(.givingUp(attempts: reconnection.attempts, exit: status)) }
        submitOutput()
        stdout.drain()
        return conclude()
    }

    /// One attempt: dial and handshake (blocking until the connect deadline; stdin waits
    /// in its pipe meanwhile), then the connection goes under the session, or the next
    /// attempt is scheduled.
    func attempt() {
        reconnection.retryTimer.map { loop.arm($0, at: nil) }
        guard localEnd == nil, !timedOut else { return loop.stop() }
        reconnection.attempts += 1
        let target = Diagnostics.redactedTarget(config.client.url.description)
        emit(.connecting(url: target, attempt: reconnection.attempts))
        submitOutput()
        var attemptConfig = config
        attemptConfig.client.bearerToken = freshBearerToken()
        let receiveBuffer = ByteBuffer(capacity: Session.receiveBufferSize)
        Signals.exitAtOnce.store(true, ordering: .relaxed)  // nothing to close while connecting
        let opened: Opener.Opened
        do {
            opened = try Opener(config: attemptConfig, log: log).open(into: receiveBuffer, notAfter: sessionDeadline)
        } catch {
            if let deadline = sessionDeadline, Instant.now() >= deadline {
                timedOut = true
                return loop.stop()
            }
            reconnection.lastOpenError = error
            let failure = Self.attemptFailure(error)
            log.event(report(.open(error)).message ?? "connection attempt failed")
            var retryAfter: Double?
            if case .handshakeStatus(_, let seconds) = failure { retryAfter = seconds }
            if !scheduleRetry(failure, retryAfter: retryAfter) {
                reconnection.givingUp = report(.open(error)).status.rawValue
                loop.stop()
            }
            return
        }
        Signals.exitAtOnce.store(false, ordering: .relaxed)
        reconnection.lastOpenError = nil
        reconnection.metrics.connected(at: .now())
        emit(.connected(url: Diagnostics.redactedTarget(opened.url.description), subprotocol: opened.subprotocol,
                        attempt: reconnection.attempts))
        submitOutput()
        endedDriver = nil
        attach(stream: opened.stream, core: WebSocketConnection(maximumMessageSize: config.maxMessageSize),
               received: receiveBuffer, parsed: opened.headLength)
        guard let driver else { return }
        let resent = config.stdio.sendMessages.count + (config.client.sendFile == nil ? 0 : 1)
        if resent > 0 { emit(.resubscribed(messages: Int(resubscribedCount))) }
        if let queue = reconnection.offlineQueue {
            let drained = queue.drain(into: driver)
            if drained > 0 { log.event("sent \(drained) queued message\(drained == 1 ? "" : "s")") }
        }
        if let close = reconnection.pendingClose { driver.closeAfterDelivery(close) }
        submitOutput()
    }

    /// Decides, when a connection ended, whether to go on; schedules the next attempt.
    func connectionEnded(_ ending: ConnectionEnding) -> Bool {
        let up = reconnection.metrics.disconnected(at: .now())
        reconnection.backoff.connectionEnded(upFor: up)
        let failure: AttemptFailure = staleDetected ? .stale : .ended(ending)
        emit(Self.disconnection(ending, stale: staleDetected, up: up))
        submitOutput()
        guard localEnd == nil, !timedOut, !limitClosing else { return false }
        if endOfInputAt != nil && config.stdio.closesAtEndOfInput {
            // stdin is over and its end closes: what went on this connection is not sent
            // again, so a retry would have nothing to send, and its connection nothing to
            // end it (the run sat on it until killed: the server's Close had come before
            // ours, a 1001 or --reconnect-on-close). It ends here, as this ending says;
            // messages still in the offline queue go on the next connection, then its Close.
            guard let queue = reconnection.offlineQueue, !queue.isEmpty else { return false }
            reconnection.pendingClose = reconnection.pendingClose ?? endOfInputClose
        }
        guard scheduleRetry(failure, retryAfter: nil) else {
            let status = Self.status(of: ending, stale: staleDetected)
            if status != .success { reconnection.givingUp = status.rawValue }
            return false
        }
        staleDetected = false
        endedDriver = driver
        driver = nil
        refreshStdin()
        return true
    }

    /// Arms the next attempt if `failure` is retried and retries are left.
    func scheduleRetry(_ failure: AttemptFailure, retryAfter: Double?) -> Bool {
        guard let reconnect = config.client.reconnect, reconnect.policy.retries(failure),
              let delay = reconnection.backoff.nextDelay(retryAfter: retryAfter, jitter: &reconnection.jitter) else { return false }
        emit(.retry(seconds: delay, attempt: reconnection.attempts + 1, retryAfter: retryAfter.map { $0 >= delay - 1e-9 } ?? false))
        submitOutput()
        let timer = reconnection.retryTimer ?? loop.timer { [unowned self] in attempt() }
        reconnection.retryTimer = timer
        loop.arm(timer, at: Instant.now().adding(seconds: delay))
        return true
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
        if config.stdio.jsonLines { stdout.assembler.event(event.json) }
    }

    /// --bearer-file again (tokens rotate); the last good token when it cannot be read.
    func freshBearerToken() -> String? {
        guard let path = config.client.bearerFile else { return reconnection.bearerToken }
        guard let bytes = readSmallFile(path), UTF8Validator.isValid(bytes) else {
            log.warning("cannot read --bearer-file '\(path)' again; using the token read before")
            return reconnection.bearerToken
        }
        let token = HTTPText.trimmed(String(decoding: bytes, as: UTF8.self), also: [0x0A, 0x0D])
        if !token.isEmpty && !token.utf8.contains(where: { $0 < 0x20 || $0 == 0x7F }) { reconnection.bearerToken = token }
        return reconnection.bearerToken
    }

    /// --send-file framed as stdin is (lines, or JSON lines with --jsonl) into `driver`;
    /// its ping objects are sent as pings (the file was checked when the options were read).
    func sendFile(_ bytes: [UInt8], into driver: ConnectionDriver) {
        let file = SendFile(bytes: bytes, jsonLines: config.stdio.jsonLines, separator: config.stdio.separator)
        do throws(InputError) {
            let framed = try file.frame(into: driver)
            for case .ping(let payload) in framed.actions { driver.ping(payload) }
            sent.messages += framed.messages
            sent.bytes += framed.bytes
            reconnection.sendFileMessages = framed.messages
        } catch {
            log.warning("--send-file: \(error.description)")
        }
    }

    /// A small file's bytes (a token), or nil when it cannot be read.
    func readSmallFile(_ path: String) -> [UInt8]? {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 4096)
        while bytes.count < 1 << 20 {
            let n = chunk.withUnsafeMutableBytes { read(fd, $0.baseAddress, 4096) }
            if n < 0 && errno == EINTR { continue }
            guard n >= 0 else { return nil }
            if n == 0 { return bytes }
            bytes += chunk[0..<n]
        }
        return bytes
    }

    var resubscribedCount: UInt64 { UInt64(config.stdio.sendMessages.count) + reconnection.sendFileMessages }

    /// The members --stats adds for a run that reconnects.
    func reconnectStatistics() -> String {
        let now = Instant.now()
        func ms(_ seconds: Double?) -> String { seconds.map { String(($0 * 1e6).rounded() / 1000) } ?? "null" }
        func s(_ seconds: Double?) -> String { seconds.map { String(ConnectionEvent.rounded($0)) } ?? "null" }
        return "\"reconnects\":\(reconnection.metrics.reconnects),\"attempts\":\(reconnection.attempts),"
            + "\"uptime_s\":\(s(reconnection.metrics.totalUptime(at: now))),\"current_uptime_s\":\(s(reconnection.metrics.currentUptime(at: now))),"
            + "\"disconnected_s\":\(s(reconnection.metrics.totalDowntime(at: now))),"
            + "\"rtt_ms\":{\"min\":\(ms(reconnection.metrics.rttMin)),\"avg\":\(ms(reconnection.metrics.rttAverage)),\"max\":\(ms(reconnection.metrics.rttMax))},"
            + "\"queued\":\(reconnection.offlineQueue?.queuedTotal ?? 0),\"dropped\":\(reconnection.offlineQueue?.droppedTotal ?? 0),"
    }

    static func attemptFailure(_ error: OpenError) -> AttemptFailure { AttemptFailure(error) }

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

    /// The exit status an ending alone gives (as `conclude` reports it), for giving up on
    /// reconnecting and for the other server modes' --oneshot: that connection's outcome.
    static func status(of ending: ConnectionEnding, stale: Bool) -> ExitStatus {
        var outcome = Outcome()
        outcome.ending = ending
        outcome.stale = stale ? 0 : nil
        return outcome.verdict.status
    }
}
