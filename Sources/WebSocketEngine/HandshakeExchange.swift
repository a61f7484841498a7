import Glibc
import WebSocketCore
import WebSocketTransport

/// The server's opening handshake with one accepted client, on the loop: first the TLS
/// handshake on a TLS listener, then reads the request head without blocking (under the server's head-size cap and handshake timeout), asks the
/// server for its verdict, writes the 101 or the refusal without blocking, and then hands
/// the stream with the bytes read after the head to the server (`handOver`), or closes it.
/// One timer (the handshake timeout) covers both handshakes: a client slow in either holds
/// nothing for longer.
final class HandshakeExchange {
    private let loop: EventLoop
    /// The accepted socket (its addresses); `stream` is it, or the TLS stream over it.
    private let connection: TCPStream
    private let stream: ByteStream
    private var phase: Phase
    private weak var server: ServerDriver?
    private var watch: EventLoop.Watch?
    private var timer: EventLoop.Timer?
    private var parser: HTTPRequestHeadParser
    private let maximumHeadSize: Int
    /// The request's bytes; after the head, frames the client sent without waiting.
    private var buffer: ByteBuffer?
    /// The response being written (`writingUpgrade`, `writingRefusal`) and how much of it is out.
    private var response: [UInt8] = []
    private var written = 0
    /// A kept-alive connection's next requests, already received (`resuming`).
    private var primed: [UInt8] = []
    /// The request's Origin header, once its head is read: a refusal's event names it.
    private var origin: String?
    /// The socket's peer, or the client its PROXY header named (--proxy-protocol).
    private let connectionAddress: PeerAddress
    /// Who the client is: `connectionAddress`, or whom a trusted proxy's header named once
    /// the head is read (--trust-proxy, --client-address-header). Events, the programs'
    /// REMOTE_ADDR and the per-address limits use this one value.
    private(set) var clientAddress: PeerAddress

    /// Where the exchange is; each phase says what an event on the socket means.
    private enum Phase {
        /// A TLS listener's handshake, before the request head.
        case tlsHandshake(TLSStream)
        /// Reading the request head.
        case readingHead
        /// A handshake the mode decides later (`ServerMode.decidesLater`): nothing is read
        /// while it waits for the verdict.
        case awaitingVerdict(PendingHandshake)
        /// Writing the 101; then the stream goes to the server.
        case writingUpgrade(Accepted)
        /// Writing a refusal or a plain answer; then lingering.
        case writingRefusal
        /// After a refusal is written: our side is shut, and the client's bytes are drained
        /// until it closes (closing with unread bytes sends a reset that can destroy the
        /// refusal). `rawTCP`: after a failed TLS handshake the socket itself is read.
        case lingering(rawTCP: Bool)
        /// Closed and forgotten.
        case ended
    }

    /// An accepted upgrade while its 101 is written; a reviewed one's pending handshake and
    /// its client's delegate.
    private struct Accepted {
        var request: HandshakeRequest
        var subprotocol: String?
        var parsed: Int
        var deflate: (response: ExtensionOffer, agreed: PerMessageDeflate)?
        var handing: (pending: PendingHandshake, delegate: ConnectionDelegate)?
    }

    /// Read size: a typical request head fits one read.
    static let readSize = 4096
    /// Longest wait, in seconds, for a refused client to close after reading the refusal.
    static let lingerTime = 1.0

    init(loop: EventLoop, connection: TCPStream, stream: ByteStream, server: ServerDriver, maximumHeadSize: Int,
         connectionAddress: PeerAddress) {
        self.connectionAddress = connectionAddress
        clientAddress = connectionAddress
        self.loop = loop
        self.connection = connection
        self.stream = stream
        phase = (stream as? TLSStream).map { .tlsHandshake($0) } ?? .readingHead
        self.server = server
        self.maximumHeadSize = maximumHeadSize
        parser = HTTPRequestHeadParser(maximumSize: maximumHeadSize)
    }

    /// The next request on a connection the static site kept alive (TLS is done, `received`
    /// is what the client pipelined); the handshake timeout is then its idle timeout.
    /// `closing`: the last answer said `Connection: close`, so the connection is shut and drained.
    func resume(received: [UInt8], closing: Bool, timeout: Double) {
        phase = .readingHead
        primed = received
        start(timeout: closing ? HandshakeExchange.lingerTime : timeout)
        if closing {
            stream.shutdownOutput()
            return startLingering()
        }
        // Pipelined bytes and a TLS stream's decrypted ones are no event for epoll.
        loop.later { [weak self] in self?.handle([]) }
    }

