import WebSocketEngine

/// The client with one connection (no --reconnect): opens it (off the loop, `ClientOpening`:
/// stdin waits in its pipe meanwhile, while --timeout and signals are heard), runs the
/// session over it, and ends the run with it. A signal or --timeout while opening cancels
/// the dial and ends the run (128 + the signal; the timeout's line and status).
final class OneConnectionRunner {
    private let session: Session
    private let opening: ClientOpening
    /// Why the opening failed.
    private var openError: OpenError?
    /// The session ended while its connection was opening: the result, once back, is dropped.
    private var endedWhileOpening = false

    init(session: Session) throws(Failure) {
        self.session = session
        opening = try ClientOpening(loop: session.loop)
    }

    /// Runs the session to its end and returns the exit status (errors already printed).
    func run() -> ExitStatus {
        session.hooks.endsWithoutConnection = { [unowned self] in endWithoutConnection() }
        session.console?.opening(Diagnostics.redactedTarget(session.config.client.url.description))
        session.startLoop()
        opening.start(session.opener(), notAfter: session.sessionDeadline) { [unowned self] result in opened(result) }
        session.runLoop()
        session.sayCompressionSummary()
        return session.finishRun(Session.RunnerFacts(openError: openError, saysTimeoutBeforeOpen: true))
    }

    private func opened(_ result: ClientOpening.Result) {
        switch result {
        case .opened(let done) where endedWhileOpening:
            done.opened.stream.close()
            session.stopLoop()
        case .opened(let done):
            session.connected(done.opened, received: done.buffer)
        case .failed(let error):
            if !endedWhileOpening {
                openError = error
                _ = session.timeoutPassed()  // --timeout, when shorter, limited the opening
            }
            session.stopLoop()
        }
    }

    /// A signal or --timeout before the connection opened: the dial is cancelled, and the
    /// run ends when its result is back.
    private func endWithoutConnection() {
        guard opening.isOpening else { return session.stopLoop() }
        endedWhileOpening = true
        opening.cancel()
    }
}
