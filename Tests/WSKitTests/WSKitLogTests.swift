import Synchronization
import XCTest
@testable import WSKit

/// `WebSocketOptions.log`: the handshake, the end and failures, with secrets redacted.
/// WSKit's own server is the peer; every wait is bounded.
final class WSKitLogTests: XCTestCase {
    /// The lines a log handler was given, in order.
    private final class Lines: Sendable {
        private let lines = Mutex<[String]>([])
        var all: [String] { lines.withLock { $0 } }
        func append(_ line: String) { lines.withLock { $0.append(line) } }
    }

    func testTheLogShowsTheHandshakeRedactedAndTheClose() async throws {
        let server = try await WebSocketServer.bind(to: "127.0.0.1:0")
        let port = try XCTUnwrap(server.port)
        let serving = Task {
            var pending = server.makeAsyncIterator()
            guard let first = await pending.next(), let ws = try? await first.accept() else { return }
            do { for try await message in ws.messages { try await ws.send(message) } } catch {}
        }
        let lines = Lines()
        var settings = WebSocketOptions(bearerToken: "s3cret-token")
        settings.log = { lines.append($0) }
        let options = settings
        try await withTimeout(20) {
            let ws = try await WebSocket.connect(to: "ws://127.0.0.1:\(port)/chat?access_token=hidden-value&room=5", options: options)
            try await ws.send(.text("hi"))
            var iterator = ws.messages.makeAsyncIterator()
            let echoed = try await iterator.next()
            XCTAssertEqual(echoed, .text("hi"))
            try await ws.close(code: 1000, reason: "done")
        }
        let all = lines.all
        XCTAssertTrue(all.contains("> GET /chat?access_token=[redacted]&room=5 HTTP/1.1"), "\(all)")
        XCTAssertTrue(all.contains("> Authorization: Bearer [redacted]"), "\(all)")
        XCTAssertTrue(all.contains { $0.hasPrefix("< HTTP/1.1 101 ") }, "\(all)")
        XCTAssertTrue(all.contains { $0.hasPrefix("< Sec-WebSocket-Accept: ") }, "\(all)")
        XCTAssertFalse(all.contains { $0.contains("s3cret") || $0.contains("hidden-value") }, "\(all)")
        XCTAssertEqual(all.last.map { $0.hasPrefix("closed 1000") }, true, "\(all)")
        await server.close()
        await serving.value
    }

    func testTheLogShowsAFailedConnectAndTheServersClose() async throws {
        // A port nobody listens on: bound, then closed.
        let gone = try await WebSocketServer.bind(to: "127.0.0.1:0")
        let port = try XCTUnwrap(gone.port)
        await gone.close()
        let lines = Lines()
        var settings = WebSocketOptions()
        settings.log = { lines.append($0) }
        let options = settings
        let error = try await withTimeout(20) { () -> WebSocketError? in
            do throws(WebSocketError) {
                _ = try await WebSocket.connect(to: "ws://127.0.0.1:\(port)/", options: options)
                return nil
            } catch { return error }
        }
        let failure = try XCTUnwrap(error)
        XCTAssertEqual(lines.all.last, "failed: \(failure.description)", "\(lines.all)")

        // A server that fails the connection for a message over its limit closes with 1009.
        var serverOptions = WebSocketServerOptions()
        serverOptions.maximumMessageSize = 10
        let server = try await WebSocketServer.bind(to: "127.0.0.1:0", options: serverOptions)
        let serverPort = try XCTUnwrap(server.port)
        let serving = Task {
            var pending = server.makeAsyncIterator()
            guard let first = await pending.next(), let ws = try? await first.accept() else { return }
            do { for try await _ in ws.messages {} } catch {}
        }
        let ended = Lines()
        var settingsFailing = WebSocketOptions()
        settingsFailing.log = { ended.append($0) }
        let failing = settingsFailing
        try await withTimeout(20) {
            let ws = try await WebSocket.connect(to: "ws://127.0.0.1:\(serverPort)/", options: failing)
            try await ws.send(.text(String(repeating: "x", count: 100)))
            do { for try await _ in ws.messages {} } catch {}  // ends after the last line
        }
        XCTAssertEqual(ended.all.last.map { $0.hasPrefix("closed 1009") }, true, "\(ended.all)")
        await server.close()
        await serving.value
    }

    func testTheLastLineSaysHowItEnded() {
        XCTAssertEqual(ConnectionLog.ending(failure: nil, code: 1000, reason: "done"), "closed 1000 done")
        XCTAssertEqual(ConnectionLog.ending(failure: nil, code: 4001, reason: ""), "closed 4001")
        XCTAssertEqual(ConnectionLog.ending(failure: nil, code: nil, reason: nil), "closed without a code")
        let lost = WebSocketError.connectionLost("the server reset the connection")
        XCTAssertEqual(ConnectionLog.ending(failure: lost, code: nil, reason: nil), "failed: the server reset the connection")
    }
}
