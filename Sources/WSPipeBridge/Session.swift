import Glibc
import WebSocketCore
import WebSocketTransport

/// One wspipe run: connect, handshake, then bridge stdin and stdout to the connection until
/// it closes, and report how it ended as an `ExitStatus`.
///
/// Threads: this one owns the socket (and the TLS session) and runs a poll(2) loop; a
/// stdin thread feeds it buffers; a stdout thread writes what it hands over. Neither
/// stdin nor stdout is made non-blocking.
public final class Session {
    private let config: BridgeConfiguration
    private let log: Diagnostics
    private let wakeup: Wakeup

    private var stream: ByteStream?
    private var connection: WebSocketConnection
    private var outbound = OutboundQueue()
    private var framer: InputFramer
    private var output: OutputAssembler
    private var stdinReader: StdinReader?
    private var stdoutWriter: StdoutWriter?
    private let vectors = UnsafeMutableBufferPointer<iovec>.allocate(capacity: 1024)

    // Receiving.
    private var receiveBuffer = ByteBuffer(capacity: Session.receiveBufferSize)
    private var parsed = 0                      // bytes of `receiveBuffer` already given to `connection`
    private var readInterest = PollInterest.read
    private var readReady = true                // a read may succeed without waiting
    private var endOfStream = false             // the server closed TCP (or the read failed)
    // Sending.
    private var writeBlocked: PollInterest?     // the last write could not finish
    private var outputShutDown = false
    private var weStartedClose = false          // our Close went out before the server's
    // Stdin.
    private var stdinOpen = true
    // Ending.
    private var closeDeadline: Instant?         // give up waiting for the server after this
    private var deferredClose: ClosePayload?    // stdin EOF: sent once the barrier ping is answered
    private var barrierDeadline: Instant?
    private var barrierLimit: Instant?          // the barrier never outlasts this
    private static let barrierPayload = Array("wspipe:eof".utf8)
    /// Longest wait for the server to close TCP once both Close frames are exchanged.
    static let tcpCloseWait = 1.0
    private var localEnd: LocalEnd?
    private var lost: String?                   // why the connection ended without a closing handshake
    private var pings: PingTracker
    private var mismatchWarned = false

    static let receiveBufferSize = 256 * 1024
    /// Read the socket again only after at least this much room is free in the buffer.
    static let minimumRead = 16 * 1024
    /// Stop taking stdin while this many bytes wait for the socket.
    static let outboundHighWater = 1 << 20
    /// Stop reading the socket while this many bytes wait for stdout.
    static let stdoutHighWater = 4 << 20

    /// Why we ended the session from our side.
    enum LocalEnd: Equatable {
        case signal(Int32)
        case readerGone
        case inputError
        case outputError
    }

    public init(config: BridgeConfiguration, log: Diagnostics) throws {
        guard let wakeup = Wakeup() else { throw TransportError.io("cannot create an eventfd: \(errnoText(errno))") }
        self.config = config
        self.log = log
        self.wakeup = wakeup
        connection = WebSocketConnection(maximumMessageSize: config.maxMessageSize)
        switch config.mode {
        case .text:
            framer = InputFramer(mode: .lines(separator: config.separator))
            output = OutputAssembler(separator: config.separator)
        case .binary:
            framer = InputFramer(mode: .chunks(size: config.chunkSize))
            output = OutputAssembler(separator: nil)
        }
        pings = PingTracker(interval: config.pingInterval ?? config.pingTimeout, timeout: config.pingTimeout)
    }

    deinit { vectors.deallocate() }

    /// Runs the session to its end and returns the exit status (errors already printed).
    public func run() -> ExitStatus {
        Signals.install(wakeFD: wakeup.fd)
        let reader = StdinReader(bufferSize: max(Session.receiveBufferSize, config.chunkSize), wakeup: wakeup)
        guard reader.start() else {
            log.error("cannot start the stdin thread")
            return .localError
        }
        stdinReader = reader

        do {
            try open()  // from its successful handshake on, a signal means a closing handshake
        } catch {
            log.error(error.message)
            return error.status
        }

        let writer = StdoutWriter(lowWater: Session.stdoutHighWater / 2, wakeup: wakeup)
        guard writer.start() else {
            log.error("cannot start the stdout thread")
            return .localError
        }
        stdoutWriter = writer
        pings.start(at: .now())

        processReceived()
        submitOutput()
        loop()

        stream?.close()
        stdinReader?.stop()
        Signals.exitAtOnce.store(true, ordering: .relaxed)
        writer.finish()
        return conclude(writerFailure: writer.currentFailure)
    }

