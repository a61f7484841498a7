import Glibc
import WebSocketTransport

/// --proxy-protocol: reads the PROXY header an accepted connection starts with, before its
/// TLS handshake and its HTTP head, within the handshake timeout; then hands the server the
/// connection and the client's address. The bytes are peeked and only the header's taken,
/// so what follows it (a ClientHello, the request) stays in the socket for the next stage.
/// A missing or malformed header ends the connection without an answer.
final class ProxyHeaderReader {
    enum Outcome {
        /// The client's address (the header's source, or the socket's for UNKNOWN/LOCAL).
        case address(PeerAddress)
        case refused(String)
    }

    let connection: TCPStream
    private let loop: EventLoop
    private let peer: PeerAddress
    private var watch: EventLoop.Watch?
    private var timer: EventLoop.Timer?
    /// The header's bytes taken so far (each read takes only bytes of the header).
    private var received: [UInt8] = []
    private var onDone: ((ProxyHeaderReader, Outcome) -> Void)?

    init(loop: EventLoop, connection: TCPStream, peer: PeerAddress, onDone: @escaping (ProxyHeaderReader, Outcome) -> Void) {
        self.loop = loop
        self.connection = connection
        self.peer = peer
        self.onDone = onDone
    }

    func start(deadline: Instant) {
        let watch = loop.watch(connection.fileDescriptor) { [weak self] _ in self?.readable() }
        self.watch = watch
        let timer = loop.timer { [weak self] in self?.finish(.refused("no PROXY header within the handshake timeout")) }
        self.timer = timer
        loop.setInterest(watch, .readable)
        loop.arm(timer, at: deadline)
    }

    private func readable() {
        let room = ProxyProtocol.maximumLength - received.count
        var peeked = [UInt8](repeating: 0, count: room)
        let count = peeked.withUnsafeMutableBytes { recv(connection.fileDescriptor, $0.baseAddress, room, Int32(MSG_PEEK)) }
        if count == 0 { return finish(.refused("closed before its PROXY header was complete")) }
        if count < 0 {
            if errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR { return }
            return finish(.refused("a read failed before the PROXY header (\(String(cString: strerror(errno))))"))
        }
        let seen = received + peeked[0..<count]
        switch ProxyProtocol.parse(seen) {
        case .invalid(let why):
            finish(.refused(why.description))
        case .needMore:
            // Every byte so far belongs to the header: taken, so epoll waits for new ones.
            guard take(count) else { return }
            received = seen
        case .header(let header):
            guard take(header.length - received.count) else { return }
            guard let addresses = header.addresses else { return finish(.address(peer)) }
            finish(.address(.ip(addresses.source.unmapped, port: addresses.sourcePort)))
        }
    }

    /// Reads `count` bytes already peeked (so a short read is a failure); false when it ended.
    private func take(_ count: Int) -> Bool {
        var scratch = [UInt8](repeating: 0, count: count)
        let taken = scratch.withUnsafeMutableBytes { read(connection.fileDescriptor, $0.baseAddress, count) }
        guard taken == count else {
            finish(.refused("a read failed in the PROXY header"))
            return false
        }
        return true
    }

    private func finish(_ outcome: Outcome) {
        if let watch { loop.remove(watch) }
        if let timer { loop.arm(timer, at: nil) }
        watch = nil
        timer = nil
        let done = onDone
        onDone = nil
        done?(self, outcome)
    }

    /// The server is shutting down.
    func cancel() {
        onDone = nil
        finish(.refused("shutting down"))
        connection.close()
    }
}
