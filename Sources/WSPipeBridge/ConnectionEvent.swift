import WebSocketCore
import WebSocketTransport

/// A connection state change of a run that reconnects: one line on stderr with -v, and
/// with --jsonl one JSON object on stdout in order with the messages. The man page's
/// EVENTS section is the schema (server mode adds its own types to the same schema).
enum ConnectionEvent: Equatable {
    /// Why a connection ended, as the `cause` member says it.
    enum Cause: String {
        case closed, lost, failed, stale
        case pingTimeout = "ping_timeout"
        case timedOut = "timed_out"
        case expectFailed = "expect_failed"
    }

    case connecting(url: String, attempt: Int)
    case connected(url: String, subprotocol: String?, attempt: Int)
    case disconnected(code: UInt16?, reason: String?, cause: Cause, upSeconds: Double)
    /// `seconds` until the next attempt; `retryAfter`: the server's Retry-After set it.
    case retry(seconds: Double, attempt: Int, retryAfter: Bool)
    /// The preamble completed on a connection (`messages` sent by it).
    case resubscribed(messages: Int)
    /// An --expect missed: the step, its pattern, why ("timeout" or "closed" with the
    /// server's code) and the last message seen (at most 200 bytes).
    case expectFailed(Conversation.Miss, lastMessage: [UInt8]?)
    case dropped(count: Int)
    case givingUp(attempts: Int, exit: Int32)

    /// The "type" members stdin ignores in --jsonl mode, so output replays as input.
    static let types: Set<String> = ["connecting", "connected", "disconnected", "retry", "resubscribed", "expect_failed", "dropped",
                                          "giving_up"]

