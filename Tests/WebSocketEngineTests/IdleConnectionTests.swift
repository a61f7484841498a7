import Glibc
import WebSocketCore
@testable import WebSocketEngine
import WebSocketTransport
import XCTest

/// What an idle server connection keeps (issue 39): its request only while it is handed
/// over (unless the mode keeps requests), no timer without a deadline.
final class IdleConnectionTests: XCTestCase {
    final class Mode: ServerMode {
        let keepsRequests: Bool
        var pathAtStart: String?
        init(keepsRequests: Bool) { self.keepsRequests = keepsRequests }
        func handler(for connection: ServerConnection) -> ConnectionDelegate { EchoHandler() }
        func connectionDidStart(_ connection: ServerConnection) { pathAtStart = connection.info.request?.path }
    }

    /// Serves one client that completes its handshake and then sends nothing.
    /// The client's socket stays open until `done` (the connection's driver is abandoned then).
    func serveIdleClient(_ mode: Mode, _ check: (ServerConnection?, _ pathInEvent: String?) throws -> Void) throws {
        let loop = try EventLoop()
        let listener = try TCPListener(address: "127.0.0.1", port: 0)
        let server = ServerDriver(loop: loop, configuration: ServerConfiguration(), mode: mode)
        var connected: ServerConnection?
        var pathInEvent: String?
        server.onEvent = { event in
            if case .connected(let connection) = event {
                connected = connection
                pathInEvent = connection.info.request?.path
            }
        }
        server.listen(on: listener)
        let client = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(client) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(listener.port).bigEndian)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let linked = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(client, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        XCTAssertEqual(linked, 0)
        let request = "GET /chat?room=1 HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
            + "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n"
        _ = Array(request.utf8).withUnsafeBytes { write(client, $0.baseAddress, $0.count) }
        let tick = loop.timer {}
        let deadline = Instant.now().adding(seconds: 5)
        while connected == nil && Instant.now() < deadline {
            loop.arm(tick, at: Instant.now().adding(seconds: 0.01))
            loop.turn()
        }
        for _ in 0..<5 {  // the driver's first service (a turn without a deadline would wait for ever)
            loop.arm(tick, at: Instant.now().adding(seconds: 0.01))
            loop.turn()
        }
        try check(connected, pathInEvent)
        connected?.driver?.abandon()
    }

    func testTheRequestIsLetGoOnceTheConnectionHasStarted() throws {
        let mode = Mode(keepsRequests: false)
        try serveIdleClient(mode) { connection, pathInEvent in
            guard let connection else { return XCTFail("no connection") }
            XCTAssertEqual(pathInEvent, "/chat", "the .connected event has the request")
            XCTAssertEqual(mode.pathAtStart, "/chat", "connectionDidStart has the request")
            XCTAssertNil(connection.info.request, "an idle connection keeps no request")
            XCTAssertEqual(connection.info.id, 1)
        }
    }

    func testAModeThatKeepsRequestsKeepsThem() throws {
        try serveIdleClient(Mode(keepsRequests: true)) { connection, _ in
            XCTAssertEqual(connection?.info.request?.path, "/chat")
            XCTAssertEqual(connection?.info.request?.query, "room=1")
        }
    }

    func testAnIdleDriverWithoutPingsHasNoTimer() throws {
        try serveIdleClient(Mode(keepsRequests: false)) { connection, _ in
            guard let driver = connection?.driver else { return XCTFail("no driver") }
            XCTAssertFalse(driver.hasTimer, "no deadline: no timer object")
            driver.close(ClosePayload(code: .normalClosure))
            let tick = driver.loop.timer {}
            driver.loop.arm(tick, at: Instant.now().adding(seconds: 0.01))
            driver.loop.turn()
            XCTAssertTrue(driver.hasTimer, "a close under way has its deadline")
        }
    }
}
