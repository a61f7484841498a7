import Glibc
import WebSocketCore
import WebSocketEngine
import WebSocketTransport

/// One wspipe run: the stdio face of one engine connection. Connects and handshakes, then
/// bridges stdin and stdout to a `ConnectionDriver` on an `EventLoop` until the connection
/// ends, and reports how it ended as an `ExitStatus`.
///
/// The socket, the protocol and the closing handshake belong to the driver; this type owns
/// what is about stdio: reading stdin into messages (`InputFramer`), writing messages to
/// stdout (`OutputAssembler`, `StdoutSink`), signals, the session's timers (--timeout,
/// --linger, --idle-timeout), -n, --stats and the exit status. stdin and stdout are read
/// and written without ever blocking and without setting O_NONBLOCK on them (see
/// `StreamKind`), so a slow reader or an idle terminal never stalls pongs, pings or timers.
public final class Session: ConnectionDelegate {
    private let config: BridgeConfiguration
    private let log: Diagnostics
    private let loop: EventLoop
    private var driver: ConnectionDriver?

    // Mutated for every message: Swift's run-time exclusivity checks (40% of the
    // instructions per small message, measured with callgrind) are off for these.
    @exclusivity(unchecked) private var framer: InputFramer
    /// stdout: the format, --decompress and backpressure (the same writer as --broadcast's).
    private let stdout: StdoutWriter
    private var stdin: StdinSource?
    private var stdinWatch: EventLoop.Watch?
    private var stdinReady = false              // a stdin read may find data without waiting
    private var stdinOpen = true
    private var pumpQueued = false
    private var stdinBuffer = ByteBuffer(capacity: 0)

    private var ending: ConnectionEnding?
    /// Once set, --decompress inflates no more (stdout drops binary messages).
    private var localEnd: LocalEnd? {
        didSet { stdout.stopped = localEnd != nil }
    }
    private var mismatchWarned = false
    /// Text mode writes a binary message raw, with a warning the first time.
    private lazy var warnsOnBinary = config.stdio.outputFormat == .raw(separator: config.stdio.separator)
    // Counted and timed sessions.
    private let started = Instant.now()
    private var sessionDeadline: Instant?       // --timeout
    private var timedOut = false
    private var lastActivity = Instant.now()    // last data message either way (--idle-timeout)
    private var messagesSeen: UInt64 = 0
    private var limitClosing = false            // -n reached
    private var endOfInputAt: Instant?
    /// The end-of-input ping of the current connection: answered (true), given up on
    /// (false: exit 12 if the close is otherwise clean), or not sent (nil).
    private var deliveryConfirmed: Bool?
    private var sent = (messages: UInt64(0), bytes: UInt64(0))  // --send messages (stdin's are the framer's)
    private var timers: [EventLoop.Timer] = []

    // Staying connected (--reconnect): nil/unused on a one-connection run.
    private var offlineQueue: OfflineQueue?
    private var backoff = Backoff()
    private var jitter = SystemJitter()
    private var metrics = ConnectionMetrics(start: .now())
    private var attempts = 0
    private var retryTimer: EventLoop.Timer?
    private var endedDriver: ConnectionDriver?  // the last one, for the ending's facts
    private var lastOpenError: OpenError?       // the last attempt failed before a connection
    private var givingUp: Int32?                // the exit status the last failure's class gives
    private var pendingClose: ClosePayload?     // stdin ended (or asked to close) while disconnected
    private var staleDetected = false
    private var lastReceived = Instant.now()    // --stale-timeout
    private var bearerToken: String?
    private var sendFileMessages: UInt64 = 0

    // Serving one client at a time (-l without a mode): nil/unused otherwise.
    private var servesOnce: Bool?               // --oneshot; nil: not serving
    private var clientsServed = 0
    private var clientDeadline: EventLoop.Timer? // --timeout, per client
    private var idleCheck: EventLoop.Timer?      // --idle-timeout's timer, armed again per client

    /// stdin read size: lines are small and copied next to their headers, so text mode reads
    /// 64 KiB; binary payloads are masked in place and sent from the read buffer, so binary
    /// mode reads 128 KiB (at least --chunk-size). Stdin is not read while a read's worth
    /// (and up to 128 KiB more) waits for the socket: with a huge --chunk-size, at most one
    /// such read is outstanding.
    private let stdinReadSize: Int
    private let outboundHighWater: Int

    public convenience init(config: BridgeConfiguration, log: Diagnostics) throws(Failure) {
        let loop: EventLoop
        do {
            loop = try EventLoop()
        } catch {
            guard case .cannotCreate(let what, let code) = error else { throw .local(call: "epoll", errno: 0) }
            throw .local(call: what, errno: code)
        }
        self.init(config: config, log: log, loop: loop)
    }

