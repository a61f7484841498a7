import CWSPipeShims
import Glibc

/// Why an inherited descriptor (`-l fd:N`, `-l systemd`) cannot be served.
public enum InheritedSocketError: Error, Equatable, Sendable, CustomStringConvertible {
    /// Not an open descriptor, or not a socket (fstat/getsockopt failed with `errno`).
    case notASocket(fd: Int32, errno: Int32)
    /// A datagram or other non-stream socket (SO_TYPE).
    case notStream(fd: Int32)
    /// A connected stream socket (SO_ACCEPTCONN is 0): what a systemd `Accept=yes` unit passes.
    case notListening(fd: Int32)
    /// Neither TCP nor Unix (AF_PACKET, AF_VSOCK...).
    case unsupportedFamily(fd: Int32, family: Int32)

    public var description: String {
        switch self {
        case .notASocket(let fd, let code): return "fd \(fd) is not a socket (\(errnoText(code)))"
        case .notStream(let fd): return "fd \(fd) is not a stream socket (SO_TYPE is not SOCK_STREAM)"
        case .notListening(let fd):
            return "fd \(fd) is a connected socket, not a listening one (a systemd unit with Accept=yes? wspipe needs Accept=no)"
        case .unsupportedFamily(let fd, let family): return "fd \(fd) is neither a TCP nor a Unix socket (address family \(family))"
        }
    }
}

/// A listening stream socket this process was given (by systemd or any parent) instead of
/// making it: checked to be listening (SO_ACCEPTCONN) and a stream (SO_TYPE), marked
/// close-on-exec (no --exec child inherits it) and non-blocking. Closing never unlinks a
/// Unix socket's path: its owner made it, and a restarted service gets the same socket.
///
/// O_NONBLOCK lives on the file description, which the parent shares: it is set because the
/// loop accepts until EAGAIN, and a blocking accept4 would stall every connection when another
/// holder of the socket (a second process, systemd's own poll) took the waiting client first.
public final class InheritedListener: ListeningSocket {
    public let fileDescriptor: Int32
    public let localAddress: String
    /// True for a Unix socket (the address is its path, or @name for an abstract one).
    public let isUnix: Bool
    private var closed = false

    public init(fd: Int32) throws(InheritedSocketError) {
        func option(_ name: Int32) throws(InheritedSocketError) -> Int32 {
            var value: Int32 = 0
            var length = socklen_t(MemoryLayout<Int32>.size)
            guard getsockopt(fd, SOL_SOCKET, name, &value, &length) == 0 else { throw .notASocket(fd: fd, errno: errno) }
            return value
        }
        guard try option(SO_TYPE) == Int32(SOCK_STREAM.rawValue) else { throw .notStream(fd: fd) }
        guard try option(SO_ACCEPTCONN) != 0 else { throw .notListening(fd: fd) }
        var storage = sockaddr_storage()
        var length = socklen_t(MemoryLayout<sockaddr_storage>.size)
        let named: (family: Int32, text: String)? = withUnsafeMutablePointer(to: &storage) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { sa in
                guard getsockname(fd, sa, &length) == 0 else { return nil }
                let family = Int32(sa.pointee.sa_family)
                switch family {
                case AF_INET, AF_INET6: return (family, TCPConnector.describe(sa, family: family))
                case AF_UNIX: return (family, InheritedListener.unixPath(sa, length: Int(length)))
                default: return (family, "")
                }
            }
        }
        guard let named else { throw .notASocket(fd: fd, errno: errno) }
        guard [AF_INET, AF_INET6, AF_UNIX].contains(named.family) else { throw .unsupportedFamily(fd: fd, family: named.family) }
        _ = fcntl(fd, F_SETFD, FD_CLOEXEC)
        _ = wsp_set_nonblocking(fd)
        fileDescriptor = fd
        localAddress = named.text
        isUnix = named.family == AF_UNIX
    }

    deinit { close() }

    /// A sockaddr_un's path; an abstract name (leading NUL) as @name, an unnamed socket as "".
    private static func unixPath(_ sa: UnsafePointer<sockaddr>, length: Int) -> String {
        sa.withMemoryRebound(to: sockaddr_un.self, capacity: 1) { un in
            let offset = MemoryLayout<sockaddr_un>.offset(of: \sockaddr_un.sun_path) ?? 2
            let count = max(0, min(length - offset, MemoryLayout.size(ofValue: un.pointee.sun_path)))
            var bytes = withUnsafeBytes(of: un.pointee.sun_path) { Array($0.prefix(count)) }
            if bytes.first == 0 { bytes[0] = UInt8(ascii: "@"); return String(decoding: bytes, as: UTF8.self) }
            if let end = bytes.firstIndex(of: 0) { bytes.removeSubrange(end...) }
            return String(decoding: bytes, as: UTF8.self)
        }
    }

    public func accept() -> AcceptResult {
        acceptConnection(on: fileDescriptor, unixPath: isUnix ? localAddress : nil)
    }

    public func close() {
        guard !closed else { return }
        closed = true
        Glibc.close(fileDescriptor)
    }
}