    // MARK: - Opening

    private func open() throws(OpenError) {
        let opened = try Opener(config: config, log: log).open(into: receiveBuffer)
        stream = opened.stream
        Signals.exitAtOnce.store(false, ordering: .relaxed)
        parsed = opened.headLength
        log.event("connected: \(opened.url)")
    }

    // MARK: - The loop

    private func loop() {
        guard let stream else { return }
        var entries = [pollfd(fd: stream.fileDescriptor, events: 0, revents: 0),
                       pollfd(fd: wakeup.fd, events: Int16(POLLIN), revents: 0)]
        while true {
            handleSignal()
            handleWriterFailure()
            if readReady && mayRead { readSocket(stream) }
            pumpStdin()
            queueControlFrames()
            if writeBlocked == nil { flush(stream) }
            checkTimers(now: .now())
            if finishedStep(stream) { return }

            // Wait for something to happen.
            var events: Int16 = 0
            if mayRead && !readReady { events |= readInterest.pollEvents }
            if let blocked = writeBlocked { events |= blocked.pollEvents }
            entries[0].events = events
            entries[0].revents = 0
            entries[1].revents = 0
            let timeout: Int32 = (readReady || stream.hasBufferedInput) && mayRead || stdinWaiting ? 0 : nextTimeout()
            let ready = poll(&entries, 2, timeout)
            if ready < 0 {
                if errno == EINTR { continue }
                lost = "poll failed: \(errnoText(errno))"
                return
            }
            let revents = entries[0].revents
            if revents != 0 {
                let error = revents & Int16(POLLERR | POLLHUP) != 0
                if revents & readInterest.pollEvents != 0 || error { readReady = true }
                if let blocked = writeBlocked, revents & blocked.pollEvents != 0 || error { writeBlocked = nil }
            }
            if entries[1].revents != 0 { wakeup.drain() }
        }
    }

    /// Whether stdin has data we could take now. The stdin thread signals only when it adds
    /// an item, so after the outbound queue drains below its high-water mark the loop must
    /// come back for items that are already waiting instead of sleeping in poll(2).
    private var stdinWaiting: Bool {
        stdinOpen && connection.canSendData && outbound.byteCount < Session.outboundHighWater
            && (stdinReader?.hasItems ?? false)
    }

    /// Whether the socket should be read now: not after EOF, and not while stdout lags.
    private var mayRead: Bool {
        guard !endOfStream else { return false }
        let waiting = (stdoutWriter?.pendingBytes ?? 0) + output.batch.byteCount
        return waiting < Session.stdoutHighWater
    }

    private func readSocket(_ stream: ByteStream) {
        var reads = 0
        while mayRead && reads < 16 {
            if receiveBuffer.free < Session.minimumRead {
                // Pieces of it may still be on their way to stdout; they keep it alive.
                receiveBuffer = ByteBuffer(capacity: Session.receiveBufferSize)
                parsed = 0
            }
            let room = receiveBuffer.free
            switch stream.read(into: receiveBuffer.end, count: room) {
            case .done(let n):
                receiveBuffer.count += n
                reads += 1
                processReceived()
                submitOutput()
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
                if connection.closeReceived == nil && lost == nil {
                    lost = connection.closeSent == nil
                        ? "the server closed the TCP connection without a closing handshake"
                        : "the server closed the TCP connection without answering our Close"
                }
                return
            case .failed(let why):
                endOfStream = true
                if connection.closeReceived == nil && lost == nil { lost = why }
                return
            }
        }
    }