    /// A session on `loop` (the one-client server's, shared with its listener).
    init(config: BridgeConfiguration, log: Diagnostics, loop: EventLoop) {
        self.config = config
        self.log = log
        self.loop = loop
        stdinReadSize = config.stdio.mode == .binary ? max(128 * 1024, config.stdio.chunkSize) : 64 * 1024
        outboundHighWater = stdinReadSize + min(stdinReadSize, 128 * 1024)
        framer = InputFramer(mode: config.stdio.inputMode, messageLimit: config.stdio.oneMessage ? 1 : nil)
        stdout = StdoutWriter(loop: loop,
                              assembler: OutputAssembler(format: config.stdio.outputFormat, limit: config.stdio.maxMessages.map { UInt64($0) },
                                                         discard: config.stdio.sendOnly),
                              decompress: config.stdio.decompress, maximumMessageSize: config.maxMessageSize)
        stdout.onChange = { [unowned self] in refreshStdout() }
        stdout.watchesReader = { [unowned self] in localEnd == nil && driver?.state == .open }
        stdout.onDecompressFailure = { [unowned self] error in decompressFailed(error) }
        let start = started
        sessionDeadline = config.stdio.sessionTimeout.map { start.adding(seconds: $0) }
    }

    /// Runs the session to its end and returns the exit status (errors already printed).
    public func run() -> ExitStatus {
        let status = config.client.reconnect == nil ? runSession() : runReconnecting()
        if config.stdio.stats { log.always(statistics(status)) }
        return status
    }

    /// Signals wake the loop; stdin is opened unless --receive-only.
    private func startStandardStreams() {
        Signals.install(wakeFD: loop.wakeFD)
        loop.onWake = { [unowned self] in handleSignal() }
        if config.stdio.receiveOnly {
            stdinOpen = false
        } else {
            let source = StdinSource()
            stdin = source
            stdinReady = !source.needsPoll
        }
    }

    private func runSession() -> ExitStatus {
        startStandardStreams()

        let receiveBuffer = ByteBuffer(capacity: Session.receiveBufferSize)
        let opened: Opener.Opened
        do {
            // --timeout, when shorter, also limits connecting.
            opened = try Opener(config: config, log: log).open(into: receiveBuffer, notAfter: sessionDeadline)
        } catch {
            if let deadline = sessionDeadline, Instant.now() >= deadline {
                return log.report(.timedOutBeforeOpen(seconds: config.stdio.sessionTimeout ?? 0))
            }
            return log.report(.open(error))
        }
        // From the successful handshake on, a signal means a closing handshake.
        Signals.exitAtOnce.store(false, ordering: .relaxed)
        log.event("connected: \(Diagnostics.redactedTarget(opened.url.description))")

        let extensions: [any WebSocketExtension]
        do throws(OpenError) {
            extensions = try agreedExtensions(opened.negotiated)
        } catch {
            opened.stream.close()
            return log.report(.open(error))
        }
        startTimers()
        attach(stream: opened.stream, core: WebSocketConnection(maximumMessageSize: config.maxMessageSize, extensions: extensions),
               received: receiveBuffer, parsed: opened.headLength)
        loop.run()
        if let driver, driver.compression != nil { log.event(compressionSummary(driver)) }

        Signals.exitAtOnce.store(true, ordering: .relaxed)
        submitOutput()
        stdout.drain()
        return conclude()
    }

    /// Puts a connection under this session: the --send messages go first, then stdin and
    /// stdout flow through it until it ends. Connections can follow one another (the
    /// one-client server, reconnection): stdin, stdout, counts and timers carry over, and
    /// `continuesAfter` decides, when one ends, whether the session waits for the next.
    func attach(stream: ByteStream, core: WebSocketConnection, received: ByteBuffer?, parsed: Int) {
        let driver = ConnectionDriver(loop: loop, stream: stream, core: core, options: connectionOptions,
                                      received: received, parsed: parsed, delegate: self)
        begin(driver)
        driver.start()
        refreshStdin()
        refreshStdout()
    }

    /// The driver settings of a connection under this session.
    var connectionOptions: ConnectionOptions {
        var options = ConnectionOptions()
        options.closeTimeout = config.closeTimeout
        options.pingInterval = config.pingInterval
        options.pingTimeout = config.pingTimeout
        options.receiveBufferSize = Session.receiveBufferSize
        // stdin is read only below outboundHighWater; a whole read then frames at once.
        options.queueLimit = outboundHighWater + stdinReadSize
        options.keepsBuffersWhenIdle = true
        return options
    }

    /// A connection's driver, not started yet, comes under the session: --send first.
    func begin(_ driver: ConnectionDriver) {
        self.driver = driver
        ending = nil
        deliveryConfirmed = nil
        lastActivity = .now()  // --idle-timeout counts from the open connection
        lastReceived = lastActivity
        for text in config.stdio.sendMessages {
            driver.send(.text, bytes: Array(text.utf8))
            sent.messages += 1
            sent.bytes += UInt64(text.utf8.count)
        }
        if let file = config.client.sendFile { sendFile(file, into: driver) }
    }

    /// Asked when a connection ends: true to keep the session (and its loop) running for
    /// another connection, which the caller attaches. Nil: the session ends with it.
    var continuesAfter: ((ConnectionEnding) -> Bool)?

    /// Receive buffers, measured with scripts/bench on 1 GiB transfers: larger ones buy no
    /// speed (the kernel's socket buffers do the real buffering) and cost peak RSS.
    static let receiveBufferSize = 256 * 1024

    // MARK: - Connection events

    public func connection(_ connection: ConnectionDriver, didStartMessage kind: MessageKind) {
        stdout.start(kind)
        if kind == .binary && warnsOnBinary && !mismatchWarned {
            mismatchWarned = true
            log.warning("received a binary message in text mode; writing it raw, followed by a newline (see --binary)")
        }
    }

