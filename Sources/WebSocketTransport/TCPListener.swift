import CWSPipeShims
import Glibc

/// Why a listening socket could not be made.
public enum ListenError: Error, Equatable, Sendable, CustomStringConvertible {
    /// The address is not an IP literal (listeners bind to addresses, not names).
    case invalidAddress(String)
    /// socket(2), bind(2) or listen(2) failed with `errno` (EADDRINUSE, EACCES...).
    case system(call: String, address: String, errno: Int32)

    /// The address is taken by another socket.
    public var isAddressInUse: Bool {
        if case .system(_, _, let code) = self { return code == EADDRINUSE }
        return false
    }

    /// Binding needs privileges (a port below 1024) or the path is not writable.
    public var isPermissionDenied: Bool {
        if case .system(_, _, let code) = self { return code == EACCES || code == EPERM }
        return false
    }

    public var description: String {
        switch self {
        case .invalidAddress(let text): return "cannot listen on '\(text)': not an IP address"
        case .system(let call, let address, let code): return "cannot listen on \(address): \(call): \(errnoText(code))"
        }
    }
}

/// What one `accept` gave.
public enum AcceptResult {
    case accepted(TCPStream)
    /// No connection waits.
    case wouldBlock
    /// Out of descriptors (EMFILE, ENFILE) or memory: stop accepting for a moment.
    case exhausted(errno: Int32)
    /// Another error; the listener still works (a connection reset before it was taken).
    case failed(errno: Int32)
}

/// A non-blocking listening TCP socket (SO_REUSEADDR, close-on-exec, backlog 1024).
public final class TCPListener {
    public let fileDescriptor: Int32
    /// The bound address, with the port the kernel chose for port 0 ("127.0.0.1:8080",
    /// "[::1]:8080").
    public let localAddress: String
    /// The bound port.
    public let port: UInt16
    private var closed = false

    /// Binds `address` (an IPv4 or IPv6 literal) on `port` (0: any free port) and listens;
    /// `reusePort` sets SO_REUSEPORT, so that processes of one user can share the port (the
    /// kernel spreads new connections among them).
    public init(address: String, port: UInt16, backlog: Int32 = 1024, reusePort: Bool = false) throws(ListenError) {
        guard let ip = IPAddress(address) else { throw .invalidAddress(address) }
        let target = TCPConnector.Address(ip, port: port)
        let fd = socket(target.family, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_NONBLOCK.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw .system(call: "socket", address: target.description, errno: errno) }
        var one: Int32 = 1
        _ = setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, socklen_t(MemoryLayout<Int32>.size))
        if reusePort && setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, socklen_t(MemoryLayout<Int32>.size)) != 0 {
            let code = errno
            Glibc.close(fd)
            throw .system(call: "setsockopt(SO_REUSEPORT)", address: target.description, errno: code)
        }
        if ip.isIPv6 { _ = setsockopt(fd, Int32(IPPROTO_IPV6), IPV6_V6ONLY, &one, socklen_t(MemoryLayout<Int32>.size)) }
        let bound = target.storage.withUnsafeBytes { raw in
            Glibc.bind(fd, raw.baseAddress!.assumingMemoryBound(to: sockaddr.self), socklen_t(raw.count))
        }
        guard bound == 0 else {
            let code = errno
            Glibc.close(fd)
            throw .system(call: "bind", address: target.description, errno: code)
        }
        guard Glibc.listen(fd, backlog) == 0 else {
            let code = errno
            Glibc.close(fd)
            throw .system(call: "listen", address: target.description, errno: code)
        }
        var storage = sockaddr_storage()
        var length = socklen_t(MemoryLayout<sockaddr_storage>.size)
        let described: String = withUnsafeMutablePointer(to: &storage) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { sa in
                guard getsockname(fd, sa, &length) == 0 else { return target.description }
                return TCPConnector.describe(sa, family: Int32(sa.pointee.sa_family))
            }
        }
        fileDescriptor = fd
        localAddress = described
        self.port = UInt16(described.split(separator: ":").last.flatMap { UInt16($0) } ?? port)
    }

    deinit { close() }

    /// Takes one waiting connection (non-blocking, close-on-exec, TCP_NODELAY).
    public func accept() -> AcceptResult { acceptConnection(on: fileDescriptor, unixPath: nil) }

    public func close() {
        if !closed {
            closed = true
            Glibc.close(fileDescriptor)
        }
    }
}

extension TCPStream {
    /// A stream over a connected socket this process made itself (a `socketpair` end, an
    /// accepted connection); it is set non-blocking and closed with the stream.
    public convenience init(adopting fd: Int32, remoteAddress: String) {
        _ = wsp_set_nonblocking(fd)
        self.init(fileDescriptor: fd, remoteAddress: remoteAddress)
    }
}
