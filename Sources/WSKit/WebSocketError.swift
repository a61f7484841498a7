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
    /// TLS failed: certificate verification, no common version, client certificate.
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

    public var description: String {
        switch self {
        case .invalidURL(let text), .invalidArgument(let text), .cannotConnect(let text), .cannotListen(let text), .offlineQueueFull(let text), .tls(let text),
             .handshakeRejected(_, let text), .protocolError(_, let text), .connectionLost(let text), .timedOut(let text):
            return text
        case .closed(let code?, let reason):
            return "the connection is closed (the server closed it with \(code)\(reason.isEmpty ? "" : " \(reason)"))"
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

    init(_ error: TransportError) {
        switch error {
        case .resolve(let host, let reason, _, _):
            self = .cannotConnect("cannot resolve host '\(host)': \(reason)")
        case .noAddress(let host, let family, let available):
            self = .cannotConnect("cannot resolve host '\(host)': no \(family == .ipv4 ? "IPv4" : "IPv6") address "
                                  + "(it has \(available.joined(separator: ", ")))")
        case .connect(let target, let code, nil):
            self = .cannotConnect("cannot connect to \(target): \(errnoText(code))")
        case .connect(_, let code, let via?):
            self = .cannotConnect("cannot connect to the \(via.proxy.name): \(errnoText(code))")
        case .unixConnect(let path, let code, let notASocket):
            self = .cannotConnect("cannot connect to Unix socket \(path): \(errnoText(code))"
                                  + (notASocket ? " (the file is not a socket)" : ""))
        case .timedOut(let stage, let seconds):
            self = .timedOut("timed out after \(formatSeconds(seconds)) s \(describe(stage)) (WebSocketOptions.connectTimeout)")
        case .tls(let failure, let proxy):
            self = .tls("TLS: " + (proxy.map { "with the \($0.name): " } ?? "") + describe(failure))
        case .proxy(let failure):
            self = .cannotConnect(failure.description)
        case .proxyVariable(let error):
            self = .invalidArgument(error.description)
        case .unixPathLength(let path, let limit):
            self = .invalidURL("the Unix socket path '\(path)' is empty or longer than \(limit) bytes")
        case .system(let call, let code):
            self = .cannotConnect("\(call) failed: \(errnoText(code))")
        }
    }

    /// How an open connection ended, when it is a failure (nil: a closing handshake).
    init?(_ ending: ConnectionEnding) {
        switch ending {
        case .closed:
            return nil
        case .failed(let error):
            self = .protocolError(closeCode: Int(error.closeCode.rawValue), "\(error.description); closed the connection with \(error.closeCode)")
        case .lost(.pingTimeout(let seconds)):
            self = .timedOut("no pong within \(formatSeconds(seconds)) s (WebSocketOptions.pingTimeout): the connection is dead")
        case .lost(.peerClosedTCP(let afterOurClose)):
            self = .connectionLost(afterOurClose ? "the server closed the TCP connection without answering our Close"
                                                 : "the server closed the TCP connection without a closing handshake")
        case .lost(.readFailed(let why)):
            self = .connectionLost("connection lost: \(why)")
        case .lost(.writeFailed(let why)):
            self = .connectionLost("connection lost: cannot send: \(why)")
        case .lost(.abandoned):
            self = .connectionLost("the connection ended without a closing handshake")
        case .timedOut(let wait):
            self = .timedOut("connection lost: \(wait.closeWritten ? "no Close from the server" : "the server stopped reading before our Close"): "
                             + "nothing came for \(formatSeconds(wait.limit)) s (WebSocketOptions.closeTimeout)")
        }
    }
}

private func describe(_ stage: Stage) -> String {
    switch stage {
    case .resolving(let host): return "resolving '\(host)'"
    case .connecting(let target): return "connecting to \(target)"
    case .connectingUnix(let path, let full): return "connecting to Unix socket \(path)\(full ? " (its backlog is full)" : "")"
    case .connectingToProxy(let hop): return "connecting to the \(hop.proxy.name)"
    case .tlsHandshake(nil): return "in the TLS handshake"
    case .tlsHandshake(let proxy?): return "in the TLS handshake with the \(proxy.name)"
    case .proxyExchange(let proxy, _): return "in the exchange with the \(proxy.name)"
    case .sendingHandshake: return "sending the handshake"
    case .awaitingHandshakeResponse: return "waiting for the server's handshake response"
    }
}

private func describe(_ failure: TLSFailure) -> String {
    switch failure {
    case .libraryMissing(let why): return why
    case .setup(let reason): return "cannot create a TLS session: \(reason)"
    case .trustStore(let path?, let reason): return "cannot load CA certificates from '\(path)': \(reason)"
    case .trustStore(nil, let reason): return "cannot load the system CA store: \(reason)"
    case .certificateFile(let path, let reason): return "cannot load the client certificate from '\(path)': \(reason)"
    case .keyNeedsPassphrase(let path): return "the private key in '\(path)' is encrypted: give its passphrase (keyPassword)"
    case .wrongPassphrase(let path): return "cannot decrypt the private key in '\(path)': wrong passphrase"
    case .keyMismatch(let key, let certificate): return "the private key in '\(key)' does not belong to the certificate in '\(certificate)'"
    case .noPrivateKey(let path, let reason): return "no private key in '\(path)' [\(reason)]"
    case .keyFile(let path, let reason): return "cannot load the private key from '\(path)': \(reason)"
    case .verification(let check, let name, let detail):
        let reason: String
        switch check {
        case .expired: reason = "the server's certificate has expired"
        case .notYetValid: reason = "the server's certificate is not valid yet"
        case .nameMismatch: reason = "the server's certificate is not valid for '\(name)'"
        case .unknownCA: reason = "the server's certificate is signed by an unknown CA (trust it with tls.caFile)"
        case .other: reason = "the server's certificate was refused"
        }
        return "certificate verification failed for '\(name)': \(reason) [\(detail)]"
    case .certificateRequired(let detail): return "the server requires a client certificate [\(detail)]"
    case .certificateRequiredThenClosed:
        return "the server asked for a client certificate and closed the connection without one: it requires a client certificate"
    case .certificateProbablyRefused:
        return "the server closed the connection right after the TLS handshake without answering: it probably refused the client certificate"
    case .closedDuringHandshake(let hint): return "the server closed the connection during the TLS handshake" + hint
    case .handshakeFailed(let why, let hint): return "handshake failed: \(why)" + (hint ?? "")
    case .alert(let alert): return alert.description
    }
}
