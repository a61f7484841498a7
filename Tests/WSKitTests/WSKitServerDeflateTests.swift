import Foundation
import XCTest
import TestSupport
import WSKit

/// permessage-deflate (RFC 7692) in WSKit's server: accepted by default (4 KiB windows),
/// tunable, declined with `deflate = nil`; what was agreed is on the server's `WebSocket`.
/// Peers: Python `websockets` (wskit_client.py --deflate, its default offer) and WSKit's client.
final class WSKitServerDeflateTests: XCTestCase {
    private func pythonClient(_ arguments: [String]) throws -> ChildProcess {
        try ChildProcess(executable: Locations.python, arguments: ["\(Locations.peers)/wskit_client.py"] + arguments,
                         environment: Locations.baseEnvironment)
    }

    /// Accepts one client, echoes its first message, closes with 1000; the server's socket.
    private static func echoOnce(_ server: WebSocketServer) async throws -> WebSocket {
        var iterator = server.makeAsyncIterator()
        let next = await iterator.next()
        let ws = try await XCTUnwrap(next).accept()
        var messages = ws.messages.makeAsyncIterator()
        let first = try await messages.next()
        try await ws.send(XCTUnwrap(first))
        try await ws.close()
        return ws
    }

    func testAPythonClientGetsDeflateByDefaultAndMessagesRoundTrip() async throws {
        let server = try await WebSocketServer.bind(to: "127.0.0.1:0")
        XCTAssertEqual(server.options.deflate, .init())
        let port = try XCTUnwrap(server.port)
        let text = String(repeating: "compressible text, ", count: 3_000)  // 57 KB: one argv string
        let client = try pythonClient(["connect", "ws://127.0.0.1:\(port)/", "--deflate", "--send", text])
        let ws = try await withTimeout { try await Self.echoOnce(server) }
        // websockets offers `client_max_window_bits` without a value: both windows are ours (12).
        XCTAssertEqual(ws.extensions, ["permessage-deflate; server_max_window_bits=12; client_max_window_bits=12"])
        let agreed = try XCTUnwrap(ws.deflate)
        XCTAssertEqual(agreed.outgoingWindowBits, 12)
        XCTAssertEqual(agreed.incomingWindowBits, 12)
        XCTAssertFalse(agreed.outgoingNoContextTakeover)
        let result = await finished(client, timeout: 20)
        XCTAssertEqual(result.stdoutText,
                       "open -\nextensions permessage-deflate; server_max_window_bits=12; client_max_window_bits=12\n"
                       + "message \(text)\nclosed 1000 \n", "\(result)")
        await server.close()
    }

    func testNoDeflateDeclinesTheOfferAndBadSettingsAreRefused() async throws {
        var options = WebSocketServerOptions()
        options.deflate = nil
        let server = try await WebSocketServer.bind(to: "127.0.0.1:0", options: options)
        let port = try XCTUnwrap(server.port)
        let client = try pythonClient(["connect", "ws://127.0.0.1:\(port)/", "--deflate", "--send", "plain"])
        let ws = try await withTimeout { try await Self.echoOnce(server) }
        XCTAssertEqual(ws.extensions, [])
        XCTAssertNil(ws.deflate)
        let result = await finished(client, timeout: 20)
        XCTAssertEqual(result.stdoutText, "open -\nextensions -\nmessage plain\nclosed 1000 \n", "\(result)")
        await server.close()

        for (deflate, message) in [(WebSocketServerOptions.Deflate(windowBits: 8), "deflate: windowBits 8 is not 9...15"),
                                   (.init(clientWindowBits: 16), "deflate: clientWindowBits 16 is not 8...15"),
                                   (.init(memoryLevel: 0), "deflate: memoryLevel 0 is not 1...9")] {
            options.deflate = deflate
            do {
                _ = try await WebSocketServer.bind(to: "127.0.0.1:0", options: options)
                XCTFail("bound with \(deflate)")
            } catch {
                XCTAssertEqual(error, .invalidArgument(message))
            }
        }
    }

    func testAWSKitClientAndServerAgreeOnTunedDeflate() async throws {
        var options = WebSocketServerOptions()
        options.deflate = .init(windowBits: 10, clientWindowBits: 11, serverNoContextTakeover: true)
        let server = try await WebSocketServer.bind(to: "127.0.0.1:0", options: options)
        let port = try XCTUnwrap(server.port)
        let text = String(repeating: "both ends compress this, ", count: 8_000)
        try await withTimeout {
            async let served = Self.echoOnce(server)
            let client = try await WebSocket.connect(to: "ws://127.0.0.1:\(port)/")
            let clientAgreed = try XCTUnwrap(client.deflate, "\(client.extensions)")
            XCTAssertEqual(clientAgreed.incomingWindowBits, 10)
            XCTAssertEqual(clientAgreed.outgoingWindowBits, 11)
            XCTAssertTrue(clientAgreed.incomingNoContextTakeover)
            XCTAssertFalse(clientAgreed.outgoingNoContextTakeover)
            try await client.send(.text(text))
            var messages = client.messages.makeAsyncIterator()
            let echoed = try await messages.next()
            XCTAssertEqual(echoed, .text(text))
            let ws = try await served
            XCTAssertEqual(ws.extensions, client.extensions)
            let serverAgreed = try XCTUnwrap(ws.deflate)
            XCTAssertEqual(serverAgreed.outgoingWindowBits, 10)
            XCTAssertEqual(serverAgreed.incomingWindowBits, 11)
            XCTAssertTrue(serverAgreed.outgoingNoContextTakeover)
            let end = try await messages.next()
            XCTAssertNil(end)
            XCTAssertEqual(client.closeCode, 1000)
        }
        await server.close()
    }
}