    public func connection(_ connection: ConnectionDriver, didReceive bytes: UnsafeMutableRawPointer, count: Int, in buffer: ByteBuffer) {
        stdout.data(buffer, bytes, count)
    }

    public func connectionDidEndMessage(_ connection: ConnectionDriver) {
        stdout.end()
    }

    // MARK: - --decompress

    /// A payload that does not inflate (or inflates past --max-message-size): the message is
    /// dropped, nothing more is written, and the session closes with 1003 and exits 1.
    private func decompressFailed(_ error: ReceiveError) {
        guard let driver else { return }
        let number = stdout.assembler.messages + 1
        let format = config.stdio.decompress?.rawValue ?? "deflate"
        switch error {
        case .messageTooBig(_, let limit):
            log.error("message \(number) inflates (--decompress \(format)) past the limit of \(ByteCount.text(limit)) (--max-message-size)")
        default:
            log.error("message \(number) does not inflate as \(format) (--decompress): \(error.description)")
        }
        localEnd = .decompressError
        stopStdin()
        driver.close(ClosePayload(code: .unsupportedData, reason: Array("cannot inflate".utf8)))
    }

    public func connection(_ connection: ConnectionDriver, didReceivePing payload: [UInt8]) {
        log.event("received ping (\(payload.count) bytes)\(connection.state == .open ? ", answering with pong" : "")")
    }

    public func connection(_ connection: ConnectionDriver, didReceivePong payload: [UInt8], roundTrip: Double?) {
        if let rtt = roundTrip {
            metrics.roundTrip(rtt)
            if config.client.printPingRTT { log.always("wspipe: ping round trip \(formatMilliseconds(rtt)) ms") }
            log.event("received pong (\(payload.count) bytes), round trip \(formatMilliseconds(rtt)) ms")
        } else {
            log.event("received pong (\(payload.count) bytes)")
        }
    }

    public func connection(_ connection: ConnectionDriver, didReceiveClose payload: ClosePayload) {
        log.event("received Close \(describe(payload))")
        stdout.assembler.close(payload)
        pauseStdin()
    }

    public func connection(_ connection: ConnectionDriver, didFail error: ReceiveError) {
        stdout.assembler.discardPending()
        say(.protocolFailure(error))  // said now; the exit status comes at the end
        pauseStdin()
    }

    public func connectionDidProcessInput(_ connection: ConnectionDriver) {
        if stdout.assembler.messages != messagesSeen {
            messagesSeen = stdout.assembler.messages
            lastActivity = .now()  // once per read, not per message
            lastReceived = lastActivity
        }
        if stdout.assembler.limitReached && !limitClosing && !awaitsOneMessage {
            // -n: enough messages; the ones that still arrive before the server's Close
            // are not written. The Close waits until they are on stdout (1011 if that fails).
            limitClosing = true
            let count = config.stdio.maxMessages ?? 0
            log.event("received \(count) message\(count == 1 ? "" : "s") (-n); closing")
            stopStdin()
            submitOutput()  // a failing stdout closes with 1011 instead
            if localEnd == nil { connection.close(ClosePayload(code: .normalClosure)) }
        }
        submitOutput()
    }

    /// Serving with -1: the client's message may come before stdin's one message went out;
    /// the count's Close then waits for it (the client is owed it).
    private var awaitsOneMessage: Bool {
        servesOnce != nil && config.stdio.oneMessage && stdinOpen && !framer.isDone
    }

    public func connectionHasRoom(_ connection: ConnectionDriver) {
        if stdinOpen && !pumpQueued { refreshStdin() }
    }

    public func connectionWillReleaseReceiveBuffer(_ connection: ConnectionDriver) {
        stdout.assembler.detachSmallMessage()
    }

    public func connection(_ connection: ConnectionDriver, note: ConnectionNote) {
        switch note {
        case .pingQueued(let count): log.event("sending ping (\(count) bytes)")
        case .barrierQueued: log.event("end of input: sending ping to check the server has read everything, then Close")
        case .barrierAnswered:
            deliveryConfirmed = true
            log.event("received pong to the end-of-input ping")
        case .barrierUnanswered(let waited, let messages):
            deliveryConfirmed = false
            say(.deliveryUnconfirmed(messages: messages, seconds: waited))  // said now, without -v
        case .closeQueued(let payload): log.event("sending Close \(describe(payload))")
        }
    }

    public func connection(_ connection: ConnectionDriver, didEnd ending: ConnectionEnding) {
        self.ending = ending
        switch ending {
        case .closed, .failed: break
        case .lost, .timedOut: stdout.assembler.discardPending()  // a partial message is dropped
        }
        if continuesAfter?(ending) != true { loop.stop() }
    }

    // MARK: - stdin

    /// Whether stdin should be read when it has data: open, and room in the socket queue.
    private var wantsStdin: Bool {
        guard stdinOpen, let driver else { return stdinOpen && offlineQueue?.acceptsMore == true }
        return driver.canSendData && driver.queuedBytes < outboundHighWater
    }

