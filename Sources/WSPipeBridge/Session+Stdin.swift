import Glibc
import WebSocketCore
import WebSocketEngine
import WebSocketTransport

extension Session {
    // MARK: - stdin

    /// Whether stdin should be read when it has data (the reader checks it is open): room in
    /// the socket queue, or in the offline queue while there is no connection.
    var wantsStdin: Bool {
        guard let driver else { return reconnecting?.offlineQueue.acceptsMore == true }
        return driver.canSendData && driver.queuedBytes < outboundHighWater
    }

    /// One read of stdin, framed into the connection, or into the offline queue while there
    /// is none (what stdin asks for then waits for the next connection). False: no more now.
    func stdinTurnEnded() {
        if driver == nil, let queue = reconnecting?.offlineQueue { queueChanged(queue) }
    }

    func stdinRead(_ read: StdinRead) -> Bool {
        do throws(InputError) {
            let before = framer.messages
            defer {
                if framer.messages != before { limits.sent() }
            }
            switch read {
            case .data(let chunk):
                if let driver {
                    try perform(framer.consume(chunk, into: driver))
                } else if let queue = reconnecting?.offlineQueue {
                    try perform(framer.consume(chunk, into: queue))
                }
                return !framer.isDone
            case .end:
                if let driver {
                    try perform(framer.finish(into: driver))
                } else if let queue = reconnecting?.offlineQueue {
                    try perform(framer.finish(into: queue))
                }
                stdin.open = false
                endOfInputAt = .now()
                log.event("end of stdin after \(framer.messages) messages")
                endOfInput()
                return false
            case .failed(let why):
                throw InputError.readFailed(why)
            }
        } catch {
            log.error(error.description)
            localEnd = localEnd ?? .inputError
            stopStdin()
            // The lines before the bad one were sent: let their replies arrive first.
            guard let driver else {
                reconnecting?.pendingClose = ClosePayload(code: .internalError, reason: Array("stdin error".utf8))
                return false
            }
            driver.closeAfterDelivery(ClosePayload(code: .internalError, reason: Array("stdin error".utf8)))
            return false
        }
    }

    /// stdin ended: the Close after delivery (or --linger), now or on the next connection.
    func endOfInput() {
        guard let driver else {
            if config.stdio.closesAtEndOfInput { closeOnNextConnection(endOfInputClose) }
            return
        }
        if runner != .client { connectionDidProcessInput(driver) }  // -1's count may be waiting for this
        guard config.stdio.closesAtEndOfInput && driver.closeSent == nil else { return }
        if let linger = config.stdio.linger {
            lingerTimer = arm(after: linger) { [unowned self] in
                self.driver?.closeAfterDelivery(endOfInputClose)
            }
        } else {
            driver.closeAfterDelivery(endOfInputClose)
        }
    }

    /// The Close sent when stdin ends (--close-code, --close-reason).
    var endOfInputClose: ClosePayload {
        ClosePayload(code: config.stdio.closeCode, reason: Array(config.stdio.closeReason.utf8))
    }

    /// Carries out what stdin asked for besides data (--jsonl ping/close, -1's limit).
    func perform(_ actions: [InputAction]) {
        guard let driver else {
            for case .close(let payload) in actions {
                stopStdin()
                closeAskedOnStdin = true
                closeOnNextConnection(payload)
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
                closeAskedOnStdin = true
                driver.closeAfterDelivery(payload)
            case .limitReached:
                log.event("sent stdin's first message (-1); no more stdin")
                stopStdin()
                if runner != .client && limits.limitReached { connectionDidProcessInput(driver) }
            }
        }
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
