import Glibc
import WebSocketCore

/// Why a connection could not be made, as facts (host, errno, stage, which check failed).
/// The bridge turns them into the user's sentence (`report` in WSPipeBridge); nothing here
/// names a command-line option, and nothing carries credentials.
public enum TransportError: Error, Equatable {
    /// The host name did not resolve: `reason` is the resolver's (gai_strerror) text;
    /// `family` the family asked for; `via` the proxy when it is the proxy's name;
    /// `connectTo`: the host was given to dial instead of the URL's (`DialOptions.connectTo`).
    case resolve(host: String, reason: String, family: AddressFamily = .any, via: ProxyHop? = nil, connectTo: Bool = false)
    /// The name resolved, but to no address of `family`; `available` are the others.
    case noAddress(host: String, family: AddressFamily, available: [String])
    /// No address accepted the TCP connection; `errno` is the last attempt's error.
    /// `via`: `target` is that proxy's address.
    case connect(target: String, errno: Int32, via: ProxyHop? = nil)
    /// A Unix socket refused the connection; `notASocket`: the path exists but is no socket.
    case unixConnect(path: String, errno: Int32, notASocket: Bool)
    /// The deadline (of `seconds`) passed during `stage`.
    case timedOut(Stage, seconds: Double)
    /// TLS could not be set up or the server was not accepted; `via`: with this HTTPS proxy.
    case tls(TLSFailure, via: ProxyURL? = nil)
    /// A proxy refused or failed (exit 9 in wspipe).
    case proxy(ProxyFailure)
    /// A proxy variable that is not a proxy URL (found only when connecting).
    case proxyVariable(ProxyConfigurationError)
    /// A Unix socket path that does not fit a sockaddr_un (`limit` bytes).
    case unixPathLength(path: String, limit: Int)
    /// A system call the connection needs failed (poll, eventfd, socket).
    case system(call: String, errno: Int32)

    /// The process or the system ran out of descriptors (EMFILE, ENFILE): no fault of the
    /// server's, and the same connection may be made once a descriptor is free.
    public var isOutOfDescriptors: Bool {
        switch self {
        case .connect(_, let code, _), .unixConnect(_, let code, _), .system(_, let code): return code == EMFILE || code == ENFILE
        default: return false
        }
    }
}

/// The proxy a connection went to, and where its setting came from.
public struct ProxyHop: Equatable, Sendable {
    public let proxy: ProxyURL
    public let source: ProxySource

    public init(proxy: ProxyURL, source: ProxySource) {
        self.proxy = proxy
        self.source = source
    }
}

/// What was under way when a deadline passed. (`report` in WSPipeBridge words it.)
public enum Stage: Equatable, Sendable {
    case resolving(host: String)
    case connecting(target: String)
    case connectingUnix(path: String, backlogFull: Bool)
    case connectingToProxy(ProxyHop)
    /// The TLS handshake, with the server or (`proxy`) with an HTTPS proxy.
    case tlsHandshake(proxy: ProxyURL?)
    case proxyExchange(ProxyURL, ProxyStep)
    case sendingHandshake
    case awaitingHandshakeResponse
}

/// A step of a proxy exchange.
public enum ProxyStep: Equatable, Sendable {
    case sendingConnect, awaitingConnectAnswer, greeting, authenticating, awaitingAnswer

    /// The step in words: "sending CONNECT to the HTTP proxy p:3128".
    public func describe(_ proxy: ProxyURL) -> String {
        switch self {
        case .sendingConnect: return "sending CONNECT to the \(proxy.name)"
        case .awaitingConnectAnswer: return "waiting for the \(proxy.name) to answer CONNECT"
        case .greeting: return "greeting the \(proxy.name)"
        case .authenticating: return "authenticating with the \(proxy.name)"
        case .awaitingAnswer: return "waiting for the \(proxy.name) to answer"
        }
    }
}

/// How a proxy refused or failed. `description` names the proxy (never its credentials),
/// the target and the status.
public enum ProxyFailure: Error, Equatable, CustomStringConvertible {
    /// HTTP CONNECT answered with a status other than 2xx; `schemes`: Proxy-Authenticate's.
    case refused(proxy: ProxyURL, target: HostPort, status: Int, reason: String, schemes: [String])
    /// The answer to CONNECT is not HTTP.
    case notHTTP(proxy: ProxyURL, HandshakeError)
    /// The SOCKS5 exchange failed.
    case socks(SOCKS5Error, proxy: ProxyURL, target: HostPort)
    /// The proxy closed the connection during `step` (before its answer).
    case closed(proxy: ProxyURL, target: HostPort, step: ProxyStep)
    /// Reading or writing the proxy connection failed during `step`.
    case failed(StreamFailure, proxy: ProxyURL, step: ProxyStep)

    public var description: String {
        switch self {
        case .refused(let proxy, let target, let code, let reason, let schemes):
            let status = "\(code)\(reason.isEmpty ? "" : " \(reason)")"
            switch code {
            case 407:
                if !schemes.isEmpty && !schemes.contains(where: { $0.lowercased() == "basic" }) {
                    return "the \(proxy.name) asks for \(schemes.joined(separator: "/")) authentication, which wspipe "
                        + "does not support (only Basic) [\(status)]"
                }
                if proxy.hasCredentials { return "the \(proxy.name) refused the user name and password [\(status)]" }
                return "the \(proxy.name) requires authentication [\(status)]; put the user name and password in "
                    + "the proxy URL: \(proxy.kind.rawValue)://USER:PASSWORD@\(proxy.hostPort)"
            case 403: return "the \(proxy.name) does not allow connecting to \(target) [\(status)]"
            case 502, 503, 504: return "the \(proxy.name) could not reach \(target) [\(status)]"
            default: return "the \(proxy.name) refused CONNECT \(target) [\(status)]"
            }
        case .notHTTP(let proxy, let error):
            return "the \(proxy.name) did not answer CONNECT with HTTP: \(error)"
        case .socks(let error, let proxy, let target):
            return error.message(proxy: proxy, target: target.description)
        case .closed(let proxy, let target, let step):
            switch step {
            case .awaitingConnectAnswer: return "the \(proxy.name) closed the connection without answering CONNECT \(target)"
            case .awaitingAnswer: return "the \(proxy.name) closed the connection in the middle of the SOCKS5 exchange"
            default: return "the \(proxy.name) closed the connection (\(step.describe(proxy)))"
            }
        case .failed(let failure, let proxy, let step):
            switch step {
            case .awaitingConnectAnswer: return "the connection to the \(proxy.name) failed during CONNECT: \(failure)"
            case .awaitingAnswer: return "the connection to the \(proxy.name) failed: \(failure)"
            default: return "the connection to the \(proxy.name) failed (\(step.describe(proxy))): \(failure)"
            }
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
