import Glibc
import WebSocketCore
import WebSocketEngine
import WebSocketTransport

/// The stdio face of a run: bridges stdin and stdout to one engine connection at a time
/// (a `ConnectionDriver` on an `EventLoop`) and tells how the run ended as an `ExitStatus`.
///
/// The socket, the protocol and the closing handshake belong to the driver; stdin and
/// stdout to the stdio endpoint, shared with --broadcast (`StdinReader` and `InputFramer`,
/// `StdoutWriter`), which reads and writes them without ever blocking and without setting
/// O_NONBLOCK (`StreamKind`), so a slow reader or an idle terminal never stalls pongs,
/// pings or timers. This type runs them over the connections it is given: what stdin's
/// reads and end mean for it (Session+Stdin.swift), signals and the session's timers
/// (--timeout, --linger, --idle-timeout, Session+Timers.swift), -n, the outcome and --stats
/// (Session+Statistics.swift). Why it is ending is one value (`SessionEnding`) whose
/// transitions return what to do.
///
/// Who runs it is not its business: a runner opens the connections and hands them over
/// (`attach`, `connectionOpened`, `clientBegins`), says where stdin's messages go while there
/// is none (`offline`), hears of the session's turning points through `hooks`, and ends the
/// run with `finishRun` (Session+Run.swift: what a runner calls). The runners are the one-connection client (`OneConnectionRunner`),
/// the reconnecting client (`ReconnectingRunner`) and the stdio server (`StdioServerRunner`).
final class Session: ConnectionDelegate, StdinReaderOwner {
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
    /// wspipe as a console (a person at a terminal): typed keys and the screen; nil in a
    /// pipeline. Set once, in init. Received messages reach it through stdout's diversion
    /// (`StdoutWriter.console`), not through a check here: one in the delegate's message
    /// methods kept them from being inlined (scripts/profile's messages-down: +4 %).
    private(set) var console: Console?
    let isConsole: Bool

    /// How the last connection ended.
    var connectionEnding: ConnectionEnding?
    /// Why the session is ending. Once a local end is in it, --decompress inflates no more
    /// (stdout drops binary messages).
    var ending = SessionEnding() {
        didSet { stdout.stopped = ending.localEnd != nil }
    }
    /// The client or the server (which wording, -1's count and the outcome follow).
    let face: Outcome.Face
    /// Where stdin's messages go while there is no connection (--reconnect's offline queue,
    /// set by its runner, drained into the next connection); nil: stdin waits in its pipe.
    var offline: OfflineQueue?
    /// What the runner is told (all optional: the session runs alone without them).
    var hooks = Hooks()
    var mismatchWarned = false
    /// Text mode writes a binary message raw, with a warning the first time (the console shows it).
    lazy var warnsOnBinary = !isConsole && config.stdio.outputFormat == .raw(separator: config.stdio.separator)
    // Counted and timed sessions.
    let started = Instant.now()
    /// --send, -n, --timeout and --idle-timeout (ConnectionLimits): the run's, or each
    /// client's when serving. The -n close and the endings' side effects are the session's.
    let limits: LimitKeeper
    var messagesSeen: UInt64 = 0
    /// The end-of-input ping of the current connection: answered (true), given up on
    /// (false: exit 12 if the close is otherwise clean), or not sent (nil).
    var deliveryConfirmed: Bool?
    var sent = (messages: UInt64(0), bytes: UInt64(0))  // --send messages (stdin's are the framer's)
    var timers: [EventLoop.Timer] = []
    /// The client's preamble and --until (Session+Conversation.swift); empty when serving.
    var conversation: Conversation
    /// What the conversation decided while a message was being written, carried out once
    /// the writer is done with it.
    var conversationActions: [Conversation.Action] = []
    /// --expect-timeout's timer for the current wait.
    var expectTimer: EventLoop.Timer?
    /// The last text message seen during a wait (at most 200 bytes), for a miss's line.
    var lastSeen: [UInt8]?
    /// Messages the current connection's preamble sent.
    var preambleSent: UInt64 = 0
    /// Under --reconnect, the line of a wait that missed, until the runner knows whether a
    /// retry follows (then it is said as a retry: `ReconnectionNotices.missed`) or not.
    var unsaidMiss: String?