    /// Starts reading; gives up (closing the connection) `timeout` seconds from now.
    func start(timeout: Double) {
        let watch = loop.watch(stream.fileDescriptor) { [weak self] events in self?.handle(events) }
        self.watch = watch
        let timer = loop.timer { [weak self] in self?.timedOut() }
        self.timer = timer
        loop.setInterest(watch, .readable)
        loop.arm(timer, at: Instant.now().adding(seconds: timeout))
    }

    private func handle(_ events: IOEvents) {
        switch phase {
        case .tlsHandshake(let tls): continueTLS(tls)
        case .readingHead: readRequest()
        case .awaitingVerdict:
            // Nothing is read; a client that shut its side, reset or hung up ends it (the
            // verdict then finds it gone).
            if !events.intersection([.error, .hangUp, .readHangUp]).isEmpty { end() }
        case .writingUpgrade, .writingRefusal: writeResponse()
        case .lingering(let rawTCP): drain(rawTCP: rawTCP)
        case .ended: return
        }
    }

    /// One step of the TLS handshake; when it is done, the request head may already wait.
    private func continueTLS(_ tls: TLSStream) {
        guard let watch else { return }
        switch tls.acceptStep() {
        case .done:
            phase = .readingHead
            loop.setInterest(watch, .readable)
            readRequest()
        case .wouldBlock(let interest):
            loop.setInterest(watch, interest == .read ? .readable : .writable)
        case .endOfStream:
            server?.noteTLSFailure(remoteAddress: clientAddress.description, .closed)
            end()
        case .failed(let why):
            server?.noteTLSFailure(remoteAddress: clientAddress.description, why)
            lingerAfterTLSFailure(why)
        }
    }

    /// The alert OpenSSL wrote must reach the client (closing with its bytes unread would
    /// send a reset that can destroy it): our side is shut and its bytes drained, as after
    /// a refusal. A plain HTTP request gets a plain 400 that says why (as nginx does).
    private func lingerAfterTLSFailure(_ why: StreamFailure) {
        if case .tls(let alert) = why, alert.detail.contains("http request") {
            let answer = HTTPResponse.refusalBytesOrPlain(status: 400, headers: [],
                                                          body: "this server speaks TLS: use wss:// (or https://)")
            answer.withUnsafeBytes { raw in
                guard let base = raw.baseAddress else { return }
                var vector = iovec(iov_base: UnsafeMutableRawPointer(mutating: base), iov_len: raw.count)
                _ = connection.write(&vector, count: 1)  // small: the socket buffer takes it, or it is lost
            }
        }
        connection.shutdownOutput()
        startLingering(rawTCP: true)
    }

    private func readRequest() {
        if buffer == nil { buffer = ByteBuffer(capacity: max(HandshakeExchange.readSize, primed.count)) }
        guard let buffer else { return }
        if !primed.isEmpty {
            primed.withUnsafeBytes { buffer.base.copyMemory(from: $0.baseAddress!, byteCount: $0.count) }
            let count = primed.count
            primed = []
            if consume(buffer, count) { return }
        }
        // Bytes a TLS stream still holds are no event for epoll: read them now (a read that
        // filled the buffer may have left whole records behind).
        var filled = false
        repeat {
            let room = buffer.free
            switch stream.read(into: buffer.end, count: room) {
            case .done(let n):
                filled = n == room
                if consume(buffer, n) { return }
            case .wouldBlock:
                return
            case .endOfStream, .failed:
                return end()
            }
        } while filled || stream.hasBufferedInput
    }

    /// Parses the `count` bytes just added to `buffer`; true once the head was complete or
    /// refused (the exchange has moved on).
    private func consume(_ buffer: ByteBuffer, _ count: Int) -> Bool {
        let start = buffer.count
        buffer.count += count
        var index = start
        let input = UnsafeRawBufferPointer(start: buffer.base, count: buffer.count)
        do throws(HTTPRequestError) {
            guard let head = try parser.parse(input, &index) else {
                buffer.count = 0  // the parser keeps what it needs of a partial head
                return false
            }
            decide(head, parsed: index)
        } catch {
            switch error {
            case .malformed(let why): refuse(HandshakeRefusal.malformedRequest(why).response)
            case .headTooLarge(let limit): refuse(HandshakeRefusal.headTooLarge(limit: limit).response)
            case .notHTTP(let byte): closeNotHTTP(firstByte: byte)
            }
        }
        return true
    }

