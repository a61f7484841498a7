import CWSPipeShims
import Glibc

/// A non-blocking TCP connection.
public final class TCPStream: ByteStream {
    public let fileDescriptor: Int32
    /// The address connected to, for messages ("127.0.0.1:9000", "[::1]:9000").
    public let remoteAddress: String
    private var closed = false

    init(fileDescriptor: Int32, remoteAddress: String) {
        self.fileDescriptor = fileDescriptor
        self.remoteAddress = remoteAddress
    }

    deinit { close() }

    public func read(into buffer: UnsafeMutableRawPointer, count: Int) -> IOResult {
        while true {
            let n = Glibc.read(fileDescriptor, buffer, count)
            if n > 0 { return .done(n) }
            if n == 0 { return .endOfStream }
            let code = errno
            if code == EINTR { continue }
            if code == EAGAIN || code == EWOULDBLOCK { return .wouldBlock(.read) }
            return .failed(.system(errno: code))
        }
    }

    public func write(_ vectors: UnsafePointer<iovec>, count: Int) -> IOResult {
        while true {
            // sendmsg with MSG_NOSIGNAL, not writev: a peer gone away is EPIPE here, never
            // a SIGPIPE that kills a process which did not ignore it (library users).
            var message = msghdr()
            message.msg_iov = UnsafeMutablePointer(mutating: vectors)
            message.msg_iovlen = min(count, 1024)
            let n = sendmsg(fileDescriptor, &message, Int32(MSG_NOSIGNAL))
            if n >= 0 { return .done(n) }
            let code = errno
            if code == EINTR { continue }
            if code == EAGAIN || code == EWOULDBLOCK { return .wouldBlock(.write) }
            return .failed(.system(errno: code))
        }
    }

    public var hasBufferedInput: Bool { false }
    public var hasPendingOutput: Bool { false }
    public func flush() -> IOResult { .done(0) }

    public func shutdownOutput() {
        if !closed { _ = Glibc.shutdown(fileDescriptor, Int32(SHUT_WR)) }
    }

    public func close() {
        if !closed {
            closed = true
            _ = Glibc.close(fileDescriptor)
        }
    }
}