    /// Hands everything new in the receive buffer to the protocol and acts on the events.
    private func processReceived() {
        let buffer = receiveBuffer
        let input = UnsafeRawBufferPointer(start: buffer.base, count: buffer.count)
        let before = parsed
        defer {
            // Frames from the server while the end-of-input barrier waits: it is still busy.
            if parsed != before, let limit = barrierLimit, barrierDeadline != nil {
                barrierDeadline = min(Instant.now().adding(seconds: config.closeTimeout), limit)
            }
        }
        do {
            while let event = try connection.receive(input, &parsed) {
                switch event {
                case .messageStart(let kind):
                    output.start(kind)
                    if config.mode == .text && kind == .binary && !mismatchWarned {
                        mismatchWarned = true
                        log.warning("received a binary message in text mode; writing it raw, followed by a newline (see --binary)")
                    }
                case .messageData(let range):
                    output.data(buffer, buffer.base + range.lowerBound, range.count)
                case .messageEnd:
                    output.end()
                case .ping(let payload):
                    log.event("received ping (\(payload.count) bytes)\(connection.state == .open ? ", answering with pong" : "")")
                case .pong(let payload):
                    if payload == Session.barrierPayload {
                        log.event("received pong to the end-of-input ping")
                        releaseDeferredClose()
                    } else if let rtt = pings.pongReceived(payload, at: .now()) {
                        log.event("received pong (\(payload.count) bytes), round trip \(formatMilliseconds(rtt)) ms")
                    } else {
                        log.event("received unsolicited pong (\(payload.count) bytes)")
                    }
                case .close(let payload):
                    log.event("received Close \(describe(payload))")
                    if closeDeadline == nil { closeDeadline = Instant.now().adding(seconds: config.closeTimeout) }
                    stopStdin()
                }
            }
        } catch {
            output.discardPending()
            log.error("\(error.description); closing the connection with \(error.closeCode)")
            stopStdin()
            if closeDeadline == nil { closeDeadline = Instant.now().adding(seconds: min(config.closeTimeout, 1)) }
        }
    }

    private func submitOutput() {
        let batch = output.takeBatch()
        if !batch.isEmpty { stdoutWriter?.submit(batch) }
    }

