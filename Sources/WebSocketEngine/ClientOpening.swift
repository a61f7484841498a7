import Glibc
import WebSocketCore
import WebSocketTransport

/// Where the opening exchange tells a person what it does (the CLI's `-v`; the library's
/// is silent). Header values are the implementation's to redact.
public protocol OpeningLog: Sendable {
    /// A request (">") or response ("<") line.
    func line(_ direction: String, _ text: String)
    /// A request or response header.
    func header(_ direction: String, _ header: HTTPHeader)
    /// An event ("route: ...", "subprotocol: ...").
    func event(_ message: @autoclosure () -> String)
    /// A request target as it may be shown (secret query values hidden).
    func shownTarget(_ target: String) -> String
    /// The opener follows a redirect to `url`; `sameHost`: credentials go along.
    func redirecting(status: Int, to url: WebSocketURL, sameHost: Bool)
    /// The face's names for the settings the dialer's events mention ("--connect-to").
    var settingNames: SettingNames { get }
}

/// An `OpeningLog` that says nothing.
public struct SilentOpeningLog: OpeningLog {
    public init() {}
    public func line(_ direction: String, _ text: String) {}
    public func header(_ direction: String, _ header: HTTPHeader) {}
    public func event(_ message: @autoclosure () -> String) {}
    public func shownTarget(_ target: String) -> String { target }
    public func redirecting(status: Int, to url: WebSocketURL, sameHost: Bool) {}
    /// Empty: this log shows no line that would name a setting.
    public var settingNames: SettingNames { SilentOpeningLog.unsaid }

    private static let unsaid = SettingNames(
        proxySource: { _ in nil }, ipv4Only: nil, ipv6Only: nil, connectTimeout: "", caFile: "", insecure: nil,
        keyPassphrase: "", keyFile: nil, clientCertificate: nil, certificate: nil, minimumVersion: nil,
        proxy: "", proxyOff: "", noProxy: "", connectTo: "", verificationOff: "")
}

/// Why a connection never opened, as facts (the CLI's `report(.open(_:))` words it).
public enum OpenError: Error {
    /// Dialing failed: DNS, TCP, Unix socket, proxy, TLS.
    case transport(TransportError)
    /// The server's answer is not a WebSocket acceptance; `body`: up to 512 bytes of a
    /// refusal's body.
    case handshake(HandshakeError, body: [UInt8])
    /// The connection broke or closed during the handshake.
    case handshakeLost(HandshakeLoss)
    /// A redirect that cannot or may not be followed (or too many).
    case redirect(RedirectFailure)

    /// Dialing found no descriptor free (`TransportError.isOutOfDescriptors`).
    public var isOutOfDescriptors: Bool {
        if case .transport(let error) = self { return error.isOutOfDescriptors }
        return false
    }
}

/// How the connection was lost during the opening handshake.
public enum HandshakeLoss: Equatable, Sendable {
    /// The server closed the connection while the request was being sent.
    case closedWhileSending
    /// The server closed the connection without answering; `secure`: the URL was wss://.
    case closedWithoutAnswer(secure: Bool)
    /// The server closed the connection in the middle of its response head.
    case closedMidAnswer
    /// A read or (`sending`) a write failed.
    case failed(StreamFailure, sending: Bool)
}

/// Why `-L` stopped.
public enum RedirectFailure: Equatable, Sendable {
    /// More than `limit` redirects (--max-redirs).
    case tooMany(limit: Int)
    /// A redirect status without a Location header.
    case noLocation(status: Int, reason: String)
    /// A Location that may not or cannot be followed.
    case refused(RedirectError)
}

/// The opening handshake over a connected stream (RFC 6455 §4.1), all before `deadline`.
/// Blocking: it polls the stream's descriptor until the deadline.
public struct ClientHandshakeExchange {
    public let stream: ByteStream
    public let deadline: Deadline
    public let log: any OpeningLog

    public init(stream: ByteStream, deadline: Deadline, log: any OpeningLog) {
        self.stream = stream
        self.deadline = deadline
        self.log = log
    }

