/// Where a gateway connects each client: a TCP host and port, or a Unix stream socket.
public enum StreamTarget: Sendable, Equatable, CustomStringConvertible {
    case tcp(HostPort)
    case unix(path: String)

    /// Parses `tcp:HOST:PORT` (IPv6 in brackets) or `unix:PATH`; nil for anything else.
    public init?(parsing text: String) {
        if text.hasPrefix("unix:") {
            let path = String(text.dropFirst(5))
            guard !path.isEmpty, !path.utf8.contains(0) else { return nil }
            self = .unix(path: path)
        } else if text.hasPrefix("tcp:"), let hostPort = HostPort(parsing: String(text.dropFirst(4))) {
            self = .tcp(hostPort)
        } else {
            return nil
        }
    }

    public var description: String {
        switch self {
        case .tcp(let hostPort): return "tcp:\(hostPort)"
        case .unix(let path): return "unix:\(path)"
        }
    }
}