    /// Watches stdin while it is wanted and not known to be ready; reads it soon when it is.
    private func refreshStdin() {
        guard let source = stdin else { return }
        if stdinWatch == nil {
            stdinWatch = loop.watch(source.fd) { [unowned self] _ in
                stdinReady = true
                pumpSoon()
            }
        }
        guard let watch = stdinWatch else { return }
        if wantsStdin && !stdinReady {
            if !loop.setInterest(watch, .readable) {
                stdinReady = true  // epoll cannot watch it (a device like /dev/null): never blocks
                pumpSoon()
            }
        } else {
            loop.setInterest(watch, [])
            if wantsStdin && stdinReady { pumpSoon() }
        }
    }

    private func pumpSoon() {
        guard !pumpQueued else { return }
        pumpQueued = true
        loop.later { [unowned self] in
            pumpQueued = false
            pumpStdin()
            refreshStdin()
        }
    }

    private func pumpStdin() {
        guard let source = stdin else { return }
        if let driver {
            pump(source, into: driver, driver: driver)
        } else if let queue = offlineQueue {
            pump(source, into: queue, driver: nil)
            queueChanged(queue)
        }
    }

    /// Reads stdin into `sink`: the connection, or the offline queue while there is none
    /// (`driver` nil: what stdin asks for then waits for the next connection).
    private func pump(_ source: StdinSource, into sink: some MessageSink, driver: ConnectionDriver?) {
        while wantsStdin && stdinReady {
            // The last read's buffer is reused unless frames still reference it.
            ByteBuffer.reuse(&stdinBuffer, orMake: stdinReadSize)
            let chunk = stdinBuffer
            let item: StdinSource.Read = source.read(into: chunk.base, count: chunk.capacity)
            if case .data(let n) = item {
                chunk.count = n
                // A short read emptied a pipe or socket: wait for readiness instead of reading
                // again only to meet EAGAIN (one syscall less per interactive line).
                if !source.readsUntilWouldBlock || (n < chunk.capacity && source.kind != .regular) { stdinReady = false }
            }
            do throws(InputError) {
                let before = framer.messages
                defer {
                    if framer.messages != before { lastActivity = .now() }
                }
                switch item {
                case .data:
                    try perform(framer.consume(chunk, into: sink))
                    if framer.isDone { return }
                case .wouldBlock:
                    stdinReady = false
                    return
                case .end:
                    try perform(framer.finish(into: sink))
                    stdinOpen = false
                    endOfInputAt = .now()
                    log.event("end of stdin after \(framer.messages) messages")
                    guard let driver else {
                        if config.stdio.closesAtEndOfInput { pendingClose = pendingClose ?? endOfInputClose }
                        return
                    }
                    if servesOnce != nil { connectionDidProcessInput(driver) }  // -1's count may be waiting for this
                    if config.stdio.closesAtEndOfInput && driver.closeSent == nil {
                        if let linger = config.stdio.linger {
                            lingerTimer = arm(after: linger) { [unowned self] in
                                self.driver?.closeAfterDelivery(endOfInputClose)
                            }
                        } else {
                            driver.closeAfterDelivery(endOfInputClose)
                        }
                    }
                    return
                case .failed(let why):
                    throw InputError.readFailed(why)
                }
            } catch {
                log.error(error.description)
                localEnd = localEnd ?? .inputError
                stopStdin()
                // The lines before the bad one were sent: let their replies arrive first.
                guard let driver else {
                    pendingClose = ClosePayload(code: .internalError, reason: Array("stdin error".utf8))
                    return
                }
                driver.closeAfterDelivery(ClosePayload(code: .internalError, reason: Array("stdin error".utf8)))
                return
            }
        }
    }

    /// The Close sent when stdin ends (--close-code, --close-reason).
    private var endOfInputClose: ClosePayload {
        ClosePayload(code: config.stdio.closeCode, reason: Array(config.stdio.closeReason.utf8))
    }

    /// Carries out what stdin asked for besides data (--jsonl ping/close, -1's limit).
    private func perform(_ actions: [InputAction]) {
        guard let driver else {
            for case .close(let payload) in actions {
                stopStdin()
                pendingClose = pendingClose ?? payload
            }
            if actions.contains(.limitReached) { stopStdin() }
            return
        }
        for action in actions {
            switch action {
            case .ping(let payload):
                if driver.ping(payload) { log.event("sending ping (\(payload.count) bytes) from stdin") }
            case .close(let payload):
                log.event("close requested on stdin")
                stopStdin()
                driver.closeAfterDelivery(payload)
            case .limitReached:
                log.event("sent stdin's first message (-1); no more stdin")
                stopStdin()
                if servesOnce != nil && stdout.assembler.limitReached { connectionDidProcessInput(driver) }
            }
        }
    }

    /// No more stdin for this session (its end, an error, a close of ours).
    private func stopStdin() {
        stdinOpen = false
        if let watch = stdinWatch { loop.setInterest(watch, []) }
    }

    /// No more stdin for this connection (the server closed it or broke the protocol):
    /// stdin stays open for the next one, if a retry or the next client follows (with
    /// `stopStdin` here, --reconnect after a server's 1001 never read stdin again).
    private func pauseStdin() {
        if let watch = stdinWatch { loop.setInterest(watch, []) }
    }

    // MARK: - stdout

    private func submitOutput() {
        stdout.flush()
        refreshStdout()
    }