    /// Sends the request and reads the answer into `buffer`. Returns what the server agreed
    /// to and the offset in `buffer` where WebSocket frames start (bytes that arrived with
    /// the 101 are frames and stay in the buffer).
    public func perform(_ handshake: ClientHandshake, into buffer: ByteBuffer) throws(OpenError) -> (ClientHandshake.Negotiated, Int) {
        log.line(">", "GET \(log.shownTarget(handshake.url.requestTarget)) HTTP/1.1")
        for header in handshake.requestHeaders { log.header(">", header) }
        try send(handshake.requestBytes)

        let (head, headLength) = try receiveHead(into: buffer, secure: handshake.url.isSecure)
        log.line("<", "\(head.version) \(head.statusCode) \(head.reason)")
        for header in head.headers { log.header("<", header) }
        do {
            let negotiated = try handshake.validate(head)
            if let chosen = negotiated.subprotocol {
                log.event("subprotocol: \(chosen)")
            } else if !handshake.subprotocols.isEmpty {
                log.event("subprotocol: none chosen by the server (offered: \(handshake.subprotocols.joined(separator: ", ")))")
            }
            return (negotiated, headLength)
        } catch {
            if case .unexpectedStatus = error {
                throw .handshake(error, body: readBody(of: head, from: buffer, after: headLength))
            }
            throw .handshake(error, body: [])
        }
    }

    private func send(_ bytes: [UInt8]) throws(OpenError) {
        let failure: StreamFailure?
        do {
            failure = try stream.writeAll(bytes, until: deadline, stage: .sendingHandshake)
        } catch {
            throw .transport(error)
        }
        switch failure {
        case nil: return
        case .closed?: throw .handshakeLost(.closedWhileSending)
        case let why?: try lost(why, nothingReceived: true, sending: true)
        }
    }

    private func receiveHead(into buffer: ByteBuffer, secure: Bool) throws(OpenError) -> (HTTPResponseHead, Int) {
        while true {
            do {
                if buffer.count > 0,
                   let parsed = try HTTPResponseHead.parse(UnsafeRawBufferPointer(start: buffer.base, count: buffer.count)) {
                    return parsed
                }
            } catch {
                throw .handshake(error, body: [])
            }
            let room = min(buffer.free, HTTPResponseHead.maximumSize + 1 - buffer.count)
            switch stream.read(into: buffer.end, count: max(room, 1)) {
            case .done(let n):
                buffer.count += n
            case .wouldBlock(let interest):
                do {
                    try stream.wait(for: interest, until: deadline, stage: .awaitingHandshakeResponse)
                } catch {
                    throw .transport(error)
                }
            case .endOfStream:
                if buffer.count == 0 { try checkClientCertificateRefusal() }
                throw .handshakeLost(buffer.count == 0 ? .closedWithoutAnswer(secure: secure) : .closedMidAnswer)
            case .failed(let why):
                try lost(why, nothingReceived: buffer.count == 0, sending: false)
            }
        }
    }

    /// A read or write of the handshake failed with `why`. A TLS error (TLS 1.3 servers refuse
    /// a client certificate after the TLS handshake: the alert arrives with the first read
    /// or write) is a TLS failure (4), not a lost connection.
    private func lost(_ why: StreamFailure, nothingReceived: Bool, sending: Bool) throws(OpenError) -> Never {
        if case .tls(let alert) = why { throw .transport(.tls(.alert(alert))) }
        if nothingReceived { try checkClientCertificateRefusal() }
        throw .handshakeLost(.failed(why, sending: sending))
    }

    /// TLS 1.3 servers check the client certificate after the TLS handshake; many (Python's
    /// among them) then close or reset the connection without sending their alert. With no
    /// answer at all, say so as a TLS failure when certificates were involved.
    private func checkClientCertificateRefusal() throws(OpenError) {
        guard let tls = stream as? TLSStream else { return }
        if tls.serverWantedCertificate { throw .transport(.tls(.certificateRequiredThenClosed)) }
        if tls.sentClientCertificate { throw .transport(.tls(.certificateProbablyRefused)) }
    }

    /// Up to 512 bytes of a refusal's body, for the error message: what already arrived,
    /// plus whatever comes within a short wait when Content-Length promises more.
    private func readBody(of head: HTTPResponseHead, from buffer: ByteBuffer, after headLength: Int) -> [UInt8] {
        let limit = 512
        let promised = head.values("Content-Length").first.flatMap { Int($0) } ?? (head.values("Transfer-Encoding").isEmpty ? 0 : limit)
        let wanted = min(limit, promised)
        let bodyDeadline = Deadline(seconds: 0.5).notAfter(deadline.instant)
        while buffer.count - headLength < wanted && buffer.free > 0 {
            if !stream.hasBufferedInput && !((try? bodyDeadline.wait(fd: stream.fileDescriptor, events: Int16(POLLIN))) ?? false) {
                break
            }
            guard case .done(let n) = stream.read(into: buffer.end, count: buffer.free) else { break }
            buffer.count += n
        }
        let available = buffer.count - headLength
        return Array(UnsafeRawBufferPointer(start: buffer.base + headLength, count: min(available, wanted)))
    }
}
