import Glibc
import WebSocketCore
import WebSocketEngine
import WebSocketTransport

/// The one-client server's per-client state (-l without a mode): unused otherwise.
struct Serving {
    var servesOnce: Bool?               // --oneshot; nil: not serving
    var clientsServed = 0
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
        serving.servesOnce = oneshot
        startStandardStreams()
        Signals.exitAtOnce.store(false, ordering: .relaxed)
        startTimers()
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
        serving.clientsServed += 1
        if let limit = config.stdio.maxMessages { stdout.assembler.limit = stdout.assembler.messages + UInt64(limit) }
        limitClosing = false
        timedOut = false
    }

    /// Its driver, before it starts: --send, then what stdin still holds for it.
    func clientBegins(_ driver: ConnectionDriver) {
        begin(driver)
        guard !config.stdio.receiveOnly, endOfInputAt == nil, localEnd == nil else { return }
        stdin.open = true
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
        refreshStdin()
        refreshStdout()
    }

    /// --jsonl: a client's connected/disconnected object, in order with its messages.
    func emitLine(_ line: [UInt8]) {
        stdout.assembler.event(line)
        submitOutput()
    }

    /// The current client has gone: true to wait for the next one.
    func clientLeft(_ ending: ConnectionEnding) -> Bool {
        // --whole-input: all of stdin is the first client's one message (its first fragments
        // may be on their way already), so the server ends with that client.
        guard serving.servesOnce == false, localEnd == nil, endOfInputAt == nil, !config.stdio.wholeInput else { return false }
        limits.detach()  // its --timeout and --idle-timeout stop; the next client's start anew
        endedDriver = driver
        driver = nil
        refreshStdin()
        submitOutput()
        return true
    }
}
