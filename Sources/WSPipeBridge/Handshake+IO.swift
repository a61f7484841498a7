import Glibc
import WebSocketCore
import WebSocketTransport

/// Why a session never opened, with its exit status.
public enum OpenError: Error {
    case transport(TransportError)
    case handshake(HandshakeError, body: [UInt8])
    /// The connection broke or closed during the handshake.
    case handshakeLost(String)
    /// A redirect that cannot or may not be followed (or too many).
    case redirect(String)

    var status: ExitStatus {
        switch self {
        case .transport(.tls): return .tlsFailure
        case .transport(.proxy): return .proxyFailure
        case .transport(.invalidSetting): return .usage
        case .transport: return .cannotConnect
        case .handshake, .handshakeLost, .redirect: return .handshakeRejected
        }
    }

    var message: String {
        switch self {
        case .transport(let error):
            return error.description
        case .handshake(.unexpectedStatus(let head), let body):
            var text = HandshakeError.unexpectedStatus(head).description
            let trimmed = body.prefix(200)
            if WebSocketURL.redirectStatuses.contains(head.statusCode), let location = head.values("Location").first {
                text += "; it redirects to \(printable(Array(Diagnostics.redactedLocation(location).utf8))) (-L/--location follows redirects)"
            } else if !trimmed.isEmpty {
                text += "; body: " + printable(Array(trimmed)) + (body.count > trimmed.count ? "..." : "")
            }
            return text
        case .handshake(let error, _):
            return "handshake rejected: \(error)"
        case .handshakeLost(let why), .redirect(let why):
            return why
        }
    }
}

/// The opening handshake over a connected stream (RFC 6455 §4.1), all before `deadline`.
struct HandshakeExchange {
    let stream: ByteStream
    let deadline: Instant
    let timeoutSeconds: Double
    let log: Diagnostics

    /// Sends the request and reads the answer into `buffer`. Returns what the server agreed
    /// to and the offset in `buffer` where WebSocket frames start (bytes that arrived with
    /// the 101 are frames and stay in the buffer).
    func perform(_ handshake: ClientHandshake, into buffer: ByteBuffer) throws(OpenError) -> (ClientHandshake.Negotiated, Int) {
        log.line(">", "GET \(Diagnostics.redactedTarget(handshake.url.requestTarget)) HTTP/1.1")
        for header in handshake.requestHeaders { log.header(">", header) }
        try send(handshake.requestBytes)

        let (head, headLength) = try receiveHead(into: buffer, secure: handshake.url.isSecure)
        log.line("<", "\(head.version) \(head.statusCode) \(head.reason)")
        for header in head.headers { log.header("<", header) }
        do {
            let negotiated = try handshake.validate(head)
            if let chosen = negotiated.subprotocol { log.event("subprotocol: \(chosen)") }
            return (negotiated, headLength)
        } catch {
            if case .unexpectedStatus = error {
                throw .handshake(error, body: readBody(of: head, from: buffer, after: headLength))
            }
            throw .handshake(error, body: [])
        }
    }

    private func send(_ bytes: [UInt8]) throws(OpenError) {
        var offset = 0
        while offset < bytes.count {
            let result = bytes.withUnsafeBytes { raw -> IOResult in
                var vector = iovec(iov_base: UnsafeMutableRawPointer(mutating: raw.baseAddress! + offset),
                                   iov_len: raw.count - offset)
                return stream.write(&vector, count: 1)
            }
            switch result {
            case .done(let n): offset += n
            case .wouldBlock(let interest): try wait(for: interest, stage: "sending the handshake")
            case .failed(let why):
                try lost(why, nothingReceived: true, while: "while sending the handshake")
            case .endOfStream: throw .handshakeLost("the server closed the connection during the handshake")
            }
        }
        while stream.hasPendingOutput {
            switch stream.flush() {
            case .wouldBlock(let interest): try wait(for: interest, stage: "sending the handshake")
            case .failed(let why): throw .handshakeLost("connection lost while sending the handshake: \(why)")
            default: break
            }
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
                try wait(for: interest, stage: "waiting for the server's handshake response")
            case .endOfStream:
                if buffer.count == 0 { try checkClientCertificateRefusal() }
                // A TLS server given plain text usually just hangs up: say what to try.
                throw .handshakeLost(buffer.count == 0
                    ? "the server closed the connection without answering the WebSocket handshake"
                        + (secure ? "" : " (if it expects TLS, use wss://)")
                    : "the server closed the connection in the middle of its handshake response")
            case .failed(let why):
                try lost(why, nothingReceived: buffer.count == 0, while: "during the handshake")
            }
        }
    }

    /// A read or write of the handshake failed with `why`. A TLS error (TLS 1.3 servers refuse
    /// a client certificate after the TLS handshake: the alert arrives with the first read
    /// or write) is a TLS failure (4), not a lost connection.
    private func lost(_ why: String, nothingReceived: Bool, while stage: String) throws(OpenError) -> Never {
        if why.hasPrefix("TLS: ") { throw .transport(.tls(String(why.dropFirst(5)))) }
        if nothingReceived { try checkClientCertificateRefusal() }
        throw .handshakeLost("connection lost \(stage): \(why)")
    }

    /// TLS 1.3 servers check the client certificate after the TLS handshake; many (Python's
    /// among them) then close or reset the connection without sending their alert. With no
    /// answer at all, say so as a TLS failure when certificates were involved.
    private func checkClientCertificateRefusal() throws(OpenError) {
        guard let tls = stream as? TLSStream else { return }
        if tls.serverWantedCertificate {
            throw .transport(.tls("the server asked for a client certificate and closed the connection without "
                                  + "one: it requires a client certificate (give one with --cert and --key)"))
        }
        if tls.sentClientCertificate {
            throw .transport(.tls("the server closed the connection right after the TLS handshake without "
                                  + "answering: it probably refused the client certificate (--cert)"))
        }
    }

    /// Up to 512 bytes of a refusal's body, for the error message: what already arrived,
    /// plus whatever comes within a short wait when Content-Length promises more.
    private func readBody(of head: HTTPResponseHead, from buffer: ByteBuffer, after headLength: Int) -> [UInt8] {
        let limit = 512
        let promised = head.values("Content-Length").first.flatMap { Int($0) } ?? (head.values("Transfer-Encoding").isEmpty ? 0 : limit)
        let wanted = min(limit, promised)
        let bodyDeadline = min(deadline, Instant.now().adding(seconds: 0.5))
        while buffer.count - headLength < wanted && buffer.free > 0 {
            var entry = pollfd(fd: stream.fileDescriptor, events: Int16(POLLIN), revents: 0)
            if !stream.hasBufferedInput && poll(&entry, 1, bodyDeadline.pollTimeout()) <= 0 { break }
            guard case .done(let n) = stream.read(into: buffer.end, count: buffer.free) else { break }
            buffer.count += n
        }
        let available = buffer.count - headLength
        return Array(UnsafeRawBufferPointer(start: buffer.base + headLength, count: min(available, wanted)))
    }

    private func wait(for interest: PollInterest, stage: String) throws(OpenError) {
        var entry = pollfd(fd: stream.fileDescriptor, events: interest.pollEvents, revents: 0)
        while true {
            let ready = poll(&entry, 1, deadline.pollTimeout())
            if ready > 0 { return }
            if ready == 0 { throw .transport(.timedOut(stage: stage, seconds: timeoutSeconds)) }
            if errno != EINTR { throw .handshakeLost("poll failed: \(errnoText(errno))") }
        }
    }
}
