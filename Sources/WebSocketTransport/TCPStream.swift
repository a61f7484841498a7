import CWSPipeShims
import Glibc

/// A non-blocking TCP connection.
public final class TCPStream: ByteStream {
    public let fileDescriptor: Int32
    /// The address connected to, for messages ("127.0.0.1:9000", "[::1]:9000").
    public var remoteAddress: String {
        switch peer {
        case .text(let text): return text
        case .inet(var address): return Self.describe(&address, family: AF_INET)
        case .inet6(var address): return Self.describe(&address, family: AF_INET6)
        }
    }
    private let peer: Peer
    private var closed = false

    /// An accepted peer is kept as its socket address and worded when asked: the text
    /// was a heap string (past 15 bytes) held by every idle server connection.
    private enum Peer {
        case text(String)
        case inet(sockaddr_in)
        case inet6(sockaddr_in6)
    }

    init(fileDescriptor: Int32, remoteAddress: String) {
        self.fileDescriptor = fileDescriptor
        peer = .text(remoteAddress)
    }

    /// An accepted TCP connection from `address` (AF_INET or AF_INET6).
    init(fileDescriptor: Int32, peerAddress address: UnsafePointer<sockaddr>) {
        self.fileDescriptor = fileDescriptor
        switch Int32(address.pointee.sa_family) {
        case AF_INET: peer = .inet(UnsafeRawPointer(address).loadUnaligned(as: sockaddr_in.self))
        case AF_INET6: peer = .inet6(UnsafeRawPointer(address).loadUnaligned(as: sockaddr_in6.self))
        default: peer = .text(TCPConnector.describe(address, family: Int32(address.pointee.sa_family)))
        }
    }

    private static func describe<Address>(_ address: inout Address, family: Int32) -> String {
        withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { TCPConnector.describe($0, family: family) }
        }
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
