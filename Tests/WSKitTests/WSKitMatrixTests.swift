import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Glibc
import TestSupport
import WSKit
import WSKitFoundation
import XCTest

/// The library's corner of issue 34's combination matrix: WSKit's `WebSocket`,
/// `WebSocket.reconnecting` and WSKitFoundation's `WebSocketTask` against the compressing
/// echo servers at their defaults (peers/matrix_echo.py: Python `websockets`;
/// matrix_echo.js: Node `ws` with perMessageDeflate; `wspipe -l --echo`), over ws:// and
/// (where the API takes a CA) wss://. Every cell: permessage-deflate agreed, compressible
/// and incompressible messages of both types back unchanged, the peer's count of received
/// bytes and the Close it got. The reconnecting cells restart the server between two
/// batches (SIGTERM: a Close with 1001, retried): the second connection must compress too.
final class WSKitMatrixTests: XCTestCase {
    /// An echo server at its defaults that can start again on its port.
    final class EchoServer: @unchecked Sendable {
        let kind: String
        let secure: Bool
        private(set) var peer: Peer
        private(set) var lives: [Peer] = []

        init(_ kind: String, secure: Bool, port: Int = 0) throws {
            self.kind = kind
            self.secure = secure
            peer = try Self.launch(kind, secure: secure, port: port)
            lives = [peer]
        }

        var url: String { "\(secure ? "wss" : "ws")://127.0.0.1:\(peer.port)/wskit" }

        private static func launch(_ kind: String, secure: Bool, port: Int) throws -> Peer {
            let tls = try TLSMaterial.shared()
            switch kind {
            case "python":
                return try Peer.launch(executable: Locations.python,
                                       arguments: ["\(Locations.peers)/matrix_echo.py", "--port", String(port)]
                                           + (secure ? ["--tls", tls.serverCert, tls.serverKey] : []),
                                       environment: Locations.baseEnvironment)
            case "node":
                let (node, ws) = try Tool.nodeWithWS()
                return try Peer.launch(executable: node, arguments: ["\(Locations.peers)/matrix_echo.js", String(port)]
                                           + (secure ? [tls.serverCert, tls.serverKey] : []),
                                       environment: Locations.baseEnvironment.merging(
                                           ["NODE_PATH": (ws as NSString).deletingLastPathComponent]) { $1 })
            default:
                return try Peer.launch(executable: Locations.wspipe,
                                       arguments: ["-l", "127.0.0.1:\(port)", "--echo", "-v"]
                                           + (secure ? ["--cert", tls.serverCert, "--key", tls.serverKey] : []),
                                       environment: Locations.baseEnvironment,
                                       portLine: "wspipe: listening on \(secure ? "wss" : "ws")://127.0.0.1:", portFromStderr: true)
            }
        }

        /// SIGTERM (each closes its connections with 1001), then a new life on the same port.
        func restart() throws {
            peer.process.signal(SIGTERM)
            _ = peer.process.wait(timeout: 10)
            peer = try Self.launch(kind, secure: secure, port: peer.port)
            lives.append(peer)
        }

        func kill() { lives.forEach { $0.process.kill() } }

        /// The close codes the server received on /wskit and the payload bytes it counted
        /// (wspipe's log has the codes only), over its lives; waits for the last life's.
        func reports() -> (codes: [String], bytes: Int?) {
            let wspipe = kind == "wspipe"
            let log = { (peer: Peer) in wspipe ? peer.process.stderr : peer.process.stdout }
            let marker = wspipe ? "disconnected" : "CLOSED /wskit "
            _ = log(peer).wait(timeout: 5) { String(decoding: $0, as: UTF8.self).contains(marker) }
            var codes: [String] = []
            var bytes = 0
            for life in lives {
                for line in log(life).text.split(separator: "\n") where line.contains(marker) {
                    if wspipe {
                        codes.append(line.range(of: " with ").map { String(line[$0.upperBound...].prefix { $0.isNumber }) } ?? "none")
                    } else {
                        let fields = line.split(separator: " ")
                        codes.append(fields.first { $0.hasPrefix("code=") }.map { String($0.dropFirst(5)) } ?? "?")
                        bytes += fields.first { $0.hasPrefix("bytes=") }.flatMap { Int($0.dropFirst(6)) } ?? 0
                    }
                }
            }
            return (codes, wspipe ? nil : bytes)
        }
    }

    static let batch: [Message] = [
        .text(String(repeating: "compressible matrix text, ", count: 4_000)),
        .binary((0..<70_000).map { UInt8(truncatingIfNeeded: $0 &* 2654435761 >> 13) }),
        .text("short ✓"),
        .text(""),
    ]

    static func payloadBytes(_ messages: [Message]) -> Int {
        messages.reduce(0) { total, message in
            switch message {
            case .text(let text): return total + text.utf8.count
            case .binary(let bytes): return total + bytes.count
            }
        }
    }

