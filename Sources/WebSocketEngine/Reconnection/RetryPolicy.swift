import Glibc
import WebSocketCore

/// Why one connection attempt, or one connection, came to an end: the facts a
/// `RetryPolicy` decides on. A face maps its own errors onto these (wspipe's `OpenError`).
public enum AttemptFailure: Equatable, Sendable {
    /// Dialing failed in a way that may pass: refused, unreachable, a temporary DNS
    /// failure, a timeout ("waits for connectivity").
    case connectFailed
    /// Dialing failed in a way retrying does not change: TLS verification, a bad proxy
    /// setting, a name that does not exist.
    case connectRefusedForGood
    /// The server answered the handshake with this HTTP status; `retryAfter` in seconds
    /// (already converted from an HTTP date), if it sent one.
    case handshakeStatus(Int, retryAfter: Double?)
    /// The handshake answer was no acceptance for another reason (bad Accept, a
    /// subprotocol or extension we did not offer, not HTTP): never retried.
    case handshakeRejected
    /// The server closed the connection during the handshake.
    case handshakeLost
    /// An open connection ended.
    case ended(ConnectionEnding)
    /// An open connection received no message for the stale timeout.
    case stale
    /// An open connection's preamble did not get the answer it waits for (wspipe's
    /// --expect): the server may be restarting, so it counts as a failed attempt.
    case preambleFailed
}

extension AttemptFailure {
    /// The facts of a failed opening (shared by the CLI's `--reconnect` and WSKit's
    /// `reconnecting`): a server's `Retry-After` (RFC 9110 §10.2.3) read at `now` (seconds
    /// since the Unix epoch).
    public init(_ error: OpenError, now: Double = Double(time(nil))) {
        switch error {
        case .transport(.connect), .transport(.timedOut), .transport(.unixConnect), .transport(.system):
            self = .connectFailed
        case .transport(.resolve(_, let reason, _, _, _)):
            // Only a temporary failure (EAI_AGAIN) may pass; a name that does not exist will not.
            self = reason == String(cString: gai_strerror(EAI_AGAIN)) ? .connectFailed : .connectRefusedForGood
        case .transport(.proxy(.refused(_, _, let status, _, _))) where [502, 503, 504].contains(status):
            // The proxy could not reach the server: down or restarting behind it, as a refused connect.
            self = .connectFailed
        case .transport(.proxy(.socks(.connectFailed(let reply), _, _))) where (3...6).contains(reply):
            self = .connectFailed  // SOCKS5: network or host unreachable, connection refused, TTL expired
        case .transport(.tls(.closedDuringHandshake, _)), .transport(.tls(.handshakeFailed(.closed, _), _)),
             .transport(.tls(.handshakeFailed(.tlsSessionClosed, _), _)),
             .transport(.tls(.handshakeFailed(.system(errno: ECONNRESET), _), _)):
            // Hung up during the TLS handshake: a TCP proxy or load balancer in front of a
            // restarting server accepts and closes, as the server closing during the
            // WebSocket handshake does (wss:// --reconnect ended with exit 4 there).
            self = .handshakeLost
        case .transport:
            self = .connectRefusedForGood  // TLS verification, proxy refusals and settings
        case .handshake(.unexpectedStatus(let head), _):
            let retryAfter = head.values("Retry-After").first.flatMap { RetryAfter.seconds($0, now: now) }
            self = .handshakeStatus(head.statusCode, retryAfter: retryAfter)
        case .handshake, .redirect:
            self = .handshakeRejected
        case .handshakeLost:
            self = .handshakeLost
        }
    }
}

/// Which failures are worth another attempt. Pure: the caller owns the attempt count
/// (`Backoff`) and whether anything is left to do.
public struct RetryPolicy: Equatable, Sendable {
    /// Retry after every Close, whatever its code (not after a Close we started).
    public var reconnectOnClose: Bool

    /// Close codes that say "come back later": going away, internal error, service
    /// restart, try again later, bad gateway.
    public static let retriedCloseCodes: Set<UInt16> = [1001, 1011, 1012, 1013, 1014]
    /// Handshake statuses that are retried (429 and 5xx gateway trouble).
    public static let retriedStatuses: Set<Int> = [429, 500, 502, 503, 504]

    public init(reconnectOnClose: Bool = false) {
        self.reconnectOnClose = reconnectOnClose
    }

    /// Whether `failure` is retried.
    public func retries(_ failure: AttemptFailure) -> Bool {
        switch failure {
        case .connectFailed, .handshakeLost, .stale, .preambleFailed: return true
        case .connectRefusedForGood, .handshakeRejected: return false
        case .handshakeStatus(let status, _): return Self.retriedStatuses.contains(status)
        case .ended(let ending):
            switch ending {
            case .lost(.abandoned): return false
            case .lost, .timedOut: return true
            case .failed: return false  // the server broke the protocol: it would again
            case .closed(let handshake):
                if handshake.initiatedByUs { return false }  // we ended it (-n, stdin EOF, a signal)
                if reconnectOnClose { return true }
                guard let code = handshake.received.code else { return false }
                return Self.retriedCloseCodes.contains(code.rawValue)
            }
        }
    }
}

/// The `Retry-After` header (RFC 9110 §10.2.3): delay-seconds or an HTTP date.
public enum RetryAfter {
    /// Seconds to wait, or nil when `value` is neither form. A date in the past is 0.
    /// - Parameter now: the current time, in seconds since the Unix epoch.
    public static func seconds(_ value: String, now: Double) -> Double? {
        let text = value.trimmingSpaces
        if !text.isEmpty, text.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }) {
            return Double(text.utf8.count > 9 ? 999_999_999 : Int(text) ?? 0)
        }
        guard let date = httpDate(text) else { return nil }
        return max(0, date - now)
    }

    /// IMF-fixdate ("Sun, 06 Nov 1994 08:49:37 GMT") in seconds since the epoch.
    static func httpDate(_ text: String) -> Double? {
        let parts = text.split(separator: " ")
        guard parts.count == 6, parts[5] == "GMT", parts[0].hasSuffix(","),
              let day = Int(parts[1]), (1...31).contains(day), let year = Int(parts[3]), year >= 1970,
              let month = months.firstIndex(of: String(parts[2])) else { return nil }
        let clock = parts[4].split(separator: ":")
        guard clock.count == 3, let h = Int(clock[0]), let m = Int(clock[1]), let s = Int(clock[2]),
              h < 24, m < 60, s <= 60 else { return nil }
        let days = daysFromCivil(year: year, month: month + 1, day: day)
        return Double(days * 86_400 + h * 3600 + m * 60 + s)
    }

    private static let months = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]

    /// Days since 1970-01-01 of a proleptic Gregorian date (H. Hinnant's algorithm).
    static func daysFromCivil(year: Int, month: Int, day: Int) -> Int {
        let y = month <= 2 ? year - 1 : year
        let era = (y >= 0 ? y : y - 399) / 400
        let yoe = y - era * 400
        let doy = (153 * (month + (month > 2 ? -3 : 9)) + 2) / 5 + day - 1
        let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy
        return era * 146_097 + doe - 719_468
    }
}

extension String {
    fileprivate var trimmingSpaces: String {
        var s = Substring(self)
        while s.first == " " || s.first == "\t" { s.removeFirst() }
        while s.last == " " || s.last == "\t" { s.removeLast() }
        return String(s)
    }
}
