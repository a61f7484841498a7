import Glibc

/// Why a connection could not be made or kept. Messages name the host and the cause and
/// never contain credentials.
public enum TransportError: Error, Equatable, CustomStringConvertible {
    /// The host name did not resolve.
    case resolve(host: String, reason: String)
    /// No address accepted the TCP connection.
    case connect(target: String, reason: String)
    /// The deadline passed while `stage` was under way (resolving, connecting, TLS, handshake).
    case timedOut(stage: String, seconds: Double)
    /// TLS could not be set up, or the server's certificate was not accepted.
    case tls(String)
    /// A read or write on an open connection failed.
    case io(String)
    /// A proxy refused or failed: an HTTP CONNECT status other than 2xx, a SOCKS5 failure
    /// reply, authentication required or refused, an answer that is not the protocol. The
    /// text names the proxy (never its credentials) and its status.
    case proxy(String)
    /// A setting that cannot work, found only when connecting (a proxy variable that is
    /// not a proxy URL, a Unix socket path that is too long).
    case invalidSetting(String)

    public var description: String {
        switch self {
        case .resolve(let host, let reason): return "cannot resolve host '\(host)': \(reason)"
        case .connect(let target, let reason): return "cannot connect to \(target): \(reason)"
        case .timedOut(let stage, let seconds): return "timed out after \(formatSeconds(seconds)) s \(stage)"
        case .tls(let why): return "TLS: \(why)"
        case .io(let why): return why
        case .proxy(let why): return why
        case .invalidSetting(let why): return why
        }
    }
}

/// The text of an errno value ("Connection refused").
public func errnoText(_ code: Int32) -> String {
    guard let text = strerror(code) else { return "error \(code)" }
    return String(cString: text)
}

/// Seconds for messages: "10", "0.5", "2.25" (at most three decimals).
public func formatSeconds(_ seconds: Double) -> String {
    let rounded = (seconds * 1000).rounded() / 1000
    if rounded == rounded.rounded() && rounded < 1e15 { return String(Int64(rounded)) }
    return String(rounded)
}
