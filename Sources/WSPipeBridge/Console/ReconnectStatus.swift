import WebSocketTransport

/// The console's status row while --reconnect is between two connections (pure: the time
/// is given): "reconnecting in 3 s (attempt 2)", then "reconnecting now", and
/// what happens to the lines entered meanwhile (the offline queue sends them, in order, once
/// connected). Drawn above the prompt as part of the edit rows, so it changes in place and
/// never garbles the line being typed; gone once connected again.
struct ReconnectStatus: Equatable {
    enum Phase: Equatable {
        case connected
        /// The next attempt is armed for `at`.
        case waiting(at: Instant, attempt: Int)
        /// The attempt is dialing (or in its handshake and preamble).
        case dialing(attempt: Int)
    }

    private(set) var phase = Phase.connected
    /// Lines entered since the connection went (in the offline queue).
    private(set) var queued = 0
    /// When the last connection ended (nil: none had opened yet).
    private var downSince: Instant?

    /// A connection ended (told above by the console's "closed by ..." line).
    mutating func disconnected(at now: Instant) {
        downSince = now
    }

    mutating func retry(after seconds: Double, attempt: Int, now: Instant) {
        phase = .waiting(at: now.adding(seconds: seconds), attempt: attempt)
    }

    mutating func dialing(attempt: Int) {
        if phase != .connected || downSince != nil { phase = .dialing(attempt: attempt) }
    }

    mutating func lineQueued() { queued += 1 }

    /// Connected (again): the words the console's "connected to URL" line ends with, as
    /// " again after 2.1 s (attempt 3; sending the 2 lines entered meanwhile)"; empty for
    /// the run's first connection at its first attempt.
    mutating func connected(attempt: Int, now: Instant) -> String {
        defer { phase = .connected; queued = 0; downSince = nil }
        var notes: [String] = []
        if attempt > 1 { notes.append("attempt \(attempt)") }
        if queued > 0 { notes.append("sending the \(queued) line\(queued == 1 ? "" : "s") entered meanwhile") }
        let again = downSince.map { " again after \(formatSeconds(Self.tenths(now.seconds(since: $0)))) s" } ?? ""
        return again + (notes.isEmpty ? "" : " (" + notes.joined(separator: "; ") + ")")
    }

    /// The status row now; nil while connected.
    func line(at now: Instant) -> String? {
        let what: String
        switch phase {
        case .connected: return nil
        case .waiting(let at, let attempt):
            what = "reconnecting in \(formatSeconds(Self.remaining(until: at, now: now))) s (attempt \(attempt))"
        case .dialing(let attempt):
            what = "reconnecting now (attempt \(attempt))"
        }
        let lines = queued == 0 ? "lines entered now are sent once connected"
            : "\(queued) line\(queued == 1 ? "" : "s") queued, sent once connected"
        return "\(what); \(lines)"
    }

    /// When the row next changes on its own (the countdown's next second), if it does.
    func nextChange(after now: Instant) -> Instant? {
        guard case .waiting(let at, _) = phase else { return nil }
        let left = at.seconds(since: now)
        guard left > 1 else { return nil }
        return now.adding(seconds: left - (left.rounded(.up) - 1))
    }

    /// Whole seconds left, rounded up (tenths under one second).
    static func remaining(until at: Instant, now: Instant) -> Double {
        let left = max(0, at.seconds(since: now))
        return left >= 1 ? left.rounded(.up) : (left * 10).rounded(.up) / 10
    }

    private static func tenths(_ seconds: Double) -> Double { (seconds * 10).rounded() / 10 }
}
