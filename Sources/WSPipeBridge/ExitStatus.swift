/// wspipe's exit statuses: one per class of outcome, so scripts can tell them apart.
/// The man page's EXIT STATUS section lists the same table.
public enum ExitStatus: Int32, Sendable, CaseIterable {
    /// Clean end: closing handshake done (stdin EOF, or the server closed with 1000 or an
    /// empty Close), or the stdout reader went away.
    case success = 0
    /// Local input or output error (stdin not UTF-8 in text mode, a read or write failed);
    /// when serving, a program to run that is missing.
    case localError = 1
    /// Usage error: bad option, bad URL.
    case usage = 2
    /// Cannot connect: DNS, refused, unreachable, or --connect-timeout expired; when serving,
    /// the address is in use or cannot be bound.
    case cannotConnect = 3
    /// TLS failure (handshake, certificate verification); when serving, the server's
    /// certificate or key cannot be loaded.
    case tlsFailure = 4
    /// The server refused the WebSocket handshake (non-101, bad Accept, subprotocol or
    /// extension mismatch, not HTTP); when serving with --bus, the bus refused our credentials.
    case handshakeRejected = 5
    /// The server broke the protocol; we failed the connection (1002, 1007, 1009).
    case protocolViolation = 6
    /// Connection lost without a closing handshake, or no pong within --ping-timeout.
    case connectionLost = 7
    /// The server closed with a code other than 1000 (code and reason on stderr).
    case closedByPeer = 8
    /// The proxy refused or failed: an HTTP CONNECT status other than 2xx (403, 407, 502...),
    /// a SOCKS5 failure reply, proxy authentication required or refused, an answer that is
    /// not the proxy protocol. (A proxy that cannot be reached at all is 3.)
    case proxyFailure = 9
    /// The offline queue was full under --queue-policy fail (--reconnect).
    case queueFull = 10
    /// --require-count: the session ended cleanly before -n's (or -1's) count of messages came.
    case countNotReached = 11
    /// The closing handshake completed, but the server never confirmed reading every message
    /// before it (no pong to the end-of-input ping): replies to the last ones may be missing.
    case deliveryUnconfirmed = 12
    /// An --expect missed: no match within --expect-timeout, or the server closed during
    /// the wait (with --reconnect: on the last attempt, once the retries ran out).
    case expectFailed = 13
    /// --timeout expired (after a closing handshake), as timeout(1) does.
    case timedOut = 124
    /// SIGHUP, SIGINT, SIGTERM: closing handshake with 1001, then the process dies of the
    /// signal (`wspipeExit`; a shell shows 128 + N); the status itself only if raising the
    /// signal returned.
    case hangup = 129
    case interrupted = 130
    case terminated = 143

    static func signal(_ number: Int32) -> ExitStatus {
        switch number {
        case 1: return .hangup
        case 2: return .interrupted
        default: return .terminated
        }
    }
}
