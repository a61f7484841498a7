/// Where a server listens: `[ADDR:]PORT`, `[IPv6]:PORT`, `unix:PATH`, or a listening socket
/// it was given: `fd:N` (any parent) or `systemd` (socket activation, `SystemdActivation`).
public enum ListenAddress: Sendable, Equatable, CustomStringConvertible {
    /// An IP literal (127.0.0.1 when none is given) and a port (0: any free port).
    case tcp(address: String, port: UInt16)
    /// A Unix domain socket at `path`.
    case unix(path: String)
    /// An inherited listening socket, descriptor N (`InheritedListener`).
    case descriptor(Int32)
    /// The sockets systemd passed (LISTEN_FDS, LISTEN_PID).
    case systemd

    /// Why a listen address is not one.
    public enum ParseError: Error, Equatable, Sendable, CustomStringConvertible {
        /// The port is not a number 0-65535.
        case badPort(String)
        /// The host is not an IP literal.
        case badAddress(String)
        /// `unix:` without a path.
        case emptyPath
        /// `fd:` without a descriptor number of 3 or more.
        case badDescriptor(String)

        /// The problem, as a sentence fragment that quotes the text.
        public var description: String {
            switch self {
            case .badPort(let text): return "'\(text)' is not a port (0-65535)"
            case .badAddress(let text): return "'\(text)' is not an IP address (listeners bind to addresses, not names)"
            case .emptyPath: return "unix: needs a socket path"
            case .badDescriptor(let text): return "'\(text)' is not a descriptor number (fd:3 and up; 0-2 are stdin, stdout, stderr)"
            }
        }
    }

    /// Whether only this host can connect: 127.0.0.0/8, ::1, a Unix socket. A socket we were
    /// given (`fd:`, `systemd`) is not: its address is known only once it is checked.
    public var isLoopback: Bool {
        if case .unix = self { return true }
        if case .tcp(let address, _) = self { return address == "::1" || address.hasPrefix("127.") }
        return false
    }

    /// Parses `8080`, `0.0.0.0:8080`, `[::1]:8080`, `unix:/run/x.sock`, `fd:3`, `systemd`.
    public init(parsing text: String) throws(ParseError) {
        if text == "systemd" {
            self = .systemd
            return
        }
        if text.hasPrefix("fd:") {
            let number = text.dropFirst(3)
            guard number.allSatisfy({ $0.isASCII && $0.isNumber }), let fd = Int32(number), fd > 2 else {
                throw .badDescriptor(String(number))
            }
            self = .descriptor(fd)
            return
        }
        if text.hasPrefix("unix:") {
            let path = String(text.dropFirst(5))
            guard !path.isEmpty else { throw .emptyPath }
            self = .unix(path: path)
            return
        }
        var address = "127.0.0.1"
        var portText = Substring(text)
        if text.hasPrefix("[") {
            guard let split = BracketedHost(text[...]), let port = split.port else { throw .badAddress(text) }
            address = String(split.host)
            portText = port
            guard let ip = IPAddress(address), ip.isIPv6 else { throw .badAddress(address) }
        } else if let colon = text.lastIndex(of: ":") {
            address = String(text[..<colon])
            portText = text[text.index(after: colon)...]
            guard let ip = IPAddress(address), !ip.isIPv6 else { throw .badAddress(address) }
        }
        guard !portText.isEmpty, portText.allSatisfy({ $0.isASCII && $0.isNumber }), let port = UInt16(portText) else {
            throw .badPort(String(portText))
        }
        self = .tcp(address: address, port: port)
    }

    /// The address as it parses back (`127.0.0.1:8080`, `[::1]:8080`, `unix:PATH`, `fd:N`).
    public var description: String {
        switch self {
        case .tcp(let address, let port): return address.contains(":") ? "[\(address)]:\(port)" : "\(address):\(port)"
        case .unix(let path): return "unix:\(path)"
        case .descriptor(let fd): return "fd:\(fd)"
        case .systemd: return "systemd"
        }
    }
}
