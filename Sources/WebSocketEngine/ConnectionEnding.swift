import WebSocketCore
import WebSocketTransport

/// How a connection ended: one value, decided once, with the facts (RFC 6455 §7).
public enum ConnectionEnding: Equatable, Sendable {
    /// The peer's Close arrived: the closing handshake is done, whoever began it (§7.1.2).
    case closed(ClosingHandshake)
    /// We failed the connection because the peer broke the protocol (§7.1.7); the Close we
    /// sent carries `error.closeCode` (1002, 1007, 1009).
    case failed(ReceiveError)
    /// The connection ended without a closing handshake.
    case lost(ConnectionLoss)
    /// We gave up on the closing handshake: the peer made no progress (took none of our
    /// queued bytes, answered neither our end-of-input ping nor our Close) for the close
    /// timeout.
    case timedOut(CloseWait)
}

/// A completed closing handshake.
public struct ClosingHandshake: Equatable, Sendable {
    /// True when our Close went out before the peer's.
    public let initiatedByUs: Bool
    /// The Close we sent (our own, or the echo of the peer's code).
    public let sent: ClosePayload?
    /// The Close the peer sent.
    public let received: ClosePayload

    public init(initiatedByUs: Bool, sent: ClosePayload?, received: ClosePayload) {
        self.initiatedByUs = initiatedByUs
        self.sent = sent
        self.received = received
    }

    /// A normal end: no code or 1000, or the peer echoing the code we closed with.
    public var isNormal: Bool {
        guard let code = received.code, code != .normalClosure else { return true }
        return initiatedByUs && code == sent?.code
    }
}

/// Why a connection ended without a closing handshake.
public enum ConnectionLoss: Equatable, Sendable {
    /// The peer closed TCP without a Close (`afterOurClose`: it did not answer ours).
    case peerClosedTCP(afterOurClose: Bool)
    /// A read failed (a reset, a TLS alert).
    case readFailed(StreamFailure)
    /// A write failed.
    case writeFailed(StreamFailure)
    /// No pong within the ping timeout (seconds) after a ping was written.
    case pingTimeout(seconds: Double)
    /// The owner ended the connection without a closing handshake.
    case abandoned
}

/// The close timeout running out.
public struct CloseWait: Equatable, Sendable {
    /// The close timeout, in seconds.
    public let limit: Double
    /// Seconds from the start of the ending (end of input, or our Close) to giving up.
    public let waited: Double
    /// Whether our Close reached the socket (else the peer stopped reading before it).
    public let closeWritten: Bool
    /// Whether the peer was still sending when the wait ended: its data counted as progress
    /// from the end-of-input ping, for at most `ConnectionClosing.barrierIncomingLimit`
    /// close timeouts, and that bound ended the wait (not `limit` without progress).
    public let peerKeptSending: Bool

    public init(limit: Double, waited: Double, closeWritten: Bool, peerKeptSending: Bool = false) {
        self.limit = limit
        self.waited = waited
        self.closeWritten = closeWritten
        self.peerKeptSending = peerKeptSending
    }
}

/// Things worth telling a person (with -v) that the owner did not ask for itself.
public enum ConnectionNote: Equatable, Sendable {
    /// A keepalive ping was queued (payload bytes).
    case pingQueued(Int)
    /// The end-of-input barrier ping was queued: Close follows its pong.
    case barrierQueued
    /// The barrier ping was answered: the peer has read everything before it.
    case barrierAnswered
    /// No answer to the barrier ping in time (no progress for the close timeout, or the
    /// peer kept sending for `ConnectionClosing.barrierIncomingLimit` close timeouts): the
    /// Close goes anyway. `waited`: seconds since the ending began; `messages`: data
    /// messages sent on the connection, whose reading the peer did not confirm.
    case barrierUnanswered(waited: Double, messages: UInt64)
    /// We queued a Close.
    case closeQueued(ClosePayload)
}
