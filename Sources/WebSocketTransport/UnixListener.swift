import CWSPipeShims
import Glibc

/// A non-blocking listening socket: TCP (`TCPListener`) or Unix (`UnixListener`).
public protocol ListeningSocket: AnyObject {
    var fileDescriptor: Int32 { get }
    /// The bound address for messages: "127.0.0.1:8080", "[::1]:8080", or the socket path.
    var localAddress: String { get }
    /// Takes one waiting connection (non-blocking, close-on-exec).
    func accept() -> AcceptResult
    func close()
}

extension TCPListener: ListeningSocket {}

/// A non-blocking listening Unix domain stream socket (close-on-exec, backlog 1024).
///
/// A file already at the path is removed only if it is a socket (a stale one left by a
/// process that died); any other file is an error (EADDRINUSE), never deleted. The socket
/// file is removed again on `close`. A path starting with `@` is a Linux abstract socket.
public final class UnixListener: ListeningSocket {
    public let fileDescriptor: Int32
    public let localAddress: String
    private let unlinksOnClose: Bool
    private var closed = false

    /// - Throws: `ListenError.system` (bind: EADDRINUSE for a live socket or another file,
    ///   EACCES...), `.invalidAddress` for a path that does not fit a sockaddr_un.
    public init(path: String, backlog: Int32 = 1024) throws(ListenError) {
        let abstract = path.hasPrefix("@")
        guard let made = try? UnixConnector.socketAddress(path: path) else { throw .invalidAddress(path) }
        var address = made.0
        let length = made.1
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_NONBLOCK.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw .system(call: "socket", address: path, errno: errno) }
        func bindOnce() -> Int32 {
            withUnsafePointer(to: &address) { pointer in
                pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.bind(fd, $0, length) }
            }
        }
        var result = bindOnce()
        if result != 0 && errno == EADDRINUSE && !abstract && UnixListener.isStaleSocket(path) {
            unlink(path)
            result = bindOnce()
        }
        guard result == 0 else {
            let code = errno
            Glibc.close(fd)
            throw .system(call: "bind", address: path, errno: code)
        }
        guard Glibc.listen(fd, backlog) == 0 else {
            let code = errno
            Glibc.close(fd)
            throw .system(call: "listen", address: path, errno: code)
        }
        fileDescriptor = fd
        localAddress = path
        unlinksOnClose = !abstract
    }

    deinit { close() }

    /// A socket file nobody listens on (connecting is refused).
    private static func isStaleSocket(_ path: String) -> Bool {
        var info = stat()
        guard lstat(path, &info) == 0, info.st_mode & S_IFMT == S_IFSOCK else { return false }
        do {
            let probe = try UnixConnector.connect(path: path, deadline: Deadline(seconds: 1))
            probe.close()
            return false
        } catch {
            if case .unixConnect(_, let code, _) = error { return code == ECONNREFUSED }
            return false
        }
    }

    public func accept() -> AcceptResult { acceptConnection(on: fileDescriptor, unixPath: localAddress) }

    public func close() {
        guard !closed else { return }
        closed = true
        Glibc.close(fileDescriptor)
        if unlinksOnClose { unlink(localAddress) }
    }
}

extension TCPStream {
    /// The local end's address (getsockname): "127.0.0.1:8080", "[::1]:8080"; nil for a
    /// Unix socket or when it cannot be read.
    public var localAddress: String? {
        var storage = sockaddr_storage()
        var length = socklen_t(MemoryLayout<sockaddr_storage>.size)
        return withUnsafeMutablePointer(to: &storage) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { sa -> String? in
                guard getsockname(fileDescriptor, sa, &length) == 0 else { return nil }
                let family = Int32(sa.pointee.sa_family)
                guard family == AF_INET || family == AF_INET6 else { return nil }
                return TCPConnector.describe(sa, family: family)
            }
        }
    }
}
