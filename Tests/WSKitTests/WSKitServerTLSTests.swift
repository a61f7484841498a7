import Foundation
import XCTest
import TestSupport
import WSKit

/// WSKit's WebSocketServer serving wss:// (`WebSocketServerOptions.tls`): WSKit's own client
/// and Python `websockets` trusting the test CA, mutual TLS, and settings bind refuses.
final class WSKitServerTLSTests: XCTestCase {
    private func tlsServer(clientCA: String? = nil) async throws -> WebSocketServer {
        let material = try TLSMaterial.shared()
        var options = WebSocketServerOptions()
        options.tls = .init(certificateFile: material.serverCert, keyFile: material.serverKey, clientCAFile: clientCA)
        return try await WebSocketServer.bind(to: "127.0.0.1:0", options: options)
    }

    /// Accepts one connection, checks its request with `check`, answers one message with "re: " + it.
    private func answerOne(_ server: WebSocketServer, _ check: @escaping @Sendable (WebSocket.Request) -> Void) -> Task<Void, Error> {
        Task {
            var iterator = server.makeAsyncIterator()
            guard let pending = await iterator.next() else { throw HarnessError("no connection") }
            check(pending.request)
            let ws = try await pending.accept()
            var messages = ws.messages.makeAsyncIterator()
            guard case .text(let text)? = try await messages.next() else { throw HarnessError("no text message") }
            try await ws.send(.text("re: " + text))
            for try await _ in ws.messages {}
        }
    }

    func testAWSKitClientTrustingTheCAConnectsToAWssServer() async throws {
        let material = try TLSMaterial.shared()
        let server = try await tlsServer()
        let port = try XCTUnwrap(server.port)
        let handler = answerOne(server) { request in
            XCTAssertTrue(request.isSecure)
            XCTAssertNil(request.clientCertificateSubject)
        }
        var options = WebSocketOptions()
        options.tls.caFile = material.caCert
        try await exchange(port: port, options: options, sending: "hello")
        try await withTimeout { try await handler.value }
        await server.close()
    }

    func testAPlainClientWithoutTheCAIsRefusedByItsVerification() async throws {
        let server = try await tlsServer()
        let port = try XCTUnwrap(server.port)
        try await expectTLSFailure(port: port, options: WebSocketOptions(), saying: "unknown CA")
        await server.close()
    }

    func testAPythonClientOverWss() async throws {
        let material = try TLSMaterial.shared()
        let server = try await tlsServer()
        let port = try XCTUnwrap(server.port)
        let handler = answerOne(server) { request in XCTAssertTrue(request.isSecure) }
        let client = try ChildProcess(executable: Locations.python,
                                      arguments: ["\(Locations.peers)/wskit_client.py", "connect", "wss://localhost:\(port)/",
                                                  "--cafile", material.caCert, "--send", "hi"],
                                      environment: Locations.baseEnvironment)
        // The handler ends when the client's Close arrives; Python closes when the server's
        // 1001 (server.close) comes after the answer.
        try await withTimeout {
            while !client.stdout.text.contains("message re: hi") { try await Task.sleep(for: .milliseconds(20)) }
        }
        await server.close()
        let result = await finished(client, timeout: 20)
        XCTAssertEqual(result.stdoutText, "open -\nmessage re: hi\nclosed 1001 \n", "\(result)")
        _ = try? await handler.value
    }

    func testTheMinimumVersionRefusesAnOlderClient() async throws {
        let material = try TLSMaterial.shared()
        var options = WebSocketServerOptions()
        options.tls = .init(certificateFile: material.serverCert, keyFile: material.serverKey, minimumVersion: .tls13)
        let server = try await WebSocketServer.bind(to: "127.0.0.1:0", options: options)
        let port = try XCTUnwrap(server.port)
        let client = try ChildProcess(executable: Locations.python,
                                      arguments: ["\(Locations.peers)/wskit_client.py", "connect", "wss://localhost:\(port)/",
                                                  "--cafile", material.caCert, "--tls-max", "1.2"],
                                      environment: Locations.baseEnvironment)
        let result = await finished(client, timeout: 20)
        XCTAssertNotEqual(result.exitCode, 0, "\(result)")
        XCTAssertFalse(result.stdoutText.contains("open"), "\(result)")
        XCTAssertTrue(result.stderr.contains("VERSION") || result.stderr.contains("version"), "\(result)")
        let handler = answerOne(server) { request in XCTAssertTrue(request.isSecure) }
        var tls13 = WebSocketOptions()
        tls13.tls.caFile = material.caCert
        try await exchange(port: port, options: tls13, sending: "1.3")
        try await withTimeout { try await handler.value }
        await server.close()
    }

