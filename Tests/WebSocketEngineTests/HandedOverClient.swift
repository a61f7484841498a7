import Glibc
import WebSocketCore
@testable import WebSocketEngine
import WebSocketTransport
import XCTest

/// A server whose one client was handed over on a socket pair: the test writes the client's
/// frames on `client` and turns the loop.
struct HandedOverClient<Mode: ServerMode> {
    let loop: EventLoop
    /// The server holds its mode weakly: the test keeps it, until `releaseMode`.
    private var keptMode: Mode?
    var mode: Mode { keptMode! }
    let server: ServerDriver
    let connection: ServerConnection
    let client: Int32

    init(configuration: ServerConfiguration = ServerConfiguration(), mode: Mode) throws {
        loop = try EventLoop()
        var fds: [Int32] = [-1, -1]
        XCTAssertEqual(socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0, &fds), 0)
        let serverEnd = TCPStream(adopting: fds[0], remoteAddress: "pair")
        keptMode = mode
        server = ServerDriver(loop: loop, configuration: configuration, mode: mode)
        connection = try XCTUnwrap(server.handOver(serverEnd, connection: serverEnd, clientAddress: .local(path: "pair"),
                                                   request: try Self.upgradeRequest(), subprotocol: nil, deflate: nil,
                                                   received: nil, parsed: 0))
        client = fds[1]
    }

    /// A plain upgrade request, as a browser's.
    static func upgradeRequest() throws -> HandshakeRequest {
        try ServerHandshake.validate(HTTPRequestHead(method: "GET", target: "/", version: "HTTP/1.1", headers: [
            HTTPHeader(name: "Host", value: "h"), HTTPHeader(name: "Upgrade", value: "websocket"),
            HTTPHeader(name: "Connection", value: "Upgrade"), HTTPHeader(name: "Sec-WebSocket-Key", value: "dGhlIHNhbXBsZSBub25jZQ=="),
            HTTPHeader(name: "Sec-WebSocket-Version", value: "13")]))
    }

    /// A client frame, masked with a zero key: the payload as it is.
    static func frame(_ opcode: UInt8, fin: Bool = true, _ payload: [UInt8]) -> [UInt8] {
        [(fin ? 0x80 : 0) | opcode, 0x80 | UInt8(payload.count), 0, 0, 0, 0] + payload
    }

    /// Turns the loop until `done` says so (or `seconds`), collecting what the client reads.
    @discardableResult
    func run(seconds: Double = 3, until done: ([UInt8]) -> Bool) -> [UInt8] {
        var received: [UInt8] = []
        let deadline = Instant.now().adding(seconds: seconds)
        let tick = loop.timer {}
        while !done(received) && Instant.now() < deadline {
            loop.arm(tick, at: Instant.now().adding(seconds: 0.01))
            loop.turn()
            var chunk = [UInt8](repeating: 0, count: 256)
            let n = recv(client, &chunk, chunk.count, Int32(MSG_DONTWAIT))
            if n > 0 { received += chunk[..<n] }
        }
        return received
    }

    /// Lets go of the mode: the server's weak reference to it goes nil.
    mutating func releaseMode() { keptMode = nil }

    func send(_ bytes: [UInt8]) {
        _ = bytes.withUnsafeBytes { write(client, $0.baseAddress, $0.count) }
    }
}
