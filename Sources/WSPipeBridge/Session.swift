import Glibc
import WebSocketCore
import WebSocketEngine
import WebSocketTransport

/// One wspipe run: the stdio face of one engine connection. Connects and handshakes, then
/// bridges stdin and stdout to a `ConnectionDriver` on an `EventLoop` until the connection
/// ends, and reports how it ended as an `ExitStatus`.
///
/// The socket, the protocol and the closing handshake belong to the driver; stdin and
/// stdout to the stdio endpoint, shared with --broadcast (`StdinReader` and `InputFramer`,
/// `StdoutWriter`), which reads and writes them without ever blocking and without setting
/// O_NONBLOCK (`StreamKind`), so a slow reader or an idle terminal never stalls pongs,
/// pings or timers. This type runs them over one connection at a time: what stdin's reads
/// and end mean for it (Session+Stdin.swift), signals and the session's timers (--timeout,
/// --linger, --idle-timeout, Session+Timers.swift), -n, the outcome and --stats
/// (Session+Statistics.swift); the reconnecting client (`ReconnectingRunner`) and the
/// stdio server (`StdioServerRunner`) are its other runners.
public final class Session: ConnectionDelegate, StdinReaderOwner {
    let config: BridgeConfiguration
    let log: Diagnostics
    let loop: EventLoop
    var driver: ConnectionDriver?

    // Mutated for every message: Swift's run-time exclusivity checks (40% of the
    // instructions per small message, measured with callgrind) are off for these.
    @exclusivity(unchecked) var framer: InputFramer
    /// stdout: the format, --decompress and backpressure (the same writer as --broadcast's).
    let stdout: StdoutWriter
    /// stdin (the same reader as --broadcast's); never read with --receive-only.
    let stdin: StdinReader

    var ending: ConnectionEnding?
    /// Once set, --decompress inflates no more (stdout drops binary messages).
    var localEnd: LocalEnd? {
        didSet { stdout.stopped = localEnd != nil }
    }
    var mismatchWarned = false
    /// Text mode writes a binary message raw, with a warning the first time.
    lazy var warnsOnBinary = config.stdio.outputFormat == .raw(separator: config.stdio.separator)
    // Counted and timed sessions.
    let started = Instant.now()
    /// --send, -n, --timeout and --idle-timeout (ConnectionLimits): the run's, or each
    /// client's when serving. The -n close and the endings' side effects are the session's.
    let limits: LimitKeeper
    var timedOut = false
    var messagesSeen: UInt64 = 0
    var limitClosing = false            // -n reached
    var endOfInputAt: Instant?
    var closeAskedOnStdin = false    // a --jsonl close object: stdin's end, with its Close
    /// The end-of-input ping of the current connection: answered (true), given up on
    /// (false: exit 12 if the close is otherwise clean), or not sent (nil).
    var deliveryConfirmed: Bool?
    var sent = (messages: UInt64(0), bytes: UInt64(0))  // --send messages (stdin's are the framer's)
    var timers: [EventLoop.Timer] = []

    var endedDriver: ConnectionDriver?  // the last one, for the ending's facts
    var staleDetected = false
    var lastReceived = Instant.now()    // --stale-timeout
    /// The run that reconnects (--reconnect) this session is under; nil on a one-connection
    /// run and when serving. It owns the session's run then (`ReconnectingRunner.run`).
    weak var reconnecting: ReconnectingRunner?
    /// Who runs the session: the client, or the stdio server (`StdioServerRunner`), which
    /// changes the wording (the peer is the client), -1's count and the outcome.
    var runner = Outcome.Runner.client
    /// --linger's wait before the end-of-input Close.
    var lingerTimer: EventLoop.Timer?

    /// stdin read size: lines are small and copied next to their headers, so text mode reads
    /// 64 KiB; binary payloads are masked in place and sent from the read buffer, so binary
    /// mode reads 128 KiB (at least --chunk-size). Stdin is not read while a read's worth
    /// (and up to 128 KiB more) waits for the socket: with a huge --chunk-size, at most one
    /// such read is outstanding.
    let stdinReadSize: Int
    let outboundHighWater: Int

    public convenience init(config: BridgeConfiguration, log: Diagnostics) throws(Failure) {
        let loop: EventLoop
        do {
            loop = try EventLoop()
        } catch {
            guard case .cannotCreate(let what, let code) = error else { throw .local(call: "epoll", errno: 0) }
            throw .local(call: what, errno: code)
        }
        self.init(config: config, log: log, loop: loop, span: .run)
    }

    /// A session on `loop` (the one-client server's, shared with its listener, whose limits
    /// span each client: `span` .connection).
    init(config: BridgeConfiguration, log: Diagnostics, loop: EventLoop, span: ConnectionLimits.Span) {
        self.config = config
        self.log = log
        self.loop = loop
        stdinReadSize = config.stdio.mode == .binary ? max(128 * 1024, config.stdio.chunkSize) : 64 * 1024
        outboundHighWater = stdinReadSize + min(stdinReadSize, 128 * 1024)
        framer = InputFramer(mode: config.stdio.inputMode, messageLimit: config.stdio.oneMessage ? 1 : nil)
        stdin = StdinReader(loop: loop, readSize: stdinReadSize)
        stdin.open = !config.stdio.receiveOnly
        stdout = StdoutWriter(loop: loop,
                              assembler: OutputAssembler(format: config.stdio.outputFormat, limit: config.stdio.maxMessages.map { UInt64($0) },
                                                         discard: config.stdio.sendOnly),
                              decompress: config.stdio.decompress, maximumMessageSize: config.maxMessageSize)
        limits = LimitKeeper(config.stdio.limits(span: span, idleClock: .bothWaysReported), loop: loop, runStart: started) { _ in }
        stdin.owner = self
        stdout.onChange = { [unowned self] in refreshStdout() }
        stdout.watchesReader = { [unowned self] in localEnd == nil && driver?.state == .open }
        stdout.onDecompressFailure = { [unowned self] error in decompressFailed(error) }
        limits.onLimit = { [unowned self] reason in limitUp(reason) }
    }

