import Foundation
import XCTest
import TestSupport
import WSKit

/// Messages larger than the receive buffer (`receiveBufferLimit`, 1 MiB) pause reading
/// until the consumer has taken them; a close after them must still complete.
final class WSKitLargeMessageTests: XCTestCase {
    private func greeter(_ bytes: Int) throws -> Peer {
        try Peer.launch(executable: Locations.python,
                        arguments: ["\(Locations.peers)/echo.py", "--port", "0", "--greet-zeros", "\(bytes)"],
                        environment: Locations.baseEnvironment)
    }

    /// The message handed to a consumer already waiting for it (the engine's hand-off, not
    /// `receive`'s own path) left reading paused: the Pong the close waits for was never read.
    func testACloseAfterAMessageLargerThanTheReceiveBufferReachesThePeer() async throws {
        for size in [2 << 20, 64 << 20] {
            let peer = try greeter(size)
            defer { peer.process.kill() }
            var options = WebSocketOptions()
            options.maximumMessageSize = 64 << 20
            let ws = try await WebSocket.connect(to: "ws://127.0.0.1:\(peer.port)/", options: options)
            try await withTimeout(15, "\(size) bytes and the close") {
                var iterator = ws.messages.makeAsyncIterator()
                let message = try await iterator.next()
                guard case .binary(let bytes) = message else { return XCTFail("\(String(describing: message))") }
                XCTAssertEqual(bytes.count, size)
                let start = ContinuousClock.now
                try await ws.close()
                // The peer's echo of our Close: it got ours.
                XCTAssertEqual(ws.closeCode, 1000, "size \(size)")
                XCTAssertLessThan(ContinuousClock.now - start, .seconds(1), "size \(size)")
            }
        }
    }

    /// A consumer that never reads again: reading stays paused, yet the close timeout bounds
    /// the ending, and the message received before it is still there to read.
    func testTheCloseTimeoutBoundsTheEndingWhileReadingIsPaused() async throws {
        let peer = try greeter(2 << 20)
        defer { peer.process.kill() }
        var options = WebSocketOptions()
        options.maximumMessageSize = 4 << 20
        options.closeTimeout = .seconds(1)
        let ws = try await WebSocket.connect(to: "ws://127.0.0.1:\(peer.port)/", options: options)
        try await Task.sleep(for: .milliseconds(500))  // the message fills the inbox: reading pauses
        try await withTimeout(10, "the close") {
            let start = ContinuousClock.now
            try await ws.close()
            XCTAssertLessThan(ContinuousClock.now - start, .seconds(3))
            XCTAssertEqual(ws.state, .closed)
            var iterator = ws.messages.makeAsyncIterator()
            let message = try? await iterator.next()
            guard case .binary(let bytes)? = message else { return XCTFail("\(String(describing: message))") }
            XCTAssertEqual(bytes.count, 2 << 20)
        }
    }
}