    var json: [UInt8] {
        var out: [UInt8] = []
        func raw(_ text: String) { out += Array(text.utf8) }
        func string(_ text: String) {
            let bytes = Array(text.utf8)
            bytes.withUnsafeBytes { JSONWriter.appendString($0, to: &out) }
        }
        switch self {
        case .connecting(let url, let attempt):
            raw(#"{"type":"connecting","url":"#); string(url); raw(#","attempt":\#(attempt)}"#)
        case .connected(let url, let subprotocol, let attempt):
            raw(#"{"type":"connected","url":"#); string(url); raw(#","subprotocol":"#)
            if let subprotocol { string(subprotocol) } else { raw("null") }
            raw(#","attempt":\#(attempt)}"#)
        case .disconnected(let code, let reason, let cause, let up):
            raw(#"{"type":"disconnected","code":\#(code.map { String($0) } ?? "null"),"reason":"#)
            if let reason { string(reason) } else { raw("null") }
            raw(#","cause":"\#(cause.rawValue)","up_s":\#(Self.rounded(up))}"#)
        case .retry(let seconds, let attempt, let retryAfter):
            raw(#"{"type":"retry","in_s":\#(Self.rounded(seconds)),"attempt":\#(attempt),"retry_after":\#(retryAfter)}"#)
        case .resubscribed(let messages):
            raw(#"{"type":"resubscribed","messages":\#(messages)}"#)
        case .expectFailed(let miss, let last):
            raw(#"{"type":"expect_failed","step":"#); string(miss.step); raw(#","pattern":"#); string(miss.pattern)
            switch miss.why {
            case .timedOut: raw(#","reason":"timeout","code":null"#)
            case .closed(let code): raw(#","reason":"closed","code":\#(code.map { String($0) } ?? "null")"#)
            }
            raw(#","last":"#)
            if let last { string(String(decoding: last, as: UTF8.self)) } else { raw("null") }
            raw("}")
        case .dropped(let count):
            raw(#"{"type":"dropped","count":\#(count)}"#)
        case .givingUp(let attempts, let exit):
            raw(#"{"type":"giving_up","attempts":\#(attempts),"exit":\#(exit)}"#)
        }
        return out
    }

    /// The -v line (after "wspipe: * ").
    var text: String {
        switch self {
        case .connecting(let url, let attempt): return "connecting to \(url) (attempt \(attempt))"
        case .connected(let url, let subprotocol, let attempt):
            return "connected: \(url)" + (subprotocol.map { ", subprotocol \($0)" } ?? "") + " (attempt \(attempt))"
        case .disconnected(let code, let reason, let cause, let up):
            let close = code.map { " with \($0)" + (reason.map { $0.isEmpty ? "" : " '\($0)'" } ?? "") } ?? ""
            return "disconnected (\(cause.rawValue))\(close) after \(formatSeconds(Self.rounded(up))) s"
        case .retry(let seconds, let attempt, let retryAfter):
            return "retry in \(formatSeconds(Self.rounded(seconds))) s (attempt \(attempt)\(retryAfter ? ", the server's Retry-After" : ""))"
        case .resubscribed(let messages):
            return "resubscribed: preamble done, sent \(messages) message\(messages == 1 ? "" : "s") (--send, --send-file, --expect)"
        case .expectFailed(let miss, let last): return miss.sentence(lastMessage: last)
        case .dropped(let count): return "offline queue full: dropped \(count) message\(count == 1 ? "" : "s")"
        case .givingUp(let attempts, let exit): return "giving up after \(attempts) attempt\(attempts == 1 ? "" : "s"); exit \(exit)"
        }
    }

    /// Milliseconds resolution, as --stats gives durations.
    static func rounded(_ seconds: Double) -> Double { (seconds * 1000).rounded() / 1000 }
}

/// The lines --reconnect says without -v (hidden by -q), so that a person sees a gap in
/// the feed: one when a connection drops and another attempt follows, one when a
/// connection is back; and before the first connection, one when the first attempt failed
/// and another follows (a typo'd port must not look like a hang), one when it connects.
/// -v's event lines tell every step; these tell each gap once (failed attempts in between
/// say nothing more).
final class ReconnectionNotices {
    /// The last connection's end, said when a retry follows it.
    private var ended: ConnectionEvent?
    /// When the connection dropped (or the run started, if the first attempt failed), until
    /// one is back; `firstGap`: no connection was made yet.
    private var downSince: Instant?
    private var firstGap = false
    /// The run's start, until its first connection.
    private var startedAt: Instant? = .now()
    /// Why the first attempt failed (the one-shot client's words), said when a retry follows.
    private var firstFailure: String?
    /// The console says a drop and a return in its own lines: only the first failure here.
    private let consoleTellsConnections: Bool

    init(consoleTellsConnections: Bool = false) {
        self.consoleTellsConnections = consoleTellsConnections
    }

    /// An attempt failed before a connection: the first one of the run is said (once a
    /// retry follows it) as the one-shot client would say it.
    func attemptFailed(_ why: String) {
        guard startedAt != nil, !firstGap else { return }
        firstFailure = why
    }

    func note(_ event: ConnectionEvent, _ log: Diagnostics) {
        switch event {
        case .disconnected:
            ended = event
        case .retry:
            if let why = firstFailure {
                firstFailure = nil
                firstGap = true
                downSince = startedAt
                log.notice(ReconnectionNotices.notYet(why))
                return
            }
            guard let ended, let line = ReconnectionNotices.drop(ended) else { return }
            self.ended = nil
            downSince = .now()
            if !consoleTellsConnections { log.notice(line) }
        case .connected(let url, _, let attempt):
            startedAt = nil
            guard let since = downSince else { return }
            downSince = nil
            let down = formatSeconds(ConnectionEvent.rounded(Instant.now().seconds(since: since)))
            if !consoleTellsConnections { log.notice("\(firstGap ? "connected" : "reconnected") after \(down) s: \(url) (attempt \(attempt))") }
            firstGap = false
        case .givingUp:
            ended = nil
            firstFailure = nil
        case .connecting, .resubscribed, .expectFailed, .dropped:
            break
        }
    }

    /// A wait of the preamble that missed, with a retry to follow: "--expect #1 'ready': the
    /// connection ended before a match; reconnecting (--reconnect)" (the last miss, on which
    /// wspipe gives up, is said as the one-shot client says it).
    static func missed(_ line: String) -> String { "\(line); reconnecting (--reconnect)" }

    /// "not connected yet: WHY; retrying (--reconnect)", WHY as the one-shot client says it.
    static func notYet(_ why: String) -> String {
        "not connected yet: \(why); retrying (--reconnect)"
    }

    /// "disconnected after 3.2 s: WHY; reconnecting (--reconnect)"; nil for another event.
    static func drop(_ event: ConnectionEvent) -> String? {
        guard case .disconnected(let code, let reason, let cause, let up) = event else { return nil }
        let close = ClosePayload(code: code.map { CloseCode(rawValue: $0) }, reason: Array((reason ?? "").utf8))
        let why: String
        switch cause {
        case .closed: why = "the server closed the connection with \(describe(close))"
        case .lost: why = "the connection was lost without a closing handshake"
        case .failed: why = "the server broke the protocol; wspipe closed the connection with \(describe(close))"
        case .stale: why = "no message came for the --stale-timeout"
        case .pingTimeout: why = "no pong came within the --ping-timeout"
        case .timedOut: why = "the closing handshake timed out (--close-timeout)"
        case .expectFailed: why = "a step of the preamble missed (--expect), so wspipe closed the connection"
        }
        return "disconnected after \(formatSeconds(ConnectionEvent.rounded(up))) s: \(why); reconnecting (--reconnect)"
    }
}