    var endedDriver: ConnectionDriver?  // the last one, for the ending's facts
    var lastReceived = Instant.now()    // --stale-timeout
    /// --linger's wait before the end-of-input Close.
    var lingerTimer: EventLoop.Timer?

    /// stdin read size: lines are small and copied next to their headers, so text mode reads
    /// 64 KiB; binary payloads are masked in place and sent from the read buffer, so binary
    /// mode reads 128 KiB (at least --chunk-size). Stdin is not read while a read's worth
    /// (and up to 128 KiB more) waits for the socket: with a huge --chunk-size, at most one
    /// such read is outstanding.
    let stdinReadSize: Int
    let outboundHighWater: Int

    /// The session's turning points, for whoever runs it.
    struct Hooks {
        /// A connection ended: true to keep the session (and its loop) running for another,
        /// which the runner attaches. Nil: the session ends with it.
        var continuesAfter: ((ConnectionEnding) -> Bool)?
        /// The session ends while there is no connection (a signal, --timeout, the offline
        /// queue full): nil stops the loop; a runner that is opening one cancels it first.
        var endsWithoutConnection: (() -> Void)?
        /// A keepalive ping's round trip, in seconds.
        var roundTrip: ((Double) -> Void)?
        /// The preamble completed on the current connection (what waited for it may go).
        var preambleDone: (() -> Void)?
    }

    /// The client's session, on a loop of its own.
    convenience init(config: BridgeConfiguration, log: Diagnostics) throws(Failure) {
        self.init(config: config, log: log, loop: try Session.makeLoop(), span: .run, face: .client)
    }

    static func makeLoop() throws(Failure) -> EventLoop {
        do {
            return try EventLoop()
        } catch {
            guard case .cannotCreate(let what, let code) = error else { throw .local(call: "epoll", errno: 0) }
            throw .local(call: what, errno: code)
        }
    }

    /// A session on `loop` (the one-client server's, shared with its listener, whose limits
    /// span each client: `span` .connection).
    init(config: BridgeConfiguration, log: Diagnostics, loop: EventLoop, span: ConnectionLimits.Span, face: Outcome.Face) {
        self.config = config
        self.log = log
        self.loop = loop
        self.face = face
        stdinReadSize = config.stdio.mode == .binary ? max(128 * 1024, config.stdio.chunkSize) : 64 * 1024
        outboundHighWater = stdinReadSize + min(stdinReadSize, 128 * 1024)
        isConsole = config.stdio.console != nil
        framer = InputFramer(mode: config.stdio.inputMode, messageLimit: config.stdio.oneMessage ? 1 : nil)
        stdin = StdinReader(loop: loop, readSize: stdinReadSize)
        stdin.open = !config.stdio.receiveOnly
        stdout = StdoutWriter(loop: loop,
                              assembler: OutputAssembler(format: config.stdio.outputFormat, limit: config.stdio.maxMessages.map { UInt64($0) },
                                                         discard: config.stdio.sendOnly || config.stdio.console != nil),
                              decompress: config.stdio.decompress, maximumMessageSize: config.maxMessageSize,
                              console: config.stdio.console != nil)
        // The client sends --send as a step of its preamble (in order with the others).
        var limitSettings = config.stdio.limits(span: span, idleClock: .bothWaysReported)
        if face == .client { limitSettings.greeting = [] }
        limits = LimitKeeper(limitSettings, loop: loop, runStart: started) { _ in }
        conversation = Conversation(face == .client ? config.client.conversation : ConversationScript())
        stdin.owner = self
        stdout.onChange = { [unowned self] in refreshStdout() }
        stdout.watchesReader = { [unowned self] in ending.localEnd == nil && (driver?.state == .open || waitsForConnection) }
        stdout.onDecompressFailure = { [unowned self] error in decompressFailed(error) }
        limits.onLimit = { [unowned self] reason in limitUp(reason) }
        if conversation.script.matches || conversation.script.printMatchOnly {
            stdout.assembler.examiner = { [unowned self] kind, payload in examine(kind, payload) }
        }
        if let settings = config.stdio.console {
            let console = Console(session: self, settings: settings)
            log.screen = console.screen
            stdout.console = console
            self.console = console
        }
    }