    /// Pauses socket reads while stdout lags, holds our Close until what came before it is
    /// on stdout, and watches stdout when it is blocked or its reader may leave.
    private func refreshStdout() {
        handleWriterFailure()
        if let driver {
            if stdout.lagging { driver.pauseReading() } else { driver.resumeReading() }
            if localEnd == nil && stdout.sink.failure == nil && stdout.sink.pendingBytes > 0 { driver.holdClose() } else { driver.releaseClose() }
        }
        stdout.refreshWatch()
    }

    private func handleWriterFailure() {
        guard localEnd == nil, let failure = stdout.sink.failure, let driver else { return }
        switch failure {
        case .readerGone:
            log.event("stdout reader went away; closing")
            localEnd = .readerGone
            stopStdin()
            driver.close(ClosePayload(code: .goingAway))
        case .failed(let why):
            log.error(why)
            localEnd = .outputError
            stopStdin()
            driver.close(ClosePayload(code: .internalError, reason: Array("stdout error".utf8)))
        }
    }

    // MARK: - Signals and timers

    private func handleSignal() {
        guard let number = Signals.take() else { return }
        guard let driver else {
            // Disconnected: nothing to close.
            localEnd = .signal(number)
            loop.stop()
            return
        }
        log.event("received signal \(number)")
        if localEnd == nil || localEnd == .readerGone { localEnd = .signal(number) }
        stopStdin()
        driver.releaseClose()
        driver.close(ClosePayload(code: .goingAway))
    }

    private var lingerTimer: EventLoop.Timer?

    private func arm(after seconds: Double, _ fire: @escaping () -> Void) -> EventLoop.Timer {
        let timer = loop.timer(fire)
        loop.arm(timer, at: Instant.now().adding(seconds: seconds))
        timers.append(timer)
        return timer
    }

    private func startTimers() {
        if let stale = config.client.staleTimeout {
            var staleTimer: EventLoop.Timer?
            let timer = loop.timer { [unowned self] in
                guard let timer = staleTimer else { return }
                let now = Instant.now()
                if let driver, driver.state == .open, now.seconds(since: lastReceived) >= stale {
                    log.event("no message received for \(formatSeconds(stale)) s (--stale-timeout); the connection counts as dead")
                    staleDetected = true
                    driver.abandon()
                }
                // Checked again at the next possible expiry (also across reconnections).
                let next = lastReceived.adding(seconds: stale)
                loop.arm(timer, at: next > now ? next : now.adding(seconds: 1))
            }
            staleTimer = timer
            loop.arm(timer, at: lastReceived.adding(seconds: stale))
            timers.append(timer)
        }
        if let deadline = sessionDeadline {
            let timer = loop.timer { [unowned self] in sessionTimedOut() }
            loop.arm(timer, at: deadline)
            timers.append(timer)
        }
        if let idle = config.stdio.idleTimeout {
            var idleTimer: EventLoop.Timer?
            let timer = loop.timer { [unowned self] in
                guard let timer = idleTimer else { return }
                guard let driver else {
                    // Reconnecting: counted again from the next connection.
                    loop.arm(timer, at: Instant.now().adding(seconds: idle))
                    return
                }
                let now = Instant.now()
                if driver.state == .open && now.seconds(since: lastActivity) >= idle {
                    log.event("no message for \(formatSeconds(idle)) s (--idle-timeout); closing")
                    stopStdin()
                    if let linger = lingerTimer { loop.arm(linger, at: nil) }
                    driver.close(ClosePayload(code: .normalClosure))
                } else if driver.state == .open {
                    loop.arm(timer, at: lastActivity.adding(seconds: idle))
                }
            }
            idleTimer = timer
            idleCheck = timer
            loop.arm(timer, at: lastActivity.adding(seconds: idle))
            timers.append(timer)
        }
    }

    private func sessionTimedOut() {
        guard let driver else {
            timedOut = true
            loop.stop()
            return
        }
        // The closing handshake after --timeout waits at most a second more, so the session
        // ends close to the limit the user set.
        let limit = min(config.closeTimeout, ConnectionDriver.tcpCloseWait)
        if driver.closeSent == nil {
            timedOut = true
            log.event("--timeout of \(formatSeconds(config.stdio.sessionTimeout ?? 0)) s reached; closing")
            stopStdin()
            if let linger = lingerTimer { loop.arm(linger, at: nil) }
        }
        driver.releaseClose()
        driver.close(ClosePayload(code: .normalClosure), within: limit)
    }

    // MARK: - The end

    /// Reports a failure as it happens; when serving, the peer is the client.
    private func say(_ failure: Failure) {
        _ = log.report(failure, as: servesOnce == nil ? .client : .server)
    }

    /// The session's end as facts (`Outcome`), which decide the exit status and its line.
    private var outcome: Outcome {
        var outcome = Outcome()
        outcome.runner = servesOnce.map { $0 ? .oneshot : .service } ?? .client
        outcome.ending = ending
        outcome.connected = driver != nil
        outcome.localEnd = localEnd
        outcome.timedOut = timedOut
        outcome.openError = lastOpenError
        outcome.stale = staleDetected ? config.client.staleTimeout ?? 0 : nil
        outcome.queueBounds = config.client.reconnect.map { (messages: $0.queueSize, bytes: $0.queueBytes) }
        if case .failed(let why) = stdout.sink.failure { outcome.stdoutFailure = why }
        outcome.shortfall = countShortfall
        outcome.deliveryConfirmed = deliveryConfirmed
        return outcome
    }

