import Foundation
import Glibc
import XCTest
import TestSupport
import WSKit

/// WSKit's error sentences are the transport's (the CLI's), with the library's setting
/// names where the CLI names its options.
final class WSKitErrorWordingTests: XCTestCase {
    func testAnUnknownCAIsWordedWithTheLibrarysSettingNames() async throws {
        let tls = try TLSMaterial.shared()
        let peer = try Peer.launch(executable: Locations.python,
                                   arguments: ["\(Locations.peers)/echo.py", "--port", "0", "--tls", tls.serverCert, tls.serverKey],
                                   environment: Locations.baseEnvironment)
        defer { peer.process.kill() }
        var options = WebSocketOptions()
        options.tls.caFile = "/dev/null/none"  // a trust store that cannot load
        do {
            _ = try await WebSocket.connect(to: "wss://localhost:\(peer.port)/", options: options)
            XCTFail("connected with a CA file that does not exist")
        } catch {
            guard case .tls(let text) = error else { return XCTFail("\(error)") }
            XCTAssertTrue(text.hasPrefix("TLS: cannot load CA certificates from '/dev/null/none'"), text)
        }
        options.tls.caFile = nil
        do {
            // The system store does not know the test CA.
            _ = try await WebSocket.connect(to: "wss://localhost:\(peer.port)/", options: options)
            XCTFail("connected to a server signed by an unknown CA")
        } catch {
            guard case .tls(let text) = error else { return XCTFail("\(error)") }
            XCTAssertTrue(text.contains("signed by an unknown CA (trust it with tls.caFile)"), text)
            XCTAssertTrue(text.hasSuffix("; tls.verifiesPeer = false skips verification"), text)
            XCTAssertFalse(text.contains("--"), text)
        }
        options.tls.caFile = tls.caCert
        let ws = try await WebSocket.connect(to: "wss://localhost:\(peer.port)/", options: options)
        try await withTimeout { try await ws.close() }
    }

    /// A server's socket names the other side as "the client" (a client's: "the server").
    func testAServerSocketNamesItsPeerTheClient() async throws {
        let server = try await WebSocketServer.bind(to: "127.0.0.1:0")
        let port = try XCTUnwrap(server.port)
        try await withTimeout {
            let fd = try connectRaw(port: port)
            sendUpgradeRequest(fd)
            var iterator = server.makeAsyncIterator()
            let next = await iterator.next()
            let ws = try await XCTUnwrap(next).accept()
            var head = [UInt8](repeating: 0, count: 512)
            XCTAssertGreaterThan(recv(fd, &head, head.count, 0), 0, "the 101")
            close(fd)  // TCP ends without a Close frame
            do {
                for try await _ in ws.messages {}
                XCTFail("a connection without a closing handshake ended cleanly")
            } catch let error as WebSocketError {
                XCTAssertEqual(error, .connectionLost("the client closed the TCP connection without a closing handshake"))
            }
        }
        await server.close()
    }

    func testATimeoutNamesTheLibrarysLimit() async throws {
        // A listener that never answers the handshake.
        let server = try await WebSocketServer.bind(to: "127.0.0.1:0")
        let port = try XCTUnwrap(server.port)
        var options = WebSocketOptions()
        options.connectTimeout = .milliseconds(300)
        let short = options
        do {
            _ = try await withTimeout { try await WebSocket.connect(to: "ws://127.0.0.1:\(port)/", options: short) }
            XCTFail("connected to a server that never decides")
        } catch let error as WebSocketError {
            XCTAssertEqual(error, .timedOut("timed out after 0.3 s waiting for the server's handshake response (WebSocketOptions.connectTimeout)"))
        }
        await server.close()
    }
}