    /// --timeout (also between connections or before the first) and --idle-timeout.
    var sessionDeadline: Instant? { limits.deadline }

    /// Runs the session to its end and returns the exit status (errors already printed).
    public func run() -> ExitStatus {
        let reconnecting = config.client.reconnect.map { ReconnectingRunner(session: self, settings: $0) }
        let status = reconnecting?.run() ?? runSession()
        if config.stdio.stats { log.always(statistics(status)) }
        withExtendedLifetime(reconnecting) {}  // --stats reads its members
        return status
    }

    /// Signals wake the loop.
    func startStandardStreams() {
        Signals.install(wakeFD: loop.wakeFD)
        loop.onWake = { [unowned self] in handleSignal() }
    }

    func runSession() -> ExitStatus {
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
        startTimers()
        attach(opened, received: receiveBuffer)
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
    func attach(_ opened: Opener.Opened, received: ByteBuffer) {
        let driver = ConnectionDriver(loop: loop, stream: opened.stream, agreement: opened.agreement,
                                      maximumMessageSize: config.maxMessageSize, options: connectionOptions,
                                      received: received, parsed: opened.headLength, delegate: self)
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
        let now = Instant.now()
        countReceived(at: now)  // what the last connection's last read brought counts in its span
        lastReceived = now
        let greeting = limits.attach(driver)  // --send; --idle-timeout counts from here
        sent.messages += greeting.messages
        sent.bytes += greeting.bytes
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
    func decompressFailed(_ error: ReceiveError) {
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
            reconnecting?.roundTrip(rtt)
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
            let now = Instant.now()  // once per read, not per message
            countReceived(at: now)
            lastReceived = now
        }
        if limits.limitReached && !limitClosing && !awaitsOneMessage {
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

    /// The messages received since the last count go to the limits (-n, --idle-timeout).
    @inline(__always)
    func countReceived(at now: Instant) {
        guard stdout.assembler.messages != messagesSeen else { return }
        _ = limits.received(Int(stdout.assembler.messages - messagesSeen), at: now)
        messagesSeen = stdout.assembler.messages
    }

    /// Serving with -1: the client's message may come before stdin's one message went out;
    /// the count's Close then waits for it (the client is owed it).
    var awaitsOneMessage: Bool {
        runner != .client && config.stdio.oneMessage && stdinOpen && !framer.isDone
    }

    var stdinOpen: Bool { stdin.open }

    func refreshStdin() { stdin.refresh() }

    public func connectionHasRoom(_ connection: ConnectionDriver) {
        if stdin.open && !stdin.pumpQueued { stdin.refresh() }
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

    // MARK: - stdout

    func submitOutput() {
        stdout.flush()
        refreshStdout()
    }

    /// Pauses socket reads while stdout lags, holds our Close until what came before it is
    /// on stdout, and watches stdout when it is blocked or its reader may leave.
    func refreshStdout() {
        handleWriterFailure()
        if let driver {
            if stdout.lagging { driver.pauseReading() } else { driver.resumeReading() }
            if localEnd == nil && stdout.sink.failure == nil && stdout.sink.pendingBytes > 0 { driver.holdClose() } else { driver.releaseClose() }
        }
        stdout.refreshWatch()
    }

    func handleWriterFailure() {
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

    // MARK: - The end

    /// Reports a failure as it happens; when serving, the peer is the client.
    func say(_ failure: Failure) {
        _ = log.report(failure, as: runner == .client ? .client : .server)
    }

    /// The session's end as facts (`Outcome`), which decide the exit status and its line.
    var outcome: Outcome {
        var outcome = Outcome()
        outcome.runner = runner
        outcome.ending = ending
        outcome.connected = driver != nil
        outcome.localEnd = localEnd
        outcome.timedOut = timedOut ? config.stdio.sessionTimeout ?? 0 : nil
        outcome.openError = reconnecting?.lastOpenError
        outcome.stale = staleDetected ? config.client.staleTimeout ?? 0 : nil
        outcome.queueBounds = config.client.reconnect.map { (messages: $0.queueSize, bytes: $0.queueBytes) }
        if case .failed(let why) = stdout.sink.failure { outcome.stdoutFailure = why }
        outcome.shortfall = countShortfall
        outcome.countReached = stdout.assembler.limit.map { stdout.assembler.messages >= $0 } ?? false
        outcome.deliveryConfirmed = deliveryConfirmed
        return outcome
    }

    /// Prints the outcome's line, if any, and returns its status.
    func conclude() -> ExitStatus {
        let verdict = outcome.verdict
        log.say(verdict)
        return verdict.status
    }

    /// --require-count: a clean end before the count came (-n N or -1; per client when
    /// serving, the one client with --oneshot; across connections with --reconnect).
    var countShortfall: Outcome.Shortfall? {
        guard config.stdio.requireCount, let limit = stdout.assembler.limit, stdout.assembler.messages < limit else { return nil }
        let required = config.stdio.maxMessages ?? 1
        return Outcome.Shortfall(received: stdout.assembler.messages + UInt64(required) - limit, required: required)
    }
}

func formatMilliseconds(_ seconds: Double) -> String {
    let ms = (seconds * 10_000).rounded() / 10
    return String(ms)
}
