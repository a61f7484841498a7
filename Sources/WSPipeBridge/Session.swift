import Glibc
import WebSocketCore
import WebSocketTransport

/// One wspipe run: connect, handshake, then bridge stdin and stdout to the connection until
/// it closes, and report how it ended as an `ExitStatus`.
///
/// One thread does it all: a poll(2) loop over the socket (and the TLS session), stdin,
/// stdout and an eventfd for signals. stdin and stdout are read and written without ever
/// blocking and without setting O_NONBLOCK on them (see `StreamKind`), so a slow reader or
/// an idle terminal never stalls pongs, pings or timers, and no message waits for another
/// thread to wake up.
public final class Session {
    private let config: BridgeConfiguration
    private let log: Diagnostics
    private let wakeup: Wakeup

    // The network thread's state. Only that thread touches it, and it is mutated for every
    // message, so Swift's run-time exclusivity checks (40% of the instructions per small
    // message, measured with callgrind) are turned off for these properties.
    private var stream: ByteStream?
    @exclusivity(unchecked) private var connection: WebSocketConnection
    @exclusivity(unchecked) private var outbound = OutboundQueue()
    @exclusivity(unchecked) private var framer: InputFramer
    @exclusivity(unchecked) private var output: OutputAssembler
    private var stdin: StdinSource?
    private let stdout = StdoutSink()
    private var stdinReady = false              // a stdin read may find data without waiting
    private var stdinBuffer = ByteBuffer(capacity: 0)
    private var stdoutBlocked = false           // stdout took no more: poll it for POLLOUT
    private let vectors = UnsafeMutableBufferPointer<iovec>.allocate(capacity: 1024)

    // Receiving.
    @exclusivity(unchecked) private var receiveBuffer = ByteBuffer(capacity: Session.receiveBufferSize)
    @exclusivity(unchecked) private var parsed = 0  // bytes of `receiveBuffer` already given to `connection`
    private var readInterest = PollInterest.read
    private var readReady = true                // a read may succeed without waiting
    private var endOfStream = false             // the server closed TCP (or the read failed)
    // Sending.
    private var writeBlocked: PollInterest?     // the last write could not finish
    private var outputShutDown = false
    private var discardedAfterClose = 0
    /// Most bytes read (and dropped) after the connection is closed or failed.
    static let drainLimit = 1 << 20
    /// POLLRDHUP (Linux): the peer shut down its sending side. Glibc's module lacks it.
    static let pollReadHangUp: Int16 = 0x2000
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
    // Counted and timed sessions.
    private let started = Instant.now()
    private var sessionDeadline: Instant?       // --timeout
    private var timedOut = false
    private var lastActivity = Instant.now()    // last data message either way (--idle-timeout)
    private var lingerDeadline: Instant?        // --linger: close at this moment after stdin EOF
    private var limitClosing = false            // -n reached
    private var sent = (messages: UInt64(0), bytes: UInt64(0))  // --send messages (stdin's are the framer's)

    // Buffer sizes, measured with scripts/bench on 1 GiB transfers: larger ones buy no
    // speed (the kernel's socket buffers do the real buffering) and cost peak RSS.
    static let receiveBufferSize = 256 * 1024
    /// Read the socket again only after at least this much room is free in the buffer.
    static let minimumRead = 16 * 1024
    /// stdin read size: lines are small and copied next to their headers, so text mode reads
    /// 64 KiB; binary payloads are masked in place and sent from the read buffer, so binary
    /// mode reads 128 KiB (at least --chunk-size). Stdin is not read while a read's worth
    /// (and up to 128 KiB more) waits for the socket: with a huge --chunk-size, at most one
    /// such read is outstanding.
    private let stdinReadSize: Int
    private let outboundHighWater: Int
    /// Stop reading the socket while this many bytes wait for stdout.
    static let stdoutHighWater = 1 << 20

    /// Why we ended the session from our side.
    enum LocalEnd: Equatable {
        case signal(Int32)
        case readerGone
        case inputError
        case outputError
    }

    public init(config: BridgeConfiguration, log: Diagnostics) throws(Failure) {
        guard let wakeup = Wakeup() else { throw .local(call: "eventfd", errno: errno) }
        self.config = config
        self.log = log
        self.wakeup = wakeup
        stdinReadSize = config.mode == .binary ? max(128 * 1024, config.chunkSize) : 64 * 1024
        outboundHighWater = stdinReadSize + min(stdinReadSize, 128 * 1024)
        connection = WebSocketConnection(maximumMessageSize: config.maxMessageSize)
        framer = InputFramer(mode: config.inputMode, messageLimit: config.oneMessage ? 1 : nil)
        output = OutputAssembler(format: config.outputFormat, limit: config.maxMessages.map { UInt64($0) },
                                 discard: config.sendOnly)
        let start = started
        sessionDeadline = config.sessionTimeout.map { start.adding(seconds: $0) }
        pings = PingTracker(interval: config.pingInterval ?? config.pingTimeout, timeout: config.pingTimeout)
    }

