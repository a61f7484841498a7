import Glibc
import WebSocketEngine
import WebSocketTransport

extension EventLoop {
    /// Turns the loop until `done` holds or `seconds` pass; false when time ran out.
    @discardableResult
    public func spin(_ seconds: Double, until done: () -> Bool) -> Bool {
        let deadline = Instant.now().adding(seconds: seconds)
        let stopper = timer {}
        while !done() {
            if Instant.now() >= deadline { return false }
            arm(stopper, at: Instant.now().adding(seconds: 0.02))
            turn()
        }
        return true
    }
}

/// Two connected stream ends (a Unix socketpair), non-blocking, closed on exec (a child
/// a test spawns holds neither end).
public func streamPair() -> (TCPStream, TCPStream) {
    var fds: [Int32] = [-1, -1]
    precondition(socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0, &fds) == 0)
    return (TCPStream(adopting: fds[0], remoteAddress: "pair:0"), TCPStream(adopting: fds[1], remoteAddress: "pair:1"))
}
