import WebSocketCore
import WebSocketEngine
import WebSocketTransport

/// Everything that can go wrong with a WebSocket, as cases to switch on; `description` is
/// a sentence for a person (the same wording as the `wspipe` command where it applies,
/// without its option names).
public enum WebSocketError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The URL is not a ws://, wss:// or ws+unix:// URL.
    case invalidURL(String)
    /// An option or argument is not usable (a header with CR/LF, a close code that may not
    /// be sent, a proxy that is not a proxy URL).
    case invalidArgument(String)
    /// DNS, TCP, the Unix socket or the proxy failed (refused, unreachable, proxy refusal).
    case cannotConnect(String)
    /// A server's socket cannot be bound or listened on (address in use, permission denied).
    case cannotListen(String)
    /// TLS failed: certificate verification, no common version, client certificate; or a
    /// server's TLS settings cannot be used (its certificate, key, passphrase or client CA
    /// file, thrown by `WebSocketServer.bind`).
    case tls(String)
    /// The server did not accept the WebSocket handshake. `status`: its HTTP status when
    /// it answered with one other than 101 (nil: a 101 that breaks RFC 6455 §4.1, or no
    /// answer).
    case handshakeRejected(status: Int?, String)
    /// The peer broke RFC 6455; we closed with `closeCode` (1002 protocol error, 1007
    /// invalid UTF-8, 1009 message too big).
    case protocolError(closeCode: Int, String)
    /// The connection ended without a closing handshake (TCP closed, reset, write failed).
    case connectionLost(String)
    /// A deadline passed: the connect timeout, the ping timeout or the close timeout.
    case timedOut(String)
    /// The connection is closing or closed; nothing more can be sent. `code` and `reason`:
    /// the peer's Close, if it sent one.
    case closed(code: Int?, reason: String)
    /// A `ReconnectingWebSocket`'s offline queue is full under `ReconnectPolicy.QueuePolicy.fail`.
    case offlineQueueFull(String)
    /// The task awaiting the operation was cancelled; the connection is closed with 1001.
    case cancelled

    /// One sentence saying what happened, with the facts (address, status, code, file):
    /// the text to show a user or log.
    public var description: String {
        switch self {
        case .invalidURL(let text), .invalidArgument(let text), .cannotConnect(let text), .cannotListen(let text), .offlineQueueFull(let text), .tls(let text),
             .handshakeRejected(_, let text), .protocolError(_, let text), .connectionLost(let text), .timedOut(let text):
            return text
        case .closed(let code?, let reason):
            return "the connection is closed (the peer closed it with \(code)\(reason.isEmpty ? "" : " \(reason)"))"
        case .closed(nil, _):
            return "the connection is closed"
        case .cancelled:
            return "cancelled"
        }
    }
}

extension WebSocketError {
    /// The opening's facts as a case and a sentence.
    init(_ error: OpenError) {
        switch error {
        case .transport(let transport):
            self.init(transport)
        case .handshake(.unexpectedStatus(let head), let body):
            let reason = head.reason.isEmpty ? "" : " \(head.reason)"
            var text = "the server answered \(head.statusCode)\(reason) instead of 101 Switching Protocols"
            if let location = head.values("Location").first, WebSocketURL.redirectStatuses.contains(head.statusCode) {
                text += "; it redirects to \(location) (WebSocketOptions.followsRedirects follows it)"
            } else if !body.isEmpty {
                text += "; body: " + String(decoding: body.prefix(200), as: UTF8.self)
            }
            self = .handshakeRejected(status: head.statusCode, text)
        case .handshake(let error, _):
            self = .handshakeRejected(status: nil, "handshake rejected: \(error)")
        case .handshakeLost(.closedWhileSending):
            self = .handshakeRejected(status: nil, "the server closed the connection during the handshake")
        case .handshakeLost(.closedWithoutAnswer(let secure)):
            self = .handshakeRejected(status: nil, "the server closed the connection without answering the WebSocket handshake"
                                      + (secure ? "" : " (if it expects TLS, use wss://)"))
        case .handshakeLost(.closedMidAnswer):
            self = .handshakeRejected(status: nil, "the server closed the connection in the middle of its handshake response")
        case .handshakeLost(.failed(let why, let sending)):
            self = .connectionLost("connection lost \(sending ? "while sending the handshake" : "during the handshake"): \(why)")
        case .redirect(.tooMany(let limit)):
            self = .handshakeRejected(status: nil, "too many redirects: more than \(limit)")
        case .redirect(.noLocation(let status, let reason)):
            self = .handshakeRejected(status: status, "the server answered \(status) \(reason) without a Location header")
        case .redirect(.refused(let error)):
            self = .handshakeRejected(status: nil, error.description)
        }
    }