    private func assertServer(_ server: EchoServer, sent: Int, _ cell: String, file: StaticString = #filePath, line: UInt = #line) {
        let (codes, bytes) = server.reports()
        XCTAssertEqual(codes.last, "1000", "\(cell): close codes the server received: \(codes)", file: file, line: line)
        if let bytes { XCTAssertEqual(bytes, sent, "\(cell): payload bytes the server received", file: file, line: line) }
    }

    private var cells: [(kind: String, secure: Bool)] {
        ["python", "node", "wspipe"].flatMap { kind in [(kind, false), (kind, true)] }
    }

    func testWebSocketAgainstEveryCompressingPeer() async throws {
        for (kind, secure) in cells {
            let cell = "WebSocket x \(kind) x \(secure ? "wss" : "ws")"
            let server = try EchoServer(kind, secure: secure)
            defer { server.kill() }
            var options = WebSocketOptions()
            options.tls.caFile = try TLSMaterial.shared().caCert
            let ws = try await WebSocket.connect(to: server.url, options: options)
            XCTAssertTrue(ws.extensions.first?.hasPrefix("permessage-deflate") == true, "\(cell): \(ws.extensions)")
            try await withTimeout(30, cell) {
                var messages = ws.messages.makeAsyncIterator()
                for message in Self.batch {
                    try await ws.send(message)
                    let echoed = try await messages.next()
                    XCTAssertEqual(echoed, message, cell)
                }
                try await ws.close()
            }
            XCTAssertEqual(ws.closeCode, 1000, cell)
            assertServer(server, sent: Self.payloadBytes(Self.batch), cell)
        }
    }

    func testReconnectingWebSocketAcrossARestartOfEveryCompressingPeer() async throws {
        var policy = ReconnectPolicy()
        policy.baseDelay = .milliseconds(50)
        policy.maxDelay = .milliseconds(200)
        for (kind, secure) in cells {
            let cell = "reconnecting x \(kind) x \(secure ? "wss" : "ws")"
            let server = try EchoServer(kind, secure: secure)
            defer { server.kill() }
            var options = WebSocketOptions()
            options.tls.caFile = try TLSMaterial.shared().caCert
            let run = try WebSocket.reconnecting(to: server.url, options: options, policy: policy)
            let (echoed, connections, extensions) = try await withTimeout(40, cell) { () -> ([Message], Int, [[String]]) in
                var echoed: [Message] = []
                var connections = 0
                var extensions: [[String]] = []
                for try await event in run {
                    switch event {
                    case .connected(let connection):
                        connections += 1
                        extensions.append(run.current?.extensions ?? [])
                        _ = connection
                        for message in Self.batch { try await run.send(message) }
                    case .message(let message):
                        echoed.append(message)
                        if echoed.count == Self.batch.count {
                            try server.restart()  // the second connection sends the batch again
                        } else if echoed.count == 2 * Self.batch.count {
                            try await run.close()
                        }
                    case .disconnected, .dropped:
                        break
                    }
                }
                return (echoed, connections, extensions)
            }
            XCTAssertEqual(echoed, Self.batch + Self.batch, cell)
            XCTAssertEqual(connections, 2, cell)
            XCTAssertEqual(extensions.map { $0.first?.hasPrefix("permessage-deflate") == true }, [true, true], "\(cell): \(extensions)")
            assertServer(server, sent: 2 * Self.payloadBytes(Self.batch), cell)
        }
    }

    /// WebSocketTask takes no CA (the system's trust store, as Apple's): ws:// only.
    func testWebSocketTaskAgainstEveryCompressingPeer() async throws {
        for (kind, secure) in cells where !secure {
            let cell = "WebSocketTask x \(kind) x ws"
            let server = try EchoServer(kind, secure: false)
            defer { server.kill() }
            let task = WebSocketTask(with: try XCTUnwrap(URL(string: server.url)))
            task.resume()
            try await withTimeout(30, cell) {
                for message in Self.batch {
                    let sent: WebSocketTask.Message
                    switch message {
                    case .text(let text): sent = .string(text)
                    case .binary(let bytes): sent = .data(Data(bytes))
                    }
                    try await task.send(sent)
                    let echoed = try await task.receive()
                    switch (echoed, message) {
                    case (.string(let got), .text(let want)): XCTAssertEqual(got, want, cell)
                    case (.data(let got), .binary(let want)): XCTAssertEqual(Array(got), want, cell)
                    default: XCTFail("\(cell): \(echoed) for \(message)")
                    }
                }
            }
            task.cancel(with: .normalClosure, reason: nil)
            assertServer(server, sent: Self.payloadBytes(Self.batch), cell)
        }
    }
}
