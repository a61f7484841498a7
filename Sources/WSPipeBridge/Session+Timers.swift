import Glibc
import WebSocketCore
import WebSocketEngine
import WebSocketTransport

extension Session {
    // MARK: - Signals and timers

    func handleSignal() {
        guard let number = Signals.take() else { return }
        guard let driver else {
            // Disconnected: nothing to close.
            localEnd = .signal(number)
            loop.stop()
            return
        }
        log.event("received signal \(number)")
        if localEnd == nil || localEnd == .readerGone { localEnd = .signal(number) }
        stopStdin()
        driver.releaseClose()
        driver.close(ClosePayload(code: .goingAway))
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
                    staleDetected = true
                    driver.abandon()
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
            guard let driver else { return }
            log.event("no message for \(formatSeconds(config.stdio.idleTimeout ?? 0)) s (--idle-timeout); closing")
            stopStdin()
            if let linger = lingerTimer { loop.arm(linger, at: nil) }
            driver.close(ClosePayload(code: .normalClosure))
        }
    }

    func sessionTimedOut() {
        guard let driver else {
            timedOut = true
            loop.stop()
            return
        }
        // The closing handshake after --timeout waits at most a second more, so the session
        // ends close to the limit the user set.
        let limit = min(config.closeTimeout, ConnectionDriver.tcpCloseWait)
        if driver.closeSent == nil {
            timedOut = true
            log.event("--timeout of \(formatSeconds(config.stdio.sessionTimeout ?? 0)) s reached; closing")
            stopStdin()
            if let linger = lingerTimer { loop.arm(linger, at: nil) }
        }
        driver.releaseClose()
        driver.close(ClosePayload(code: .normalClosure), within: limit)
    }
}