    /// The transport's facts as a case, in the transport's sentence with this library's
    /// setting names (the CLI's sentence, its option names swapped).
    init(_ error: TransportError) {
        let text = error.sentence(.library)
        switch error {
        case .resolve, .noAddress, .connect, .unixConnect, .proxy, .system: self = .cannotConnect(text)
        case .timedOut: self = .timedOut(text)
        case .tls: self = .tls(text)
        case .proxyVariable: self = .invalidArgument(text)
        case .unixPathLength: self = .invalidURL(text)
        }
    }

    /// How an open connection ended, when it is a failure (nil: a closing handshake).
    /// `role`: our side's, so the sentence names the other ("the server", "the client").
    init?(_ ending: ConnectionEnding, role: Role) {
        let peer = "the \(role.peerName)"
        switch ending {
        case .closed:
            return nil
        case .failed(let error):
            self = .protocolError(closeCode: Int(error.closeCode.rawValue), "\(error.description); closed the connection with \(error.closeCode)")
        case .lost(.pingTimeout(let seconds)):
            self = .timedOut("no pong within \(formatSeconds(seconds)) s (WebSocketOptions.pingTimeout): the connection is dead")
        case .lost(.peerClosedTCP(let afterOurClose)):
            self = .connectionLost(afterOurClose ? "\(peer) closed the TCP connection without answering our Close"
                                                 : "\(peer) closed the TCP connection without a closing handshake")
        case .lost(.readFailed(let why)):
            self = .connectionLost("connection lost: \(why)")
        case .lost(.writeFailed(let why)):
            self = .connectionLost("connection lost: cannot send: \(why)")
        case .lost(.abandoned):
            self = .connectionLost("the connection ended without a closing handshake")
        case .timedOut(let wait):
            self = .timedOut("connection lost: \(wait.closeWritten ? "no Close from \(peer)" : "\(peer) stopped reading before our Close"): "
                             + (wait.peerKeptSending
                                ? "it kept sending for \(formatSeconds(wait.limit * ConnectionDriver.barrierIncomingLimit)) s after "
                                    + "the end-of-input ping (at most \(formatSeconds(ConnectionDriver.barrierIncomingLimit)) times "
                                    + "WebSocketOptions.closeTimeout)"
                                : "nothing came for \(formatSeconds(wait.limit)) s (WebSocketOptions.closeTimeout)"))
        }
    }
}

extension SettingNames {
    /// WSKit's names for the settings that error sentences advise.
    static let library = SettingNames(
        proxySource: { _ in nil }, ipv4Only: "addressFamily", ipv6Only: "addressFamily",
        connectTimeout: "WebSocketOptions.connectTimeout", caFile: "tls.caFile", insecure: "tls.verifiesPeer = false",
        keyPassphrase: "tls.clientCertificate's keyPassword", keyFile: "tls.clientCertificate's keyFile",
        clientCertificate: "tls.clientCertificate", certificate: "tls.clientCertificate", minimumVersion: "tls.minimumVersion",
        proxy: "WebSocketOptions.proxy", proxyOff: "WebSocketOptions.proxy = .none", noProxy: "WebSocketOptions.noProxy",
        connectTo: "WebSocketOptions.connectTo", verificationOff: "tls.verifiesPeer = false")

    /// The names of `WebSocketServerOptions.TLS`, for a server's TLS settings.
    static let libraryServer: SettingNames = {
        var names = library
        names.keyPassphrase = "tls.keyPassword"
        names.keyFile = "tls.keyFile"
        return names
    }()
}
