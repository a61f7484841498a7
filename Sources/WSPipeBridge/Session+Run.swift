import WebSocketCore
import WebSocketEngine
import WebSocketTransport

extension Session {
    // MARK: - The run, as its runners see it

    /// The loop is about to run: from now on it handles signals (closing the connection,
    /// or ending the run when there is none, an opening cancelled), and the timers run.
    func startLoop() {
        Signals.install(wakeFD: loop.wakeFD)
        if let console {
            loop.onWake = { [unowned self] in
                handleSignal()
                console.woken()
            }
            console.start()
        } else {
            loop.onWake = { [unowned self] in handleSignal() }
        }
        Signals.exitAtOnce.store(false, ordering: .relaxed)
        startTimers()
    }

    /// Runs the loop until the session ends (`stopLoop`, or its connection's end).
    func runLoop() { loop.run() }

    /// The run ends (its runner stops it when the session ends without a connection).
    func stopLoop() { loop.stop() }

    /// The opener of the session's connection (`config`'s URL and settings).
    func opener() -> Opener { Opener(config: config, log: log) }

    /// The one-connection client's connection opened: it comes under the session.
    func connected(_ opened: Opener.Opened, received: ByteBuffer) {
        log.event("connected: \(Diagnostics.redactedTarget(opened.url.description))")
        attach(opened, received: received)
    }

    /// -v at the end: what permessage-deflate did, when it was agreed.
    func sayCompressionSummary() {
        if let driver, driver.compression != nil { log.event(compressionSummary(driver)) }
    }

    /// What a runner knows at the end besides the session's facts.
    struct RunnerFacts {
        /// Why the last opening failed (the outcome when no connection is open at the end).
        var openError: OpenError?
        /// The one-connection client says when --timeout came before its connection opened.
        var saysTimeoutBeforeOpen = false
        /// Members --stats adds (JSON, each followed by a comma).
        var statistics = ""
    }

    /// The end of every run, once its loop has stopped, written once: a signal now exits at
    /// once (nothing is left to close), what stdout holds is written, the outcome gives the
    /// status (its line printed), --stats. Its return is the run's last step.
    func finishRun(_ facts: @autoclosure () -> RunnerFacts = RunnerFacts()) -> ExitStatus {
        Signals.exitAtOnce.store(true, ordering: .relaxed)
        console?.finish()
        sayUnsaidMiss()
        submitOutput()
        stdout.drain()
        let facts = facts()
        let verdict = outcome(facts).verdict
        log.say(verdict)
        if config.stdio.stats { log.always(statistics(verdict.status, adding: facts.statistics)) }
        return verdict.status
    }
}
