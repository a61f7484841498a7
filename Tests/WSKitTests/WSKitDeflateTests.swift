import Foundation
import XCTest
import TestSupport
import WSKit

/// permessage-deflate (RFC 7692) between WSKit's client and Python `websockets` (echo.py
/// --deflate): offered by default, tunable, off with `deflate = nil`.
final class WSKitDeflateTests: XCTestCase {
    private func echo(_ deflate: String?) throws -> Peer {
        try Peer.launch(executable: Locations.python,
                        arguments: ["\(Locations.peers)/echo.py", "--port", "0"] + (deflate.map { ["--deflate", $0] } ?? []),
                        environment: Locations.baseEnvironment)
    }

    func testDeflateIsOfferedByDefaultAndReported() async throws {
        let peer = try echo("{}")
        defer { peer.process.kill() }
        let ws = try await WebSocket.connect(to: "ws://127.0.0.1:\(peer.port)/")
        XCTAssertEqual(ws.extensions.count, 1)
        XCTAssertTrue(ws.extensions.first?.hasPrefix("permessage-deflate") == true, "\(ws.extensions)")
        XCTAssertEqual(ws.deflate?.incomingWindowBits, 15)
        let text = String(repeating: "compressible text, ", count: 10_000)
        try await withTimeout {
            try await ws.send(.text(text))
            try await ws.send(.binary(Array(repeating: 7, count: 100_000)))
            var messages = ws.messages.makeAsyncIterator()
            let first = try await messages.next()
            let second = try await messages.next()
            XCTAssertEqual(first, .text(text))
            XCTAssertEqual(second, .binary(Array(repeating: 7, count: 100_000)))
            try await ws.close()
        }
        XCTAssertEqual(ws.closeCode, 1000)
    }

    func testWindowBitsAndContextTakeoverAreNegotiated() async throws {
        let peer = try echo("{}")
        defer { peer.process.kill() }
        var options = WebSocketOptions()
        options.deflate = .init(serverMaxWindowBits: 10, clientMaxWindowBits: 11, serverNoContextTakeover: true)
        let ws = try await WebSocket.connect(to: "ws://127.0.0.1:\(peer.port)/", options: options)
        let agreed = try XCTUnwrap(ws.deflate, "\(ws.extensions)")
        XCTAssertEqual(agreed.incomingWindowBits, 10)
        XCTAssertEqual(agreed.outgoingWindowBits, 11)
        XCTAssertTrue(agreed.incomingNoContextTakeover)
        let text = String(repeating: "windowed ", count: 5_000)
        try await withTimeout {
            try await ws.send(.text(text))
            var messages = ws.messages.makeAsyncIterator()
            let echoed = try await messages.next()
            XCTAssertEqual(echoed, .text(text))
            try await ws.close()
        }
    }

    func testNoDeflateOffersNothingAndBadWindowBitsAreRefused() async throws {
        let peer = try echo("{}")
        defer { peer.process.kill() }
        var options = WebSocketOptions()
        options.deflate = nil
        let ws = try await WebSocket.connect(to: "ws://127.0.0.1:\(peer.port)/", options: options)
        XCTAssertEqual(ws.extensions, [])
        XCTAssertNil(ws.deflate)
        try await withTimeout { try await ws.close() }
        options.deflate = .init(serverMaxWindowBits: 7)
        do {
            _ = try await WebSocket.connect(to: "ws://127.0.0.1:\(peer.port)/", options: options)
            XCTFail("connected with 7 window bits")
        } catch {
            XCTAssertEqual(error, .invalidArgument("deflate: serverMaxWindowBits 7 is not 8...15"))
        }
    }
}
