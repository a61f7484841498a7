import Glibc

/// Connects to Unix domain stream sockets (`ws+unix://`, `--unix-socket`).
public enum UnixConnector {
    /// Connects to the socket at `path` before `deadline`. A path starting with `@` names a
    /// Linux abstract socket (the `@` stands for the leading NUL byte).
    public static func connect(path: String, deadline: Instant, timeoutSeconds: Double,
                               log: (String) -> Void = { _ in }) throws(TransportError) -> TCPStream {
        let target = "Unix socket \(path)"
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        let abstract = path.hasPrefix("@")
        var name = Array(path.utf8)
        if abstract { name[0] = 0 }
        let capacity = MemoryLayout.size(ofValue: address.sun_path)
        guard !name.isEmpty, name.count < capacity, !name.dropFirst(abstract ? 1 : 0).contains(0) else {
            throw .invalidSetting("the Unix socket path '\(path)' is empty or longer than \(capacity - 1) bytes")
        }
        withUnsafeMutableBytes(of: &address.sun_path) { $0.copyBytes(from: name) }
        let pathOffset = MemoryLayout<sockaddr_un>.offset(of: \sockaddr_un.sun_path) ?? 2
        let length = socklen_t(pathOffset + name.count + (abstract ? 0 : 1))

        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_NONBLOCK.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw .connect(target: target, reason: errnoText(errno)) }
        log("connecting to \(target)")
        while true {
            let result = withUnsafePointer(to: &address) { pointer in
                pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.connect(fd, $0, length) }
            }
            if result == 0 { break }
            let code = errno
            if code == EINTR { continue }
            if code == EAGAIN {
                // The server's backlog is full: try again shortly, until the deadline.
                if Instant.now() >= deadline {
                    Glibc.close(fd)
                    throw .timedOut(stage: "connecting to \(target) (its backlog is full)", seconds: timeoutSeconds)
                }
                usleep(10_000)
                continue
            }
            if code == EINPROGRESS {
                var entry = pollfd(fd: fd, events: Int16(POLLOUT), revents: 0)
                var ready: Int32
                repeat { ready = poll(&entry, 1, deadline.pollTimeout()) } while ready < 0 && errno == EINTR
                if ready == 0 {
                    Glibc.close(fd)
                    throw .timedOut(stage: "connecting to \(target)", seconds: timeoutSeconds)
                }
                var error: Int32 = 0
                var size = socklen_t(MemoryLayout<Int32>.size)
                getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &size)
                if error == 0 { break }
                Glibc.close(fd)
                throw .connect(target: target, reason: explain(error, path: path))
            }
            Glibc.close(fd)
            throw .connect(target: target, reason: explain(code, path: path))
        }
        log("connected to \(target)")
        return TCPStream(fileDescriptor: fd, remoteAddress: path)
    }

    private static func explain(_ code: Int32, path: String) -> String {
        var info = stat()
        if code == ECONNREFUSED, !path.hasPrefix("@"), stat(path, &info) == 0, info.st_mode & S_IFMT != S_IFSOCK {
            return "\(errnoText(code)) (the file is not a socket)"
        }
        switch code {
        case ECONNREFUSED: return "\(errnoText(code)) (nothing is listening on it)"
        case ENOTSOCK: return "\(errnoText(code)) (the file is not a socket)"
        default: return errnoText(code)
        }
    }
}
