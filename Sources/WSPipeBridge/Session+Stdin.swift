import Glibc
import WebSocketCore
import WebSocketEngine
import WebSocketTransport

extension Session {
    // MARK: - stdin

    /// Whether stdin should be read when it has data (the reader checks it is open): room in
    /// the socket queue, or in the offline queue while there is no connection.
    var wantsStdin: Bool {
        if isConsole { return true }  // keys are read whatever the connection's state
        guard let driver, conversation.preambleDone else { return offline?.acceptsMore == true }
        return driver.canSendData && driver.queuedBytes < outboundHighWater
    }

    /// A turn of stdin reads is over: while there is no connection (or its preamble runs),
    /// what it put in the offline queue may have dropped messages or overflowed it.
    func stdinTurnEnded() {
        if driver == nil || !conversation.preambleDone, let offline { queueChanged(offline) }
    }

    /// One read of stdin, framed into the connection, or into the offline queue while there
    /// is none (what stdin asks for then waits for the next connection). False: no more now.
    func stdinRead(_ read: StdinRead) -> Bool {
        do throws(InputError) {
            let before = framer.messages
            defer {
                if framer.messages != before { limits.sent() }
            }
            switch read {
            case .data(let chunk):
                if isConsole {
                    console?.input(UnsafeRawBufferPointer(start: chunk.base, count: chunk.count))
                    return stdin.open
                }
                // The two sinks are spelt out so that each is framed into directly (no
                // existential on the per-message path).
                if let driver, conversation.preambleDone {
                    try perform(framer.consume(chunk, into: driver))
                } else if let offline {
                    try perform(framer.consume(chunk, into: offline))
                }
                return !framer.isDone
            case .end:
                if let driver, conversation.preambleDone {
                    try perform(framer.finish(into: driver))
                } else if let offline {
                    try perform(framer.finish(into: offline))
                }
                stdin.open = false
                let now = Instant.now()
                log.event("end of stdin after \(framer.messages) messages")
                endOfInput(at: now)
                return false
            case .failed(let why):
                throw InputError.readFailed(why)
            }
        } catch {
            log.error(error.description)
            // The lines before the bad one were sent: let their replies arrive first.
            carryOut(ending.inputFailed(inputConnection))
            return false
        }
    }

    /// stdin ended: the Close after delivery (or --linger), now or on the next connection.
    func endOfInput(at instant: Instant) {
        if face != .client, let driver { connectionDidProcessInput(driver) }  // -1's count may be waiting for this
        let close = config.closesAtEndOfInput ? endOfInputClose : nil
        carryOut(ending.inputEnded(at: instant, close: close, linger: config.stdio.linger, inputConnection))
    }

    /// The connection as stdin's transitions see it: none while its preamble runs (stdin
    /// then goes to the offline queue; its Close waits for the queue's delivery).
    var inputConnection: SessionEnding.Connection { conversation.preambleDone ? connection : .none }

    /// The Close sent when stdin ends (--close-code, --close-reason).
    var endOfInputClose: ClosePayload {
        ClosePayload(code: config.stdio.closeCode, reason: Array(config.stdio.closeReason.utf8))
    }

    /// Carries out what stdin asked for besides data (--jsonl ping/close, -1's limit); a
    /// ping without a connection is not sent.
    func perform(_ actions: [InputAction]) {
        for action in actions {
            switch action {
            case .ping(let payload):
                if let driver, driver.ping(payload) { log.event("sending ping (\(payload.count) bytes) from stdin") }
            case .close(let payload):
                if driver != nil { log.event("close requested on stdin") }
                carryOut(ending.closeAsked(payload, inputConnection))
            case .limitReached:
                guard let driver else { stopStdin(); continue }
                log.event("sent stdin's first message (-1); no more stdin")
                stopStdin()
                if face != .client && limits.limitReached { connectionDidProcessInput(driver) }
            }
        }
    }

    // MARK: - The console's lines and commands

    /// Where a line typed in the console went.
    enum ConsoleDelivery {
        case sent
        /// To the offline queue, between two connections (--reconnect).
        case queued
        /// Neither: no connection, no queue.
        case nowhere
    }

    /// A line typed in the console, as one message: to the connection, or to the offline
    /// queue between two (--reconnect).
    func consoleSend(_ opcode: Opcode, _ bytes: [UInt8]) -> ConsoleDelivery {
        let sink: MessageSink
        let delivery: ConsoleDelivery
        // As stdin: after the preamble (meanwhile, under --reconnect, into the offline queue).
        if let driver, driver.canSendData, conversation.preambleDone {
            (sink, delivery) = (driver, .sent)
        } else if let offline {
            (sink, delivery) = (offline, .queued)
        } else {
            return .nowhere
        }
        sink.send(opcode, fin: true, bytes: bytes)
        sent.messages += 1
        sent.bytes += UInt64(bytes.count)
        limits.sent()
        if driver == nil, let offline { queueChanged(offline) }
        return delivery
    }

    /// Ctrl-D on an empty line, /quit: the end of input (a Close with 1000, exit 0).
    func consoleEndOfInput() {
        stdin.open = false
        log.event("end of input (Ctrl-D)")
        endOfInput(at: Instant.now())
        stopStdin()
        // No connection to close (the stdio server between clients, a retry's wait): the
        // run ends now rather than with the next one.
        if driver == nil { carryOut([.endWithoutConnection]) }
    }

    /// /close CODE REASON: the client's run ends with its connection, as after a --jsonl
    /// close; the stdio server closes this client and the console waits for the next.
    func consoleClose(_ payload: ClosePayload) {
        log.event("close requested in the console")
        if face == .client { carryOut(ending.closeAsked(payload, connection)) } else { driver?.closeAfterDelivery(payload) }
    }

    /// No more stdin for this session (its end, an error, a close of ours).
    func stopStdin() { stdin.stop() }

    /// No more stdin for this connection (the server closed it or broke the protocol):
    /// stdin stays open for the next one, if a retry or the next client follows (with
    /// `stopStdin` here, --reconnect after a server's 1001 never read stdin again).
    func pauseStdin() { stdin.pause() }

    /// --send-file framed as stdin is (lines, or JSON lines with --jsonl) into `driver`;
    /// its ping objects are sent as pings (the file was checked when the options were read).
    func sendFile(_ bytes: [UInt8], into driver: ConnectionDriver) {
        let file = SendFile(bytes: bytes, jsonLines: config.stdio.jsonLines, separator: config.stdio.separator)
        do throws(InputError) {
            let framed = try file.frame(into: driver)
            for case .ping(let payload) in framed.actions { driver.ping(payload) }
            sent.messages += framed.messages
            sent.bytes += framed.bytes
        } catch {
            log.warning("--send-file: \(error.description)")
        }
    }
}