    /// A client that does not speak HTTP (a TLS ClientHello on this plain listener) gets no
    /// answer it could not read and no wait for a head that cannot come: our side is shut
    /// at once and its bytes drained until it closes (no reset), so a wss:// client fails
    /// now with its plain-server hint instead of at its timeout.
    private func closeNotHTTP(firstByte: UInt8) {
        server?.noteNotHTTP(remoteAddress: clientAddress.description, firstByte: firstByte)
        stream.shutdownOutput()
        startLingering()
    }

    private func decide(_ head: HTTPRequestHead, parsed: Int) {
        guard let server else { return end() }
        origin = head.values("Origin").first
        let addressPolicy = server.configuration.clientAddress
        if !addressPolicy.trusted.isEmpty {
            clientAddress = addressPolicy.client(of: connectionAddress, header: head.values(addressPolicy.header.rawValue))
        }
        switch server.route.route(head, peer: server.standing(of: clientAddress, request: true), load: server.load) {
        case .metrics:
            refuse(server.configuration.policy.metricsAnswer(head, text: { server.exposition.text }) ?? [])
        case .answer(let bytes):
            refuse(bytes)
        case .site(let otherwise):
            guard let answer = server.site?.answer(head, policy: server.configuration.policy,
                                                   mayKeepAlive: !server.configuration.oneClientAtATime,
                                                   servesUpgrades: { server.mode?.servesUpgrades(at: $0) ?? false }) else {
                return refuse(otherwise)
            }
            handToSite(answer, parsed: parsed)
        case .refuse(let bytes):
            refuse(bytes)
        case .limited(let reason, let bytes):
            server.noteLimited(reason)
            refuse(bytes)
        case .review(let request, let subprotocol):
            guard let mode = server.mode else { return upgrade(request, subprotocol: subprotocol, parsed: parsed) }
            let local = connection.localAddress ?? connection.remoteAddress
            let waiting = PendingHandshake(exchange: self, request: request, subprotocol: subprotocol,
                                           remoteAddress: clientAddress.description, localAddress: local,
                                           isSecure: stream is TLSStream, clientCertificateSubject: (stream as? TLSStream)?.peerSubject,
                                           parsed: parsed)
            phase = .awaitingVerdict(waiting)
            if let watch { loop.setInterest(watch, .readHangUp) }
            mode.review(waiting)
        case .upgrade(let request, let subprotocol):
            upgrade(request, subprotocol: subprotocol, parsed: parsed)
        }
    }

    /// The 101 for a request the route accepted at once.
    private func upgrade(_ request: HandshakeRequest, subprotocol: String?, parsed: Int) {
        guard let server else { return end() }
        do throws(ResponseBuildError) {
            try respond(request, subprotocol: subprotocol, headers: server.configuration.policy.responseHeaders, parsed: parsed)
        } catch {
            refuse(HTTPResponse.refusalBytesOrPlain(status: 500, headers: [], body: "the server's response headers are not valid"))
        }
    }

    /// The static site answers. Most answers go out at once: then this exchange, its watch
    /// and its timer read the next request (the timer as its idle timeout), as `resume`
    /// does without a new exchange. An answer the stream does not take whole is the
    /// SiteExchange's until it is written, with the bytes pipelined behind this request.
    private func handToSite(_ answer: SiteAnswer, parsed: Int) {
        guard let server, !server.isShuttingDown else {
            if let file = answer.file { close(file.descriptor) }
            return end()
        }
        server.noteSiteAnswer(answer)
        var pipelined: [UInt8] = []
        if let buffer, parsed < buffer.count {
            pipelined = Array(UnsafeRawBufferPointer(start: buffer.base + parsed, count: buffer.count - parsed))
        }
        let site = SiteExchange(loop: loop, connection: connection, connectionAddress: connectionAddress, stream: stream, server: server,
                                answer: answer, pipelined: pipelined)
        switch site.sendNow() {
        case .done:
            guard answer.keepAlive else {
                stream.shutdownOutput()
                return startLingering()
            }
            parser = HTTPRequestHeadParser(maximumSize: maximumHeadSize)
            origin = nil
            if let buffer, pipelined.count > buffer.capacity { self.buffer = nil } else { buffer?.count = 0 }
            primed = pipelined
            if let timer { loop.arm(timer, at: Instant.now().adding(seconds: server.configuration.handshakeTimeout)) }
            // Pipelined bytes and a TLS stream's decrypted ones are no event for epoll.
            if !primed.isEmpty || stream.hasBufferedInput { loop.later { [weak self] in self?.handle([]) } }
        case .blocked:
            finishWatching()
            buffer = nil
            server.exchangeEnded(self)
            server.serveSite(site)
        case .failed:
            end()
        }
    }