    deinit { vectors.deallocate() }

    /// Runs the session to its end and returns the exit status (errors already printed).
    public func run() -> ExitStatus {
        let status = runSession()
        if config.stats { log.always(statistics(status)) }
        return status
    }

    private func runSession() -> ExitStatus {
        Signals.install(wakeFD: wakeup.fd)
        if config.receiveOnly {
            stdinOpen = false
        } else {
            let source = StdinSource()
            stdin = source
            stdinReady = !source.needsPoll
        }

        do {
            try open()  // from its successful handshake on, a signal means a closing handshake
        } catch {
            if let deadline = sessionDeadline, Instant.now() >= deadline {
                return log.report(.timedOutBeforeOpen(seconds: config.sessionTimeout ?? 0))
            }
            return log.report(.open(error))
        }
        lastActivity = .now()  // --idle-timeout counts from the open connection
        for text in config.sendMessages {
            let header = connection.makeHeader(opcode: .text, payloadLength: text.utf8.count)
            Array(text.utf8).withUnsafeBytes { outbound.appendFrame(header, copying: $0.baseAddress, count: $0.count) }
            sent.messages += 1
            sent.bytes += UInt64(text.utf8.count)
        }

        pings.start(at: .now())

        processReceived()
        submitOutput()
        loop()

        stream?.close()
        Signals.exitAtOnce.store(true, ordering: .relaxed)
        submitOutput()
        stdout.drain()
        return conclude(writerFailure: stdout.failure)
    }

    // MARK: - Opening

    private func open() throws(OpenError) {
        // --timeout, when shorter, also limits connecting.
        let opened = try Opener(config: config, log: log).open(into: receiveBuffer, notAfter: sessionDeadline)
        stream = opened.stream
        Signals.exitAtOnce.store(false, ordering: .relaxed)
        parsed = opened.headLength
        log.event("connected: \(Diagnostics.redactedTarget(opened.url.description))")
    }

    // MARK: - The loop

    private func loop() {
        guard let stream else { return }
        var entries = [pollfd(fd: stream.fileDescriptor, events: 0, revents: 0),
                       pollfd(fd: wakeup.fd, events: Int16(POLLIN), revents: 0),
                       pollfd(fd: stdin?.fd ?? 0, events: 0, revents: 0),
                       pollfd(fd: stdout.fd, events: 0, revents: 0)]
        while true {
            handleSignal()
            handleWriterFailure()
            if readReady && mayRead { readSocket(stream) }
            pumpStdin()
            // Timers may queue a Ping or a Close: they run before the queue is written.
            checkTimers(now: .now())
            queueControlFrames()
            if writeBlocked == nil { flush(stream) }
            if finishedStep(stream) { return }

            // Wait for something to happen.
            var events: Int16 = 0
            if mayRead && !readReady { events |= readInterest.pollEvents }
            if let blocked = writeBlocked { events |= blocked.pollEvents }
            // Done reading after a close (drain limit): only the server hanging up matters.
            let drained = !endOfStream && discardedAfterClose > Session.drainLimit
            if drained { events |= Session.pollReadHangUp }
            // Not interested in the socket: leave it out, or a hang-up or error it reports
            // regardless of `events` would wake poll(2) again and again.
            entries[0].fd = events != 0 ? stream.fileDescriptor : -1
            entries[0].events = events
            // A descriptor given a negative number is left out by poll(2).
            entries[2].fd = wantsStdin && !stdinReady ? (stdin?.fd ?? -1) : -1
            entries[2].events = Int16(POLLIN)
            // A pipe's write end reports POLLERR once its last reader is gone: watching for
            // that ends `wspipe ... | head -n1` when head exits, even if no further message
            // ever comes to provoke EPIPE.
            entries[3].fd = stdoutBlocked || watchesStdoutReader ? stdout.fd : -1
            entries[3].events = stdoutBlocked ? Int16(POLLOUT) : 0
            for i in entries.indices { entries[i].revents = 0 }
            let timeout: Int32 = (readReady || stream.hasBufferedInput) && mayRead || stdinWaiting ? 0 : nextTimeout()
            let ready = poll(&entries, nfds_t(entries.count), timeout)
            if ready < 0 {
                if errno == EINTR { continue }
                lost = "poll failed: \(errnoText(errno))"
                return
            }
            let revents = entries[0].revents
            if drained && revents & (Session.pollReadHangUp | Int16(POLLERR | POLLHUP)) != 0 {
                endOfStream = true  // the server has closed too: nothing left to wait for
            }
            if revents != 0 {
                let error = revents & Int16(POLLERR | POLLHUP) != 0
                if revents & readInterest.pollEvents != 0 || error { readReady = true }
                if let blocked = writeBlocked, revents & blocked.pollEvents != 0 || error { writeBlocked = nil }
            }
            if entries[1].revents != 0 { wakeup.drain() }
            if entries[2].revents != 0 { stdinReady = true }
            if entries[3].revents != 0 {
                if stdoutBlocked {
                    stdoutBlocked = stdout.flush()
                } else if entries[3].revents & Int16(POLLERR) != 0 {
                    stdout.readerWentAway()
                } else {
                    stdout.stopWatchingReader()
                }
            }
        }
    }