    /// --timeout (also between connections or before the first) and --idle-timeout.
    var sessionDeadline: Instant? { limits.deadline }

    /// Puts a connection under this session: the --send messages go first, then stdin and
    /// stdout flow through it until it ends. Connections can follow one another (the
    /// one-client server, reconnection): stdin, stdout, counts and timers carry over, and
    /// `hooks.continuesAfter` decides, when one ends, whether the session waits for the next.
    func attach(_ opened: Opener.Opened, received: ByteBuffer) {
        let driver = ConnectionDriver(loop: loop, stream: opened.stream, agreement: opened.agreement,
                                      maximumMessageSize: config.maxMessageSize, options: connectionOptions,
                                      received: received, parsed: opened.headLength, delegate: self)
        console?.connected("connected to " + Diagnostics.redactedTarget(opened.url.description), subprotocol: opened.agreement.subprotocol,
                           compressed: driver.compression != nil)
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

    /// A connection's driver, not started yet, comes under the session: the preamble first.
    func begin(_ driver: ConnectionDriver) {
        self.driver = driver
        connectionEnding = nil
        deliveryConfirmed = nil
        let now = Instant.now()
        countReceived(at: now)  // what the last connection's last read brought counts in its span
        lastReceived = now
        let greeting = limits.attach(driver)  // --send; --idle-timeout counts from here
        sent.messages += greeting.messages
        sent.bytes += greeting.bytes
        converse(conversation.connected())
    }

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
        if !conversationActions.isEmpty { conversationDecided() }
    }

    // MARK: - --decompress

    /// A payload that does not inflate (or inflates past --max-message-size): the message is
    /// dropped, nothing more is written, and the session closes with 1003 and exits 1.
    func decompressFailed(_ error: ReceiveError) {
        guard driver != nil else { return }
        let number = stdout.assembler.messages + 1
        let format = config.stdio.decompress?.rawValue ?? "deflate"
        switch error {
        case .messageTooBig(_, let limit):
            log.error("message \(number) inflates (--decompress \(format)) past the limit of \(ByteCount.text(limit)) (--max-message-size)")
        default:
            log.error("message \(number) does not inflate as \(format) (--decompress): \(error.description)")
        }
        carryOut(ending.outputFailed(.decompressError, connection))
    }

    public func connection(_ connection: ConnectionDriver, didReceivePing payload: [UInt8]) {
        log.event("received ping (\(payload.count) bytes)\(connection.state == .open ? ", answering with pong" : "")")
    }

    public func connection(_ connection: ConnectionDriver, didReceivePong payload: [UInt8], roundTrip: Double?) {
        console?.pong(payload)
        if let rtt = roundTrip {
            hooks.roundTrip?(rtt)
            if config.client.printPingRTT { log.always("wspipe: ping round trip \(formatMilliseconds(rtt)) ms") }
            log.event("received pong (\(payload.count) bytes), round trip \(formatMilliseconds(rtt)) ms")
        } else {
            log.event("received pong (\(payload.count) bytes)")
        }
    }

    public func connection(_ connection: ConnectionDriver, didReceiveClose payload: ClosePayload) {
        log.event("received Close \(describe(payload))")
        // --print-match-only: stdout is the match alone, without the close line of a server
        // that went away before it (a restart under --reconnect) or after a miss.
        if !config.client.conversation.printMatchOnly { stdout.assembler.close(payload) }
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
        if limits.limitReached && !ending.countClosing && !awaitsOneMessage {
            // -n: enough messages; the ones that still arrive before the server's Close
            // are not written. The Close waits until they are on stdout (1011 if that fails).
            let count = config.stdio.maxMessages ?? 0
            log.event("received \(count) message\(count == 1 ? "" : "s") (-n); closing")
            carryOut(ending.countReached())
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
        face != .client && config.stdio.oneMessage && stdinOpen && !framer.isDone
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
        connectionEnding = ending
        conversationEnded(ending)
        console?.ended(ending, peer: face.role == .client ? "server" : "client")
        switch ending {
        case .closed, .failed: break
        case .lost, .timedOut: stdout.assembler.discardPending()  // a partial message is dropped
        }
        if hooks.continuesAfter?(ending) != true { loop.stop() }
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
            if ending.localEnd == nil && stdout.sink.failure == nil && stdout.sink.pendingBytes > 0 { driver.holdClose() } else { driver.releaseClose() }
        }
        stdout.refreshWatch()
    }

