import Glibc
import WebSocketCore
import WebSocketEngine
import WebSocketTransport

extension Session {
    // MARK: - Signals and timers

    /// A signal: the connection closes with 1001; without one (disconnected, or opening)
    /// the run ends.
    func handleSignal() {
        guard let number = Signals.take() else { return }
        if driver != nil { log.event("received signal \(number)") }
        carryOut(ending.signal(number, connection))
    }

    func arm(after seconds: Double, _ fire: @escaping () -> Void) -> EventLoop.Timer {
        let timer = loop.timer(fire)
        loop.arm(timer, at: Instant.now().adding(seconds: seconds))
        timers.append(timer)
        return timer
    }

    func startTimers() {
        if let stale = config.client.staleTimeout {
            var staleTimer: EventLoop.Timer?
            let timer = loop.timer { [unowned self] in
                guard let timer = staleTimer else { return }
                let now = Instant.now()
                if let driver, driver.state == .open, now.seconds(since: lastReceived) >= stale {
                    log.event("no message received for \(formatSeconds(stale)) s (--stale-timeout); the connection counts as dead")
                    carryOut(ending.staleDetected())
                }
                // Checked again at the next possible expiry (also across reconnections).
                let next = lastReceived.adding(seconds: stale)
                loop.arm(timer, at: next > now ? next : now.adding(seconds: 1))
            }
            staleTimer = timer
            loop.arm(timer, at: lastReceived.adding(seconds: stale))
            timers.append(timer)
        }
    }

    /// --timeout or --idle-timeout is up (LimitKeeper); -n's close is connectionDidProcessInput's.
    func limitUp(_ reason: LimitReason) {
        switch reason {
        case .timeLimit: sessionTimedOut()
        case .idle:
            if driver != nil { log.event("no message for \(formatSeconds(config.stdio.idleTimeout ?? 0)) s (--idle-timeout); closing") }
            carryOut(ending.idle(connection))
        }
    }

    /// --timeout: the closing handshake waits at most a second more, so the session ends
    /// close to the limit the user set; without a connection the run ends.
    func sessionTimedOut() {
        if connection == .open(closeSent: false) {
            log.event("--timeout of \(formatSeconds(config.stdio.sessionTimeout ?? 0)) s reached; closing")
        }
        carryOut(ending.timeLimit(connection))
    }

    /// After a failed attempt: whether --timeout has passed meanwhile (the run then ends as
    /// timed out, not as the attempt's failure).
    func timeoutPassed() -> Bool {
        guard let deadline = sessionDeadline, Instant.now() >= deadline else { return false }
        ending.timeLimitPassedWhileDisconnected()
        return true
    }
}