    /// Prints the outcome's line, if any, and returns its status.
    private func conclude() -> ExitStatus {
        let verdict = outcome.verdict
        if let line = verdict.line { log.error(line) }
        return verdict.status
    }

    /// --require-count: a clean end before the count came (-n N or -1; per client when
    /// serving, the one client with --oneshot; across connections with --reconnect).
    private var countShortfall: Outcome.Shortfall? {
        guard config.stdio.requireCount, let limit = stdout.assembler.limit, stdout.assembler.messages < limit else { return nil }
        let required = config.stdio.maxMessages ?? 1
        return Outcome.Shortfall(received: stdout.assembler.messages + UInt64(required) - limit, required: required)
    }

    /// The extensions the server agreed to, configured (zlib loaded only now).
    private func agreedExtensions(_ negotiated: ClientHandshake.Negotiated) throws(OpenError) -> [any WebSocketExtension] {
        guard let deflate = try PerMessageDeflate.agreed(offer: config.client.deflate, negotiated),
              let configuration = deflate.configuration else { return [] }
        let response = negotiated.extensions.first { $0.name.lowercased() == DeflateParameters.extensionName }
        log.event("permessage-deflate agreed: \(response.map { "\($0)" } ?? "") (\(configuration.summary))")
        return [deflate]
    }

    /// -v at the end: the messages each way, how many of them were compressed, and the
    /// wire bytes against the payload bytes of those (short ones go uncompressed).
    private func compressionSummary(_ driver: ConnectionDriver) -> String {
        func side(_ total: UInt64, _ count: CompressionCount) -> String {
            let messages = "\(total) message\(total == 1 ? "" : "s")"
            guard count.messages > 0 else { return "\(messages) (none compressed)" }
            guard count.wire > 0 else { return "\(messages) (\(count.messages) compressed)" }
            let times = (Double(count.payload) / Double(count.wire) * 100).rounded() / 100
            return "\(messages) (\(count.messages) compressed: \(ByteCount.text(count.wire)) on the wire "
                + "for \(ByteCount.text(count.payload)), \(times)x)"
        }
        return "permessage-deflate: received \(side(stdout.assembler.messages, driver.compressionIn)); "
            + "sent \(side(driver.messagesSent, driver.compressionOut))"
    }

    /// The --stats line: one JSON object.
    private func statistics(_ status: ExitStatus) -> String {
        var line: [UInt8] = []
        func closeObject(_ payload: ClosePayload?) -> String {
            guard let payload else { return "null" }
            var reason: [UInt8] = []
            payload.reason.withUnsafeBytes { JSONWriter.appendString($0, to: &reason) }
            let code = payload.code.map { String($0.rawValue) } ?? "null"
            return "{\"code\":\(code),\"reason\":\(String(decoding: reason, as: UTF8.self))}"
        }
        let duration = (Instant.now().seconds(since: started) * 1000).rounded() / 1000
        let driver = self.driver ?? endedDriver
        let rtt = driver?.lastRoundTrip.map { String((($0 * 1e6).rounded()) / 1000) } ?? "null"
        line += Array(("{\"sent\":{\"messages\":\(framer.messages + sent.messages),\"bytes\":\(framer.bytes + sent.bytes)},"
            + "\"received\":{\"messages\":\(stdout.assembler.messages),\"bytes\":\(stdout.assembler.bytes)},"
            + "\"duration_s\":\(duration),"
            + "\"close_sent\":\(closeObject(driver?.closeSent)),"
            + "\"close_received\":\(closeObject(driver?.closeReceived)),"
            + "\"ping_rtt_ms\":\(rtt),"
            + "\"delivery_confirmed\":\(deliveryConfirmed.map { String($0) } ?? "null"),"
            + (config.client.reconnect == nil ? "" : reconnectStatistics())
            + (servesOnce == nil ? "" : "\"clients\":\(clientsServed),")
            + "\"compression\":\(compressionObject),\"exit\":\(status.rawValue)}").utf8)
        return String(decoding: line, as: UTF8.self)
    }
}

extension Session {
    /// --stats: wire against payload bytes of compressed messages each way; null when
    /// permessage-deflate was not agreed.
    var compressionObject: String {
        guard let driver, driver.compression != nil else { return "null" }
        func side(_ count: CompressionCount) -> String {
            "{\"messages\":\(count.messages),\"wire_bytes\":\(count.wire),\"payload_bytes\":\(count.payload)}"
        }
        return "{\"received\":\(side(driver.compressionIn)),\"sent\":\(side(driver.compressionOut))}"
    }
}

// MARK: - Serving one client at a time (-l without a mode)