    /// Whether to watch an idle stdout pipe for its reader going away: while the connection
    /// is open (once a Close was sent or received, the session ends anyway, with the status
    /// the close decides; a write that meets EPIPE still counts), and not with --send-only
    /// (nothing is ever written there).
    private var watchesStdoutReader: Bool {
        stdout.readerLossIsVisible && stdout.failure == nil && !config.sendOnly && localEnd == nil
            && connection.state == .open
    }

    /// Whether stdin should be read when it has data: open, and room in the socket queue.
    private var wantsStdin: Bool {
        stdinOpen && connection.canSendData && outbound.byteCount < outboundHighWater
    }

    /// Whether stdin can be read right now (a regular file, or poll(2) said so): then the
    /// loop comes straight back instead of sleeping in poll(2).
    private var stdinWaiting: Bool { wantsStdin && stdinReady }

    /// Whether the socket should be read now: not after EOF, and not while stdout lags.
    private var mayRead: Bool {
        guard !endOfStream, discardedAfterClose <= Session.drainLimit else { return false }
        let waiting = stdout.pendingBytes + output.batch.byteCount
        return waiting < Session.stdoutHighWater
    }

    private func readSocket(_ stream: ByteStream) {
        var reads = 0
        while mayRead && reads < 16 {
            if receiveBuffer.free < Session.minimumRead {
                // Pieces of it may still wait for stdout; then they keep it alive and a new
                // one is taken.
                output.detachSmallMessage()
                ByteBuffer.reuse(&receiveBuffer, orMake: Session.receiveBufferSize)
                parsed = 0
            }
            let room = receiveBuffer.free
            switch stream.read(into: receiveBuffer.end, count: room) {
            case .done(let n):
                receiveBuffer.count += n
                reads += 1
                if connection.state == .closed {
                    // After the closing handshake or a failure, bytes are read only so the
                    // server gets to read our Close (closing with unread data would send a
                    // reset that can destroy it). A server that keeps streaming gets a megabyte
                    // of that; then we stop reading and wait out the close deadline.
                    discardedAfterClose += n
                    if discardedAfterClose > Session.drainLimit { return }
                }
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
                if connection.closeReceived == nil && lost == nil { lost = "\(why)" }
                return
            }
        }
    }

    /// Hands everything new in the receive buffer to the protocol and acts on the events.
    private func processReceived() {
        let buffer = receiveBuffer
        let input = UnsafeMutableRawBufferPointer(start: buffer.base, count: buffer.count)
        let before = parsed
        let messagesBefore = output.messages
        defer {
            if output.messages != messagesBefore { lastActivity = .now() }
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
                    if config.outputFormat == .raw(separator: config.separator) && kind == .binary && !mismatchWarned {
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
                        log.event("received pong (\(payload.count) bytes)")
                    }
                case .close(let payload):
                    log.event("received Close \(describe(payload))")
                    output.close(payload)
                    if closeDeadline == nil { closeDeadline = Instant.now().adding(seconds: config.closeTimeout) }
                    stopStdin()
                }
            }
            if output.limitReached && !limitClosing {
                // -n: enough messages; the ones that still arrive before the server's Close
                // are not written.
                limitClosing = true
                let count = config.maxMessages ?? 0
                log.event("received \(count) message\(count == 1 ? "" : "s") (-n); closing")
                stopStdin()
                startClose(ClosePayload(code: .normalClosure))
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
        guard !batch.isEmpty else { return }
        stdout.submit(batch)
        // Written at once when stdout takes it; what it does not take waits for POLLOUT.
        if !stdoutBlocked { stdoutBlocked = stdout.flush() }
    }