    func handleWriterFailure() {
        guard ending.localEnd == nil, let failure = stdout.sink.failure, driver != nil || waitsForConnection else { return }
        switch failure {
        case .readerGone:
            log.event("stdout reader went away; \(driver == nil ? "ending the run" : "closing")")
            carryOut(ending.outputFailed(.readerGone, connection))
        case .failed(let why):
            log.error(why)
            carryOut(ending.outputFailed(.outputError, connection))
        }
    }

    /// --reconnect before its first connection or between two: stdout is its reader's still
    /// (its departure ends the run, as while connected).
    var waitsForConnection: Bool { driver == nil && offline != nil }

    // MARK: - The end

    /// The connection as `SessionEnding`'s transitions need to know it.
    var connection: SessionEnding.Connection {
        driver.map { .open(closeSent: $0.closeSent != nil) } ?? .none
    }

    /// Carries out what a transition of `ending` returned, in order.
    func carryOut(_ actions: [SessionEnding.Action]) {
        for action in actions {
            switch action {
            case .stopStdin: stopStdin()
            case .releaseClose: driver?.releaseClose()
            case .close(let payload): driver?.close(payload)
            case .closeSoon(let payload): driver?.close(payload, within: min(config.closeTimeout, ConnectionDriver.tcpCloseWait))
            case .closeAfterDelivery(let payload): driver?.closeAfterDelivery(payload)
            case .closeUnlessEndedLocally(let payload): if ending.localEnd == nil { driver?.close(payload) }
            case .lingerThenClose(let seconds, let payload):
                lingerTimer = arm(after: seconds) { [unowned self] in driver?.closeAfterDelivery(payload) }
            case .cancelLinger: if let lingerTimer { loop.arm(lingerTimer, at: nil) }
            case .submitOutput: submitOutput()
            case .abandon: driver?.abandon()
            case .endWithoutConnection:
                if let ends = hooks.endsWithoutConnection { ends() } else { loop.stop() }
            }
        }
    }

    /// Reports a failure as it happens; when serving, the peer is the client.
    func say(_ failure: Failure) {
        _ = log.report(failure, as: face.role)
    }

    /// The session's end as facts (`Outcome`), with the runner's, which decide the exit
    /// status and its line.
    func outcome(_ facts: RunnerFacts) -> Outcome {
        var outcome = Outcome()
        outcome.face = face
        outcome.ending = connectionEnding
        outcome.connected = driver != nil
        outcome.localEnd = ending.localEnd
        outcome.timedOut = ending.timedOut ? config.stdio.sessionTimeout ?? 0 : nil
        outcome.timedOutBeforeOpen = facts.saysTimeoutBeforeOpen
        outcome.openError = facts.openError
        outcome.stale = ending.stale ? config.client.staleTimeout ?? 0 : nil
        outcome.queueBounds = config.client.reconnect.map { (messages: $0.queueSize, bytes: $0.queueBytes) }
        if case .failed(let why) = stdout.sink.failure { outcome.stdoutFailure = why }
        outcome.shortfall = countShortfall
        if config.stdio.requireCount, !ending.untilMatched, let until = config.client.conversation.until {
            outcome.untilShortfall = until.description
        }
        outcome.countReached = stdout.assembler.limit.map { stdout.assembler.messages >= $0 } ?? false
        outcome.deliveryConfirmed = deliveryConfirmed
        outcome.expectMissed = ending.expectMissed
        outcome.untilMatched = ending.untilMatched
        outcome.endingTold = console != nil
        return outcome
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