extension Session {
    /// Bridges stdin and stdout to the clients of `server`, one after the other (the server
    /// accepts the next only when the current one has gone: `oneClientAtATime`). Each client
    /// gets the rest of stdin where the last one left it (a line cut by -1 or a --jsonl
    /// close included); stdin is not read between clients. -n, -1, --send, --timeout and
    /// --idle-timeout count per client. stdin EOF closes the current client (after
    /// delivery) and ends the server; so does a local failure or the stdout reader leaving.
    /// Exit 0 (also after a signal: a service asked to stop), 1 for a local failure; how
    /// clients left is told by -v and --jsonl. With `oneshot` the first client's end is the
    /// end, with the status the client would have for it.
    func serve(_ server: ServerDriver, oneshot: Bool) -> ExitStatus {
        servesOnce = oneshot
        startStandardStreams()
        Signals.exitAtOnce.store(false, ordering: .relaxed)
        sessionDeadline = nil
        startTimers()
        if config.stdio.sessionTimeout != nil { clientDeadline = loop.timer { [unowned self] in sessionTimedOut() } }
        if let idle = idleCheck { loop.arm(idle, at: nil) }  // armed per client
        continuesAfter = { [unowned self] ending in clientLeft(ending) }
        refreshStdout()
        loop.run()

        Signals.exitAtOnce.store(true, ordering: .relaxed)
        submitOutput()
        stdout.drain()
        let status = conclude()
        if config.stdio.stats { log.always(statistics(status)) }
        return status
    }

    /// A client's handshake is done: its counts start (-n, -1, --timeout).
    func clientArrives() {
        submitOutput()
        clientsServed += 1
        if let limit = config.stdio.maxMessages { stdout.assembler.limit = stdout.assembler.messages + UInt64(limit) }
        limitClosing = false
        timedOut = false
    }

    /// Its driver, before it starts: --send, then what stdin still holds for it.
    func clientBegins(_ driver: ConnectionDriver) {
        begin(driver)
        guard !config.stdio.receiveOnly, endOfInputAt == nil, localEnd == nil else { return }
        stdinOpen = true
        guard framer.isDone else { return }
        do throws(InputError) {
            try perform(framer.resume(limit: config.stdio.oneMessage ? 1 : nil, into: driver))
        } catch {
            log.error(error.description)
            localEnd = .inputError
            stopStdin()
            driver.closeAfterDelivery(ClosePayload(code: .internalError, reason: Array("stdin error".utf8)))
        }
    }

    /// Its driver started: stdin flows, its timers run.
    func clientStarted() {
        let now = Instant.now()
        if let timer = clientDeadline, let seconds = config.stdio.sessionTimeout {
            sessionDeadline = now.adding(seconds: seconds)
            loop.arm(timer, at: sessionDeadline)
        }
        if let timer = idleCheck, let idle = config.stdio.idleTimeout { loop.arm(timer, at: lastActivity.adding(seconds: idle)) }
        refreshStdin()
        refreshStdout()
    }

    /// --jsonl: a client's connected/disconnected object, in order with its messages.
    func emitLine(_ line: [UInt8]) {
        stdout.assembler.event(line)
        submitOutput()
    }

    /// The current client has gone: true to wait for the next one.
    private func clientLeft(_ ending: ConnectionEnding) -> Bool {
        // --whole-input: all of stdin is the first client's one message (its first fragments
        // may be on their way already), so the server ends with that client.
        guard servesOnce == false, localEnd == nil, endOfInputAt == nil, !config.stdio.wholeInput else { return false }
        if let timer = clientDeadline { loop.arm(timer, at: nil) }
        if let timer = idleCheck { loop.arm(timer, at: nil) }
        sessionDeadline = nil
        endedDriver = driver
        driver = nil
        refreshStdin()
        submitOutput()
        return true
    }
}

// MARK: - Staying connected (--reconnect)

extension Session {
    /// A run that reconnects: the loop runs from the start, attempts are made from it, and
    /// stdin goes to the offline queue while there is no connection.
    private func runReconnecting() -> ExitStatus {
        guard let reconnect = config.client.reconnect else { return runSession() }
        startStandardStreams()
        backoff = reconnect.backoff
        bearerToken = config.client.bearerToken
        offlineQueue = OfflineQueue(messageLimit: reconnect.queueSize, byteLimit: reconnect.queueBytes,
                                    policy: reconnect.queuePolicy)
        continuesAfter = { [unowned self] ending in connectionEnded(ending) }
        startTimers()
        loop.later { [unowned self] in attempt() }
        refreshStdin()
        loop.run()

        Signals.exitAtOnce.store(true, ordering: .relaxed)
        if let status = givingUp { emit(.givingUp(attempts: attempts, exit: status)) }
        submitOutput()
        stdout.drain()
        return conclude()
    }