    private func pumpStdin() {
        guard let source = stdin else { return }
        while wantsStdin && stdinReady {
            // The last read's buffer is reused unless frames still reference it.
            ByteBuffer.reuse(&stdinBuffer, orMake: stdinReadSize)
            let chunk = stdinBuffer
            let item: StdinSource.Read = source.read(into: chunk.base, count: chunk.capacity)
            if case .data(let n) = item {
                chunk.count = n
                // A short read emptied a pipe or socket: wait for poll(2) instead of reading
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
                    try perform(framer.consume(chunk, into: &outbound, connection: &connection))
                    if framer.isDone { return }
                case .wouldBlock:
                    stdinReady = false
                    return
                case .end:
                    try perform(framer.finish(into: &outbound, connection: &connection))
                    stdinOpen = false
                    log.event("end of stdin after \(framer.messages) messages")
                    if config.closesAtEndOfInput && connection.closeSent == nil {
                        if let linger = config.linger {
                            lingerDeadline = Instant.now().adding(seconds: linger)
                        } else {
                            closeAfterBarrier(endOfInputClose)
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
                closeAfterBarrier(ClosePayload(code: .internalError, reason: Array("stdin error".utf8)))
                return
            }
        }
    }

    /// The Close sent when stdin ends (--close-code, --close-reason).
    private var endOfInputClose: ClosePayload {
        ClosePayload(code: config.closeCode, reason: Array(config.closeReason.utf8))
    }

    /// Carries out what stdin asked for besides data (--jsonl ping/close, -1's limit).
    private func perform(_ actions: [InputAction]) {
        for action in actions {
            switch action {
            case .ping(let payload):
                if connection.ping(payload) { log.event("sending ping (\(payload.count) bytes) from stdin") }
            case .close(let payload):
                log.event("close requested on stdin")
                stopStdin()
                closeAfterBarrier(payload)
            case .limitReached:
                log.event("sent stdin's first message (-1); no more stdin")
                stopStdin()
            }
        }
    }

    private func stopStdin() {
        stdinOpen = false
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
        // While the socket queue is full, pongs wait in the connection, which keeps only the
        // most recent few: a server that floods pings without reading cannot grow our memory.
        // A Close or our own ping always goes.
        if outbound.byteCount >= outboundHighWater && !connection.hasOutboundCloseOrPing { return }
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
        guard localEnd == nil, let failure = stdout.failure else { return }
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
        if let deadline = lingerDeadline, now >= deadline {
            lingerDeadline = nil
            closeAfterBarrier(endOfInputClose)
        }
        if let deadline = sessionDeadline, now >= deadline {
            sessionDeadline = nil
            // The closing handshake after --timeout waits at most a second more, so the
            // session ends close to the limit the user set.
            let limit = now.adding(seconds: min(config.closeTimeout, Session.tcpCloseWait))
            if connection.closeSent == nil {
                timedOut = true
                log.event("--timeout of \(formatSeconds(config.sessionTimeout ?? 0)) s reached; closing")
                stopStdin()
                lingerDeadline = nil
                deferredClose = nil
                barrierDeadline = nil
                startClose(ClosePayload(code: .normalClosure))
            }
            closeDeadline = min(closeDeadline ?? limit, limit)
        }
        if let idle = config.idleTimeout, connection.state == .open, now.seconds(since: lastActivity) >= idle {
            log.event("no message for \(formatSeconds(idle)) s (--idle-timeout); closing")
            stopStdin()
            lingerDeadline = nil
            startClose(ClosePayload(code: .normalClosure))
        }
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
        var timers = [closeDeadline, barrierDeadline, lingerDeadline, sessionDeadline]
        if let idle = config.idleTimeout, connection.state == .open { timers.append(lastActivity.adding(seconds: idle)) }
        for deadline in timers.compactMap({ $0 }) {
            soonest = soonest.map { min($0, deadline) } ?? deadline
        }
        return soonest?.pollTimeout() ?? -1
    }

    // MARK: - The end

    private func conclude(writerFailure: StdoutSink.Failure?) -> ExitStatus {
        if case .signal(let number) = localEnd { return .signal(number) }
        if connection.failure != nil { return .protocolViolation }
        if localEnd == .inputError || localEnd == .outputError { return .localError }
        if timedOut { return .timedOut }
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
        let rtt = pings.lastRoundTrip.map { String((($0 * 1e6).rounded()) / 1000) } ?? "null"
        line += Array(("{\"sent\":{\"messages\":\(framer.messages + sent.messages),\"bytes\":\(framer.bytes + sent.bytes)},"
            + "\"received\":{\"messages\":\(output.messages),\"bytes\":\(output.bytes)},"
            + "\"duration_s\":\(duration),"
            + "\"close_sent\":\(closeObject(connection.closeSent)),"
            + "\"close_received\":\(closeObject(connection.closeReceived)),"
            + "\"ping_rtt_ms\":\(rtt),\"exit\":\(status.rawValue)}").utf8)
        return String(decoding: line, as: UTF8.self)
    }
}

func formatMilliseconds(_ seconds: Double) -> String {
    let ms = (seconds * 10_000).rounded() / 10
    return String(ms)
}