    /// Writes the 101 (RFC 6455 §4.2.2); the stream goes to the server once it is out.
    /// Builds the 101 (with the permessage-deflate answer, if any) and starts writing it.
    /// Throws before changing anything when the answer is not valid.
    private func respond(_ request: HandshakeRequest, subprotocol: String?, headers: [HTTPHeader], parsed: Int,
                         handing: (pending: PendingHandshake, delegate: ConnectionDelegate)? = nil) throws(ResponseBuildError) {
        guard let server else { return }
        let deflate = server.negotiateDeflate(request)
        response = try ServerHandshake.accept(request, subprotocol: subprotocol, extensions: deflate.map { [$0.response] } ?? [],
                                              headers: headers)
        phase = .writingUpgrade(Accepted(request: request, subprotocol: subprotocol, parsed: parsed, deflate: deflate, handing: handing))
        if handing != nil, let watch { loop.setInterest(watch, .readable) }
        writeResponse()
    }

    /// The mode's verdict on `pending`: a 101 with this subprotocol and these headers after
    /// the policy's; the client's events go to `delegate`. A server that filled up meanwhile
    /// refuses with 503 instead. A bad answer throws and leaves the handshake waiting.
    func accept(_ pending: PendingHandshake, subprotocol: String?, headers: [HTTPHeader],
                delegate: ConnectionDelegate) throws(ResponseBuildError) {
        guard case .awaitingVerdict(let waiting) = phase, waiting === pending, let server else { return }
        switch HandshakeRoute.capacityRefusal(peer: server.standing(of: clientAddress, request: false), load: server.load) {
        case .refuse(let bytes)?: return refuse(pending, response: bytes)
        case .limited(let reason, let bytes)?:
            server.noteLimited(reason)
            return refuse(pending, response: bytes)
        default: break
        }
        try respond(pending.request, subprotocol: subprotocol, headers: server.configuration.policy.responseHeaders + headers,
                    parsed: pending.parsed, handing: (pending, delegate))
    }

    /// The mode's verdict on `pending`: this refusal (a 4xx/5xx response).
    func refuse(_ pending: PendingHandshake, response bytes: [UInt8]) {
        guard case .awaitingVerdict(let waiting) = phase, waiting === pending else { return }
        phase = .writingRefusal
        pending.finish(nil)
        if let watch { loop.setInterest(watch, .readable) }
        refuse(bytes)
    }

    private func refuse(_ bytes: [UInt8]) {
        let status = HandshakeExchange.status(of: bytes)
        server?.noteRefusal(status: status, remoteAddress: clientAddress.description,
                            reason: status >= 400 ? HandshakeExchange.body(of: bytes) : nil, origin: origin)
        response = bytes
        phase = .writingRefusal
        writeResponse()
    }