    /// One attempt: dial and handshake (blocking until the connect deadline; stdin waits
    /// in its pipe meanwhile), then the connection goes under the session, or the next
    /// attempt is scheduled.
    private func attempt() {
        retryTimer.map { loop.arm($0, at: nil) }
        guard localEnd == nil, !timedOut else { return loop.stop() }
        attempts += 1
        let target = Diagnostics.redactedTarget(config.client.url.description)
        emit(.connecting(url: target, attempt: attempts))
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
            lastOpenError = error
            let failure = Self.attemptFailure(error)
            log.event(report(.open(error)).message ?? "connection attempt failed")
            var retryAfter: Double?
            if case .handshakeStatus(_, let seconds) = failure { retryAfter = seconds }
            if !scheduleRetry(failure, retryAfter: retryAfter) {
                givingUp = report(.open(error)).status.rawValue
                loop.stop()
            }
            return
        }
        Signals.exitAtOnce.store(false, ordering: .relaxed)
        lastOpenError = nil
        metrics.connected(at: .now())
        emit(.connected(url: Diagnostics.redactedTarget(opened.url.description), subprotocol: opened.subprotocol,
                        attempt: attempts))
        submitOutput()
        endedDriver = nil
        attach(stream: opened.stream, core: WebSocketConnection(maximumMessageSize: config.maxMessageSize),
               received: receiveBuffer, parsed: opened.headLength)
        guard let driver else { return }
        let resent = config.stdio.sendMessages.count + (config.client.sendFile == nil ? 0 : 1)
        if resent > 0 { emit(.resubscribed(messages: Int(resubscribedCount))) }
        if let queue = offlineQueue {
            let drained = queue.drain(into: driver)
            if drained > 0 { log.event("sent \(drained) queued message\(drained == 1 ? "" : "s")") }
        }
        if let close = pendingClose { driver.closeAfterDelivery(close) }
        submitOutput()
    }

    /// Decides, when a connection ended, whether to go on; schedules the next attempt.
    private func connectionEnded(_ ending: ConnectionEnding) -> Bool {
        let up = metrics.disconnected(at: .now())
        backoff.connectionEnded(upFor: up)
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
            guard let queue = offlineQueue, !queue.isEmpty else { return false }
            pendingClose = pendingClose ?? endOfInputClose
        }
        guard scheduleRetry(failure, retryAfter: nil) else {
            let status = Self.status(of: ending, stale: staleDetected)
            if status != .success { givingUp = status.rawValue }
            return false
        }
        staleDetected = false
        endedDriver = driver
        driver = nil
        refreshStdin()
        return true
    }

    /// Arms the next attempt if `failure` is retried and retries are left.
    private func scheduleRetry(_ failure: AttemptFailure, retryAfter: Double?) -> Bool {
        guard let reconnect = config.client.reconnect, reconnect.policy.retries(failure),
              let delay = backoff.nextDelay(retryAfter: retryAfter, jitter: &jitter) else { return false }
        emit(.retry(seconds: delay, attempt: attempts + 1, retryAfter: retryAfter.map { $0 >= delay - 1e-9 } ?? false))
        submitOutput()
        let timer = retryTimer ?? loop.timer { [unowned self] in attempt() }
        retryTimer = timer
        loop.arm(timer, at: Instant.now().adding(seconds: delay))
        return true
    }

    /// After stdin went into the queue: drops are told, a full `fail` queue ends the run.
    private func queueChanged(_ queue: OfflineQueue) {
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
    private func emit(_ event: ConnectionEvent) {
        log.event(event.text)
        if config.stdio.jsonLines { stdout.assembler.event(event.json) }
    }

    /// --bearer-file again (tokens rotate); the last good token when it cannot be read.
    private func freshBearerToken() -> String? {
        guard let path = config.client.bearerFile else { return bearerToken }
        guard let bytes = readSmallFile(path), UTF8Validator.isValid(bytes) else {
            log.warning("cannot read --bearer-file '\(path)' again; using the token read before")
            return bearerToken
        }
        let token = HTTPText.trimmed(String(decoding: bytes, as: UTF8.self), also: [0x0A, 0x0D])
        if !token.isEmpty && !token.utf8.contains(where: { $0 < 0x20 || $0 == 0x7F }) { bearerToken = token }
        return bearerToken
    }

    /// --send-file framed as stdin is (lines, or JSON lines with --jsonl) into `driver`;
    /// its ping objects are sent as pings (the file was checked when the options were read).
    private func sendFile(_ bytes: [UInt8], into driver: ConnectionDriver) {
        let file = SendFile(bytes: bytes, jsonLines: config.stdio.jsonLines, separator: config.stdio.separator)
        do throws(InputError) {
            let framed = try file.frame(into: driver)
            for case .ping(let payload) in framed.actions { driver.ping(payload) }
            sent.messages += framed.messages
            sent.bytes += framed.bytes
            sendFileMessages = framed.messages
        } catch {
            log.warning("--send-file: \(error.description)")
        }
    }

    /// A small file's bytes (a token), or nil when it cannot be read.
    private func readSmallFile(_ path: String) -> [UInt8]? {
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

    private var resubscribedCount: UInt64 { UInt64(config.stdio.sendMessages.count) + sendFileMessages }

    /// The members --stats adds for a run that reconnects.
    private func reconnectStatistics() -> String {
        let now = Instant.now()
        func ms(_ seconds: Double?) -> String { seconds.map { String(($0 * 1e6).rounded() / 1000) } ?? "null" }
        func s(_ seconds: Double?) -> String { seconds.map { String(ConnectionEvent.rounded($0)) } ?? "null" }
        return "\"reconnects\":\(metrics.reconnects),\"attempts\":\(attempts),"
            + "\"uptime_s\":\(s(metrics.totalUptime(at: now))),\"current_uptime_s\":\(s(metrics.currentUptime(at: now))),"
            + "\"disconnected_s\":\(s(metrics.totalDowntime(at: now))),"
            + "\"rtt_ms\":{\"min\":\(ms(metrics.rttMin)),\"avg\":\(ms(metrics.rttAverage)),\"max\":\(ms(metrics.rttMax))},"
            + "\"queued\":\(offlineQueue?.queuedTotal ?? 0),\"dropped\":\(offlineQueue?.droppedTotal ?? 0),"
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

func formatMilliseconds(_ seconds: Double) -> String {
    let ms = (seconds * 10_000).rounded() / 10
    return String(ms)
}