    func testMutualTLSShowsTheClientCertificateSubjectAndRefusesAClientWithoutOne() async throws {
        let material = try TLSMaterial.shared()
        let client = try ClientTLSMaterial.shared()
        let server = try await tlsServer(clientCA: material.caCert)
        let port = try XCTUnwrap(server.port)
        let handler = answerOne(server) { request in
            XCTAssertTrue(request.isSecure)
            XCTAssertEqual(request.clientCertificateSubject, "CN=wspipe-test-client")
        }
        var options = WebSocketOptions()
        options.tls.caFile = material.caCert
        options.tls.clientCertificate = (certificateFile: client.cert, keyFile: client.key, keyPassword: nil)
        try await exchange(port: port, options: options, sending: "me")
        try await withTimeout { try await handler.value }
        var withoutCertificate = WebSocketOptions()
        withoutCertificate.tls.caFile = material.caCert
        try await expectTLSFailure(port: port, options: withoutCertificate, saying: "client certificate")
        await server.close()
    }

    func testTLSSettingsThatCannotBeUsedMakeBindThrowWithNothingBound() async throws {
        let material = try TLSMaterial.shared()
        let client = try ClientTLSMaterial.shared()
        let garbage = material.directory + "/garbage.key"
        try "not a key\n".write(toFile: garbage, atomically: true, encoding: .utf8)
        let cases: [(WebSocketServerOptions.TLS, String)] = [
            (.init(certificateFile: material.serverCert, keyFile: material.otherKey), "does not belong to the certificate"),
            (.init(certificateFile: material.serverCert, keyFile: garbage), "private key"),
            (.init(certificateFile: material.directory + "/missing.pem", keyFile: material.serverKey),
             "cannot load the server certificate from '\(material.directory)/missing.pem'"),
            (.init(certificateFile: client.cert, keyFile: client.encryptedKey), "give its passphrase with tls.keyPassword"),
            (.init(certificateFile: client.cert, keyFile: client.encryptedKey, keyPassword: "wrong"), "wrong passphrase"),
            (.init(certificateFile: material.serverCert, keyFile: material.serverKey, clientCAFile: garbage),
             "cannot load the client CA certificates from '\(garbage)' (tls.clientCAFile)"),
        ]
        // A free port, bound by nobody after each failure.
        let probe = try await WebSocketServer.bind(to: "127.0.0.1:0")
        let port = try XCTUnwrap(probe.port)
        await probe.close()
        for (tls, expected) in cases {
            var options = WebSocketServerOptions()
            options.tls = tls
            do {
                _ = try await WebSocketServer.bind(to: "127.0.0.1:\(port)", options: options)
                XCTFail("bind accepted \(tls.keyFile)")
            } catch WebSocketError.tls(let text) {
                print("bind refused: \(text)")
                XCTAssertTrue(text.contains(expected), "\(text) lacks \(expected)")
                XCTAssertFalse(text.contains("wrong") && tls.keyPassword == nil, text)
            }
            XCTAssertFalse(canConnect(port: port), "something listens on \(port) after a failed bind")
        }
        var options = WebSocketServerOptions()
        options.tls = .init(certificateFile: client.cert, keyFile: client.encryptedKey, keyPassword: ClientTLSMaterial.passphrase)
        let server = try await WebSocketServer.bind(to: "127.0.0.1:0", options: options)
        await server.close()
    }

    /// A WSKit client connects to wss://localhost:`port`/, sends `text`, gets "re: " + it, closes.
    private func exchange(port: Int, options: WebSocketOptions, sending text: String) async throws {
        try await withTimeout {
            let ws = try await WebSocket.connect(to: "wss://localhost:\(port)/", options: options)
            try await ws.send(.text(text))
            var messages = ws.messages.makeAsyncIterator()
            let answer = try await messages.next()
            XCTAssertEqual(answer, .text("re: " + text))
            try await ws.close()
        }
    }

    /// A WSKit client's connect to wss://localhost:`port`/ throws `.tls` with `text` in its sentence.
    private func expectTLSFailure(port: Int, options: WebSocketOptions, saying text: String,
                                  file: StaticString = #filePath, line: UInt = #line) async throws {
        do {
            _ = try await withTimeout { try await WebSocket.connect(to: "wss://localhost:\(port)/", options: options) }
            XCTFail("the connection was accepted", file: file, line: line)
        } catch WebSocketError.tls(let sentence) {
            XCTAssertTrue(sentence.contains(text), sentence, file: file, line: line)
        }
    }

    private func canConnect(port: Int) -> Bool {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = UInt16(port).bigEndian
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        return withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        } == 0
    }
}