/// The descriptors systemd passed (sd_listen_fds(3)): 3 ... 3+LISTEN_FDS-1, only when
/// LISTEN_PID names this process. Pure: the caller reads the variables and the pid.
public enum SystemdActivation {
    /// The first descriptor systemd passes (SD_LISTEN_FDS_START).
    public static let firstDescriptor: Int32 = 3
    /// The variables to unset once read, so that no child sees them.
    public static let variables = ["LISTEN_PID", "LISTEN_FDS", "LISTEN_FDNAMES"]

    public enum Problem: Error, Equatable, Sendable, CustomStringConvertible {
        case missing(String)
        case notANumber(name: String, value: String)
        case foreign(listenPID: String, pid: Int32)
        case none

        public var description: String {
            switch self {
            case .missing(let name): return "\(name) is not set (not started by systemd socket activation?)"
            case .notANumber(let name, let value): return "\(name)=\(value) is not a number"
            case .foreign(let listenPID, let pid): return "LISTEN_PID=\(listenPID) is not this process (\(pid))"
            case .none: return "LISTEN_FDS=0: systemd passed no socket"
            }
        }
    }

    public static func descriptors(listenPID: String?, listenFDs: String?, pid: Int32) throws(Problem) -> [Int32] {
        guard let listenPID else { throw .missing("LISTEN_PID") }
        guard let owner = Int32(listenPID), owner > 0 else { throw .notANumber(name: "LISTEN_PID", value: listenPID) }
        guard owner == pid else { throw .foreign(listenPID: listenPID, pid: pid) }
        guard let listenFDs else { throw .missing("LISTEN_FDS") }
        guard let count = Int32(listenFDs), count >= 0, count < 65_536 else { throw .notANumber(name: "LISTEN_FDS", value: listenFDs) }
        guard count > 0 else { throw .none }
        return Array(firstDescriptor..<(firstDescriptor + count))
    }
}

/// One accept4 on a listening socket (non-blocking, close-on-exec); TCP connections get
/// TCP_NODELAY and the peer's address, Unix ones `unixPath` as theirs.
func acceptConnection(on listening: Int32, unixPath: String?) -> AcceptResult {
    var storage = sockaddr_storage()
    while true {
        var length = socklen_t(MemoryLayout<sockaddr_storage>.size)
        let accepted: TCPStream? = withUnsafeMutablePointer(to: &storage) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { sa in
                let fd = wsp_accept4(listening, sa, &length)
                guard fd >= 0 else { return nil }
                if let unixPath { return TCPStream(fileDescriptor: fd, remoteAddress: unixPath) }
                var one: Int32 = 1
                _ = setsockopt(fd, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
                return TCPStream(fileDescriptor: fd, peerAddress: sa)
            }
        }
        if let accepted { return .accepted(accepted) }
        let code = errno
        switch code {
        case EINTR, ECONNABORTED: continue
        case EAGAIN: return .wouldBlock
        case EMFILE, ENFILE, ENOBUFS, ENOMEM: return .exhausted(errno: code)
        default: return .failed(errno: code)
        }
    }
}
