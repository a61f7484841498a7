import Glibc

/// Connects to Unix domain stream sockets (`ws+unix://`, `--unix-socket`).
public enum UnixConnector {
    /// Connects to the socket at `path` before `deadline`. A path starting with `@` names a
    /// Linux abstract socket (the `@` stands for the leading NUL byte).
    /// Throws `.unixPathLength`, `.unixConnect` or `.timedOut`.
    public static func connect(path: String, deadline: Deadline,
                               log: (String) -> Void = { _ in }) throws(TransportError) -> TCPStream {
        let target = "Unix socket \(path)"
        let made = try socketAddress(path: path)
        var address = made.0
        let length = made.1

        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_NONBLOCK.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw .system(call: "socket", errno: errno) }
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
                if deadline.hasPassed {
                    Glibc.close(fd)
                    throw .timedOut(.connectingUnix(path: path, backlogFull: true), seconds: deadline.seconds)
                }
                usleep(10_000)
                continue
            }
            if code == EINPROGRESS {
                let ready: Bool
                do {
                    ready = try deadline.wait(fd: fd, events: Int16(POLLOUT))
                } catch {
                    Glibc.close(fd)
                    throw error
                }
                if !ready {
                    Glibc.close(fd)
                    throw .timedOut(.connectingUnix(path: path, backlogFull: false), seconds: deadline.seconds)
                }
                var error: Int32 = 0
                var size = socklen_t(MemoryLayout<Int32>.size)
                getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &size)
                if error == 0 { break }
                Glibc.close(fd)
                throw refused(error, path: path)
            }
            Glibc.close(fd)
            throw refused(code, path: path)
        }
        log("connected to \(target)")
        return TCPStream(fileDescriptor: fd, remoteAddress: path)
    }

    /// The sockaddr_un of `path` and its length (`@` names an abstract socket).
    /// Throws `.unixPathLength` for an empty path, one too long, or one with a NUL.
    public static func socketAddress(path: String) throws(TransportError) -> (sockaddr_un, socklen_t) {
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        let abstract = path.hasPrefix("@")
        var name = Array(path.utf8)
        if abstract { name[0] = 0 }
        let capacity = MemoryLayout.size(ofValue: address.sun_path)
        guard !name.isEmpty, name.count < capacity, !name.dropFirst(abstract ? 1 : 0).contains(0) else {
            throw .unixPathLength(path: path, limit: capacity - 1)
        }
        withUnsafeMutableBytes(of: &address.sun_path) { $0.copyBytes(from: name) }
        let pathOffset = MemoryLayout<sockaddr_un>.offset(of: \sockaddr_un.sun_path) ?? 2
        return (address, socklen_t(pathOffset + name.count + (abstract ? 0 : 1)))
    }

    static func refused(_ code: Int32, path: String) -> TransportError {
        var info = stat()
        let notASocket = code == ENOTSOCK || (code == ECONNREFUSED && !path.hasPrefix("@") && stat(path, &info) == 0
                                              && info.st_mode & S_IFMT != S_IFSOCK)
        return .unixConnect(path: path, errno: code, notASocket: notASocket)
    }
}
