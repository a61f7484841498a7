import Glibc

/// A connect(2) that never waits: `start` begins it on a non-blocking socket, `finish`
/// reads its result once the socket is writable (an event loop watches it meanwhile).
public enum NonBlockingConnect {
    public enum Started {
        /// Connected at once (a Unix socket, or loopback TCP that was quick).
        case connected(TCPStream)
        /// Under way: wait until the descriptor is writable, then `finish`.
        case inProgress(fd: Int32)
        /// Refused before any wait, with this errno.
        case failed(errno: Int32)
    }

    /// Starts connecting to `address`.
    public static func start(_ address: TCPConnector.Address) -> Started {
        let started = address.storage.withUnsafeBytes { raw in
            begin(family: address.family, raw.baseAddress!.assumingMemoryBound(to: sockaddr.self), socklen_t(raw.count),
                  remoteAddress: address.description)
        }
        if case .connected(let stream) = started { setNoDelay(stream.fileDescriptor) }
        return started
    }

    /// Starts connecting to the Unix stream socket at `path` (`@` names an abstract one). A
    /// full backlog is EAGAIN, a failure like any other: nothing here retries.
    public static func start(unixPath path: String) -> Started {
        guard let made = try? UnixConnector.socketAddress(path: path) else { return .failed(errno: ENAMETOOLONG) }
        var address = made.0
        return withUnsafePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { begin(family: AF_UNIX, $0, made.1, remoteAddress: path) }
        }
    }

    /// The result of a connect that was under way, once its socket is writable: the stream,
    /// or the errno it failed with (the descriptor is then closed).
    public static func finish(_ fd: Int32, remoteAddress: String) -> Result<TCPStream, ConnectErrno> {
        var error: Int32 = 0
        var size = socklen_t(MemoryLayout<Int32>.size)
        if getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &size) != 0 { error = errno }
        guard error == 0 else {
            Glibc.close(fd)
            return .failure(ConnectErrno(errno: error))
        }
        setNoDelay(fd)
        return .success(TCPStream(fileDescriptor: fd, remoteAddress: remoteAddress))
    }

    /// The errno a connect failed with.
    public struct ConnectErrno: Error, Equatable, Sendable {
        public let errno: Int32
    }

    private static func begin(family: Int32, _ address: UnsafePointer<sockaddr>, _ length: socklen_t,
                              remoteAddress: String) -> Started {
        let fd = socket(family, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_NONBLOCK.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { return .failed(errno: errno) }
        while true {
            if Glibc.connect(fd, address, length) == 0 { return .connected(TCPStream(fileDescriptor: fd, remoteAddress: remoteAddress)) }
            let code = errno
            if code == EINTR { continue }
            if code == EINPROGRESS { return .inProgress(fd: fd) }
            Glibc.close(fd)
            return .failed(errno: code)
        }
    }

    /// A relay forwards what each read gave at once: Nagle would hold small writes back.
    private static func setNoDelay(_ fd: Int32) {
        var one: Int32 = 1
        _ = setsockopt(fd, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
    }
}
