import WebSocketCore
import WebSocketEngine

/// The stdio server (-l without a mode): the engine's `ServerMode` that bridges stdin and
/// stdout to the clients of a server one after the other, as `websocat -s`. The server
/// accepts the next client only when the current one has gone (`oneClientAtATime`); the
/// session is every client's delegate in turn. This runner owns what is the server's (who
/// is served, how many, whether the next one is waited for) and drives the session through
/// its client calls (`clientArrives`, `clientBegins`, `clientLeft`) and ends the run with
/// `finishRun`.
///
/// Each client gets the rest of stdin where the last one left it (a line cut by -1 or a
/// --jsonl close included); stdin is not read between clients. -n, -1, --send, --timeout
/// and --idle-timeout count per client. stdin EOF closes the current client (after
/// delivery) and ends the server; so does a local failure or the stdout reader leaving.
/// Exit 0 (also after a signal: a service asked to stop), 1 for a local failure; how
/// clients left is told by -v and --jsonl. With --oneshot the first client's end is the
/// end, with the status the client would have for it.
final class StdioServerRunner: ServerMode {
    private let session: Session
    private let oneshot: Bool
    private var clientsServed = 0

    /// `session`'s face is the server's (`.oneshot` with --oneshot, else `.service`).
    init(session: Session, oneshot: Bool) {
        self.session = session
        self.oneshot = oneshot
    }

    /// Serves until the session ends (see the type) and returns the exit status (the
    /// listener already started).
    func run() -> ExitStatus {
        session.hooks.continuesAfter = { [unowned self] ending in clientLeft(ending) }
        session.startLoop()
        session.refreshStdout()
        session.runLoop()
        return session.finishRun(Session.RunnerFacts(statistics: "\"clients\":\(clientsServed),"))
    }

    /// A client's handshake is done: its counts start (-n, -1, --timeout).
    func handler(for connection: ServerConnection) -> ConnectionDelegate {
        clientsServed += 1
        session.clientArrives()
        return session
    }

    /// Its driver, before it starts: --send, then what stdin still holds for it.
    func connectionWillStart(_ connection: ServerConnection, driver: ConnectionDriver) {
        session.console?.connected("client \(connection.info.remoteAddress) connected", subprotocol: connection.info.subprotocol,
                                   compressed: connection.info.deflate?.configuration != nil)
        session.clientBegins(driver)
    }

    /// Its driver started: stdin flows, its timers run.
    func connectionDidStart(_ connection: ServerConnection) { session.clientStarted() }

    /// --jsonl: a client's connected/disconnected object, in order with its messages.
    func emitLine(_ line: [UInt8]) { session.emitLine(line) }

    /// The current client has gone: true to wait for the next one.
    private func clientLeft(_ ending: ConnectionEnding) -> Bool {
        // --whole-input: all of stdin is the first client's one message (its first fragments
        // may be on their way already), so the server ends with that client.
        guard !oneshot, session.acceptsNextClient else { return false }
        session.clientLeft()
        return true
    }
}

// MARK: - The session's side of serving

extension Session {
    /// A client's handshake is done: its counts start (-n, -1, --timeout).
    func clientArrives() {
        submitOutput()
        if let limit = config.stdio.maxMessages { stdout.assembler.limit = stdout.assembler.messages + UInt64(limit) }
        ending.clientArrives()
    }

    /// Its driver, before it starts: --send, then what stdin still holds for it.
    func clientBegins(_ driver: ConnectionDriver) {
        begin(driver)
        guard !config.stdio.receiveOnly, ending.inputGoesOn else { return }
        stdin.open = true
        guard framer.isDone else { return }
        do throws(InputError) {
            try perform(framer.resume(limit: config.stdio.oneMessage ? 1 : nil, into: driver))
        } catch {
            log.error(error.description)
            carryOut(ending.inputFailed(connection))
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

    /// Whether the session outlives its client: not after a local end, stdin's end, or
    /// --whole-input's one message; nor when stdin is used up though its end was not read
    /// (-1 or a --jsonl close stopped reading just before it): the next client would get
    /// nothing but the Close.
    var acceptsNextClient: Bool {
        ending.inputGoesOn && !config.stdio.wholeInput && !stdinUsedUp
    }

    /// Nothing of stdin waits in the framer, and stdin itself is at its end (never for
    /// --receive-only, which does not read it).
    private var stdinUsedUp: Bool {
        !config.stdio.receiveOnly && !framer.holdsInput && stdin.source.isUsedUp
    }

    /// The current client has gone and the next is awaited.
    func clientLeft() {
        limits.detach()  // its --timeout and --idle-timeout stop; the next client's start anew
        endedDriver = driver
        driver = nil
        refreshStdin()
        submitOutput()
    }
}