    private func writeResponse() {
        // A TLS stream may take the bytes into its record and still hold them: flush too.
        while written < response.count || stream.hasPendingOutput {
            let result = written == response.count ? stream.flush() : response.withUnsafeBytes { raw -> IOResult in
                var vector = iovec(iov_base: UnsafeMutableRawPointer(mutating: raw.baseAddress! + written), iov_len: raw.count - written)
                return stream.write(&vector, count: 1)
            }
            switch result {
            case .done(let n): written += n
            case .wouldBlock(let interest):
                if let watch { loop.setInterest(watch, interest == .read ? .readable : .writable) }
                return
            case .endOfStream, .failed:
                return end()
            }
        }
        if case .writingUpgrade(let accepted) = phase, let server {
            finishWatching()
            // The buffer goes to the driver only with frames the client sent behind its head;
            // without any it goes back now rather than at the driver's first read.
            let pipelined = self.buffer.map { accepted.parsed < $0.count } ?? false
            let (buffer, parsed) = pipelined ? (self.buffer, accepted.parsed) : (nil, 0)
            self.buffer = nil
            server.exchangeEnded(self)
            let handing = accepted.handing
            phase = .ended
            let handed = server.handOver(stream, connection: connection, clientAddress: clientAddress,
                                         request: accepted.request, subprotocol: accepted.subprotocol,
                                         deflate: accepted.deflate, received: buffer, parsed: parsed, delegate: handing?.delegate)
            handing?.pending.finish(handed)
        } else {
            stream.shutdownOutput()
            startLingering()
        }
    }

    /// Drains the client's bytes until it closes, for at most `lingerTime`.
    private func startLingering(rawTCP: Bool = false) {
        phase = .lingering(rawTCP: rawTCP)
        buffer = nil
        if let watch { loop.setInterest(watch, .readable) }
        if let timer { loop.arm(timer, at: Instant.now().adding(seconds: HandshakeExchange.lingerTime)) }
    }

    private func drain(rawTCP: Bool) {
        var scratch = (UInt64(0), UInt64(0), UInt64(0), UInt64(0), UInt64(0), UInt64(0), UInt64(0), UInt64(0))
        let source = rawTCP ? connection : stream
        // A few reads a turn: a TLS stream may hold records that epoll does not announce.
        for _ in 0..<16 {
            let result = withUnsafeMutableBytes(of: &scratch) { source.read(into: $0.baseAddress!, count: $0.count) }
            switch result {
            case .done: continue
            case .wouldBlock: return
            case .endOfStream, .failed: return end()
            }
        }
    }

    private func finishWatching() {
        if let watch { loop.remove(watch) }
        if let timer { loop.arm(timer, at: nil) }
        watch = nil
        timer = nil
    }

    /// The handshake timeout (or the linger after a refusal) is over. A client still in its
    /// TLS handshake is a TLS failure the server reports (ETIMEDOUT).
    private func timedOut() {
        if case .tlsHandshake = phase { server?.noteTLSFailure(remoteAddress: clientAddress.description, .system(errno: ETIMEDOUT)) }
        end()
    }

    /// Closes the connection (timed out, refused, or the client left) and forgets it.
    func end() {
        finishWatching()
        let waiting: PendingHandshake?
        switch phase {
        case .awaitingVerdict(let pending): waiting = pending
        case .writingUpgrade(let accepted): waiting = accepted.handing?.pending
        default: waiting = nil
        }
        phase = .ended
        waiting?.finish(nil)
        stream.close()
        server?.exchangeEnded(self)
    }

    /// The one-line body of a refusal the server built (`HTTPResponse.refusal`: the reason
    /// in words), at most 200 bytes; nil when there is none.
    static func body(of response: [UInt8]) -> String? {
        let end: [UInt8] = [0x0D, 0x0A, 0x0D, 0x0A]
        guard let range = response.firstRange(of: end) else { return nil }
        var body = response[range.upperBound...].prefix(200)
        while let last = body.last, last == 0x0A || last == 0x0D { body.removeLast() }
        return body.isEmpty ? nil : String(decoding: body, as: UTF8.self)
    }

    /// The status code of a response's status line.
    static func status(of response: [UInt8]) -> Int {
        guard response.count >= 12 else { return 0 }
        return Int(String(decoding: response[9..<12], as: UTF8.self)) ?? 0
    }
}

extension HTTPResponse {
    /// `refusal` for statuses and bodies the server builds itself; they are always valid,
    /// but should one not be, a bare status line still goes out rather than nothing.
    static func refusalBytesOrPlain(status: Int, headers: [HTTPHeader], body: String) -> [UInt8] {
        do throws(ResponseBuildError) {
            return try refusal(status: status, headers: headers, body: body)
        } catch {
            return Array("HTTP/1.1 \(status) \(reasonPhrase(status))\r\nContent-Length: 0\r\nConnection: close\r\n\r\n".utf8)
        }
    }
}