    private func pumpStdin() {
        guard stdinOpen, let reader = stdinReader else { return }
        while connection.canSendData && outbound.byteCount < Session.outboundHighWater {
            guard let item = reader.next() else { return }
            do throws(InputError) {
                switch item {
                case .data(let chunk):
                    try framer.consume(chunk, into: &outbound, connection: &connection)
                case .endOfInput:
                    try framer.finish(into: &outbound, connection: &connection)
                    stdinOpen = false
                    log.event("end of stdin after \(framer.messages) messages")
                    if config.closeOnEndOfInput {
                        let reason = Array(config.closeReason.utf8)
                        closeAfterBarrier(ClosePayload(code: config.closeCode, reason: reason))
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
                closeAfterBarrier(ClosePayload(code: .internalError, reason: Array("stdin error".utf8)))
                return
            }
        }
    }

    private func stopStdin() {
        if stdinOpen {
            stdinOpen = false
            stdinReader?.stop()
        }
    }

    /// Closes at the end of input, but first makes sure the server has read every message:
    /// a Ping sent behind them is answered only after the server has processed them
    /// (§5.5.2). A server that gets our Close in the same read as our last messages may
    /// otherwise close before answering them, and those replies would be lost. The wait
    /// lasts `--close-timeout` from the last frame received: a server that is still working
    /// through our messages (its replies keep arriving) is given the time it needs, up to ten
    /// times the timeout. Without a Pong the Close goes out anyway.
    private func closeAfterBarrier(_ payload: ClosePayload) {
        guard connection.closeSent == nil, deferredClose == nil else { return }
        guard connection.ping(Session.barrierPayload) else {
            startClose(payload)
            return
        }
        log.event("end of input: sending ping to check the server has read everything, then Close")
        deferredClose = payload
        let now = Instant.now()
        barrierDeadline = now.adding(seconds: config.closeTimeout)
        barrierLimit = now.adding(seconds: config.closeTimeout * 10)
    }

    private func releaseDeferredClose() {
        guard let payload = deferredClose else { return }
        deferredClose = nil
        barrierDeadline = nil
        startClose(payload)
    }

    /// Begins the closing handshake from our side (no-op once a Close was sent).
    private func startClose(_ payload: ClosePayload) {
        guard connection.closeSent == nil else { return }
        weStartedClose = true
        connection.close(payload)
        log.event("sending Close \(describe(payload))")
        closeDeadline = Instant.now().adding(seconds: config.closeTimeout)
    }

    private func queueControlFrames() {
        guard connection.hasOutboundControl else { return }
        outbound.appendBytes(connection.takeOutboundControl())
    }

    private func flush(_ stream: ByteStream) {
        guard !outbound.isEmpty || stream.hasPendingOutput, !outputShutDown else { return }
        switch outbound.write(to: stream, vectors: vectors) {
        case .done, .endOfStream:
            break
        case .wouldBlock(let interest):
            writeBlocked = interest
        case .failed(let why):
            outbound.discard()
            outputShutDown = true
            if connection.closeReceived == nil && lost == nil { lost = "cannot send: \(why)" }
        }
        pings.written(upTo: outbound.totalWritten, at: .now())
    }

    private func handleSignal() {
        guard let number = Signals.take() else { return }
        log.event("received signal \(number)")
        if localEnd == nil || localEnd == .readerGone { localEnd = .signal(number) }
        stopStdin()
        startClose(ClosePayload(code: .goingAway))
    }

    private func handleWriterFailure() {
        guard localEnd == nil, let failure = stdoutWriter?.currentFailure else { return }
        switch failure {
        case .readerGone:
            log.event("stdout reader went away; closing")
            localEnd = .readerGone
            stopStdin()
            startClose(ClosePayload(code: .goingAway))
        case .failed(let why):
            log.error(why)
            localEnd = .outputError
            stopStdin()
            startClose(ClosePayload(code: .internalError, reason: Array("stdout error".utf8)))
        }
    }

    private func checkTimers(now: Instant) {
        if let deadline = barrierDeadline, now >= deadline { releaseDeferredClose() }
        if pings.pingDue(at: now), connection.state == .open {
            let payload = pings.nextPayload()
            connection.ping(payload)
            queueControlFrames()
            pings.queued(payload, endingAt: outbound.totalQueued, at: now)
            log.event("sending ping (\(payload.count) bytes)")
        }
        if let overdue = pings.overdue(at: now), lost == nil, connection.state != .closed {
            lost = "no pong within \(formatSeconds(overdue)) s (--ping-timeout): the connection is dead"
        }
    }

    /// True when the loop is over.
    private func finishedStep(_ stream: ByteStream) -> Bool {
        if lost != nil || endOfStream {
            // Deliver what already arrived and send what is queued, if the socket takes it.
            if !endOfStream { readSocket(stream) }
            if writeBlocked == nil { flush(stream) }
            if connection.closeReceived == nil && connection.failure == nil {
                connection.abandon()
                output.discardPending()
            }
            return true
        }
        if connection.state == .closed && outbound.isEmpty && !stream.hasPendingOutput && !outputShutDown {
            // Both Close frames are exchanged (or we failed the connection): end our side and
            // wait, up to the close deadline, for the server to close TCP (RFC 6455 §7.1.1).
            stream.shutdownOutput()
            outputShutDown = true
            let tcpDeadline = Instant.now().adding(seconds: min(Session.tcpCloseWait, config.closeTimeout))
            closeDeadline = closeDeadline.map { min($0, tcpDeadline) } ?? tcpDeadline
        }
        if let deadline = closeDeadline, Instant.now() >= deadline {
            if connection.closeReceived == nil && connection.failure == nil && lost == nil {
                lost = "no Close from the server within \(formatSeconds(config.closeTimeout)) s (--close-timeout)"
            }
            return true
        }
        return false
    }

    private func nextTimeout() -> Int32 {
        var soonest = pings.nextDeadline
        for deadline in [closeDeadline, barrierDeadline].compactMap({ $0 }) {
            soonest = soonest.map { min($0, deadline) } ?? deadline
        }
        return soonest?.pollTimeout() ?? -1
    }

    // MARK: - The end

    private func conclude(writerFailure: StdoutWriter.Failure?) -> ExitStatus {
        if case .signal(let number) = localEnd { return .signal(number) }
        if connection.failure != nil { return .protocolViolation }
        if localEnd == .inputError || localEnd == .outputError { return .localError }
        if case .failed(let why) = writerFailure {
            log.error(why)
            return .localError
        }
        if localEnd == .readerGone { return .success }
        if let received = connection.closeReceived {
            let code = received.code
            if code == nil || code == .normalClosure { return .success }
            // The server echoing the code we closed with is a normal end too.
            if weStartedClose && code == connection.closeSent?.code { return .success }
            log.error("the server closed the connection with \(describe(received))")
            return .closedByPeer
        }
        log.error("connection lost: \(lost ?? "the connection ended without a closing handshake")")
        return .connectionLost
    }

    private func describe(_ payload: ClosePayload) -> String {
        guard let code = payload.code else { return "(no status code)" }
        return payload.reason.isEmpty ? "\(code)" : "\(code) \(printable(payload.reason))"
    }
}

func formatMilliseconds(_ seconds: Double) -> String {
    let ms = (seconds * 10_000).rounded() / 10
    return String(ms)
}
