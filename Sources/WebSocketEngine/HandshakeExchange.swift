import Glibc
import WebSocketCore
import WebSocketTransport

/// The server's opening handshake with one accepted client, on the loop: reads the request
/// head without blocking (under the server's head-size cap and handshake timeout), asks the
/// server for its verdict, writes the 101 or the refusal without blocking, and then hands
/// the stream with the bytes read after the head to the server (`handOver`), or closes it.
final class HandshakeExchange {
    private let loop: EventLoop
    private let stream: TCPStream
    private weak var server: WebSocketServer?
    private var watch: EventLoop.Watch?
    private var timer: EventLoop.Timer?
    private var parser: HTTPRequestHeadParser
    /// The request's bytes; after the head, frames the client sent without waiting.
    private var buffer: ByteBuffer?
    private var response: [UInt8] = []
    private var written = 0
    private var accepted: (request: HandshakeRequest, subprotocol: String?, parsed: Int,
                           deflate: (response: ExtensionOffer, agreed: PerMessageDeflate)?)?
    /// After a refusal is written: our side is shut, and the client's bytes are drained until
    /// it closes (closing with unread bytes sends a reset that can destroy the refusal).
    private var lingering = false

    /// Read size: a typical request head fits one read.
    static let readSize = 4096
    /// Longest wait, in seconds, for a refused client to close after reading the refusal.
    static let lingerTime = 1.0

    init(loop: EventLoop, stream: TCPStream, server: WebSocketServer, maximumHeadSize: Int) {
        self.loop = loop
        self.stream = stream
        self.server = server
        parser = HTTPRequestHeadParser(maximumSize: maximumHeadSize)
    }

    /// Starts reading; gives up (closing the connection) `timeout` seconds from now.
    func start(timeout: Double) {
        let watch = loop.watch(stream.fileDescriptor) { [weak self] events in self?.handle(events) }
        self.watch = watch
        let timer = loop.timer { [weak self] in self?.end() }
        self.timer = timer
        loop.setInterest(watch, .readable)
        loop.arm(timer, at: Instant.now().adding(seconds: timeout))
    }

    private func handle(_ events: IOEvents) {
        if lingering { drain(); return }
        if !response.isEmpty { writeResponse(); return }
        readRequest()
    }

    private func readRequest() {
        if buffer == nil { buffer = ByteBuffer(capacity: HandshakeExchange.readSize) }
        guard let buffer else { return }
        switch stream.read(into: buffer.end, count: buffer.free) {
        case .done(let n):
            let start = buffer.count
            buffer.count += n
            var index = start
            let input = UnsafeRawBufferPointer(start: buffer.base, count: buffer.count)
            do throws(HTTPRequestError) {
                guard let head = try parser.parse(input, &index) else {
                    buffer.count = 0  // the parser keeps what it needs of a partial head
                    return
                }
                decide(head, parsed: index)
            } catch {
                switch error {
                case .malformed(let why): refuse(HandshakeRefusal.malformedRequest(why).response)
                case .headTooLarge(let limit): refuse(HandshakeRefusal.headTooLarge(limit: limit).response)
                }
            }
        case .wouldBlock:
            return
        case .endOfStream, .failed:
            end()
        }
    }

    private func decide(_ head: HTTPRequestHead, parsed: Int) {
        guard let server else { return end() }
        let request: HandshakeRequest
        do throws(HandshakeRefusal) {
            request = try ServerHandshake.validate(head)
        } catch {
            if case .notWebSocketUpgrade = error, let health = server.configuration.policy.answerPlainGet(method: head.method, target: head.target) {
                return refuse(health)
            }
            return refuse(error.response)
        }
        if server.isFull {
            return refuse(HTTPResponse.refusalBytesOrPlain(status: 503, headers: [HTTPHeader(name: "Retry-After", value: "1")],
                                                          body: "too many clients (the limit is \(server.configuration.maximumClients))"))
        }
        switch server.configuration.policy.decide(request) {
        case .refuse(let status, let headers, let body):
            refuse(HTTPResponse.refusalBytesOrPlain(status: status, headers: headers, body: body))
        case .accept(let subprotocol):
            if let refusal = server.mode?.refusal(for: request) {
                return refuse(HTTPResponse.refusalBytesOrPlain(status: refusal.status, headers: refusal.headers, body: refusal.body))
            }
            let deflate = server.negotiateDeflate(request)
            do throws(ResponseBuildError) {
                response = try ServerHandshake.accept(request, subprotocol: subprotocol, extensions: deflate.map { [$0.response] } ?? [],
                                                      headers: server.configuration.policy.responseHeaders)
            } catch {
                return refuse(HTTPResponse.refusalBytesOrPlain(status: 500, headers: [], body: "the server's response headers are not valid"))
            }
            accepted = (request, subprotocol, parsed, deflate)
            writeResponse()
        }
    }

    private func refuse(_ bytes: [UInt8]) {
        server?.noteRefusal(status: HandshakeExchange.status(of: bytes))
        response = bytes
        accepted = nil
        writeResponse()
    }

    private func writeResponse() {
        while written < response.count {
            let result = response.withUnsafeBytes { raw -> IOResult in
                var vector = iovec(iov_base: UnsafeMutableRawPointer(mutating: raw.baseAddress! + written), iov_len: raw.count - written)
                return stream.write(&vector, count: 1)
            }
            switch result {
            case .done(let n): written += n
            case .wouldBlock:
                if let watch { loop.setInterest(watch, .writable) }
                return
            case .endOfStream, .failed:
                return end()
            }
        }
        if let accepted, let server {
            finishWatching()
            let (buffer, parsed) = (self.buffer, accepted.parsed)
            self.buffer = nil
            server.exchangeEnded(self)
            server.handOver(stream, request: accepted.request, subprotocol: accepted.subprotocol, deflate: accepted.deflate,
                            received: buffer, parsed: parsed)
        } else {
            stream.shutdownOutput()
            lingering = true
            buffer = nil
            if let watch { loop.setInterest(watch, .readable) }
            if let timer { loop.arm(timer, at: Instant.now().adding(seconds: HandshakeExchange.lingerTime)) }
        }
    }

    private func drain() {
        var scratch = (UInt64(0), UInt64(0), UInt64(0), UInt64(0), UInt64(0), UInt64(0), UInt64(0), UInt64(0))
        let result = withUnsafeMutableBytes(of: &scratch) { stream.read(into: $0.baseAddress!, count: $0.count) }
        switch result {
        case .done, .wouldBlock: return
        case .endOfStream, .failed: end()
        }
    }

    private func finishWatching() {
        if let watch { loop.remove(watch) }
        if let timer { loop.arm(timer, at: nil) }
        watch = nil
        timer = nil
    }

    /// Closes the connection (timed out, refused, or the client left) and forgets it.
    func end() {
        finishWatching()
        stream.close()
        server?.exchangeEnded(self)
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
