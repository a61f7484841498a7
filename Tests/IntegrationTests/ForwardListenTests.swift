// --forward-listen [ADDR:]PORT URL against real servers: wspipe -l --echo and Python
// `websockets`; each TCP connection its own WebSocket, its bytes back exactly; a refused
// handshake or a slow server touches no other connection; SIGTERM closes each with 1001.
import Foundation
import TestSupport
import XCTest

final class ForwardListenTests: IntegrationTestCase {
    /// Starts `wspipe --forward-listen 0 ARGUMENTS URL` and reads its port.
    private func startForwarding(_ url: String, _ arguments: [String] = [], address: String = "0",
                                 environment: [String: String] = [:], file: StaticString = #filePath,
                                 line: UInt = #line) throws -> (ChildProcess, Int) {
        let child = try spawnWspipe(["--forward-listen", address] + arguments + [url], stdin: .null, environment: environment)
        let text = child.stderr.waitForLine(startingWith: "wspipe: listening on tcp://", timeout: 15)
        let after = text?.components(separatedBy: "tcp://").dropFirst().first?.split(separator: ",").first
        guard let after, let colon = after.lastIndex(of: ":"), let port = Int(after[after.index(after: colon)...]) else {
            XCTFail("no listening line; stderr: \(child.stderr.text)", file: file, line: line)
            throw HarnessError("not listening")
        }
        return (child, port)
    }

    private func tcpClients(_ arguments: [String], stdin: StandardInput = .null) throws -> ChildProcess {
        let child = try ChildProcess(executable: Locations.python, arguments: ["\(Locations.peers)/tcp_clients.py"] + arguments,
                                     environment: Locations.baseEnvironment, stdin: stdin)
        addTeardownBlock { child.kill() }
        return child
    }

    /// N connections at once through `port`, each with `bytes` distinct bytes; their lines.
    private func echoThrough(_ port: Int, count: Int, bytes: Int, timeout: Double = 30,
                             file: StaticString = #filePath, line: UInt = #line) throws -> [String] {
        let child = try tcpClients(["--port", "\(port)", "echo", "--count", "\(count)", "--bytes", "\(bytes)",
                                    "--timeout", "\(timeout)"])
        let result = finish(child, timeout: timeout + 15, file: file, line: line)
        XCTAssertEqual(result.exitCode, 0, "\(result)", file: file, line: line)
        return result.stdoutText.split(separator: "\n").map(String.init)
    }

    /// Waits until `peer` printed `count` lines starting with `prefix`; the lines.
    private func waitForLines(_ output: OutputCollector, _ prefix: String, count: Int, timeout: Double = 20) -> [String] {
        var lines: [String] = []
        _ = output.wait(timeout: timeout) { bytes in
            lines = String(decoding: bytes, as: UTF8.self).split(separator: "\n").map(String.init).filter { $0.hasPrefix(prefix) }
            return lines.count >= count
        }
        return lines
    }

    func testFiftyConnectionsThroughWspipeEchoWithABearerEachGetTheirBytesBack() throws {
        let environment = ["WSPIPE_BEARER": "s3cret"]
        let (server, serverPort) = try startListening(["--echo", "--require-bearer"], environment: environment)
        let (forwarder, port) = try startForwarding("ws://127.0.0.1:\(serverPort)/", environment: environment)
        let lines = try echoThrough(port, count: 50, bytes: 200_000)
        XCTAssertEqual(lines.last, "DONE ok=50", "\(lines.filter { !$0.hasPrefix("OK") })\n\(forwarder.stderr.text)")
        forwarder.signal(SIGTERM)
        assertDiedOf(finish(forwarder), SIGTERM)
        server.signal(SIGTERM)
        _ = finish(server)
    }

    func testFiftyConnectionsThroughWspipesOwnGatewayToATCPEchoWithHalfCloses() throws {
        let echo = try startPeer(executable: Locations.python, arguments: ["\(Locations.peers)/tcp_clients.py", "--port", "0", "serve-echo"])
        let (gateway, gatewayPort) = try startListening(["--forward", "tcp:127.0.0.1:\(echo.port)"])
        let (forwarder, port) = try startForwarding("ws://127.0.0.1:\(gatewayPort)/", ["--no-deflate"])
        // The half-close crosses both: local EOF -> Close 1000 -> the gateway's FIN to the echo,
        // whose last bytes and EOF come back before the Close's answer.
        let child = try tcpClients(["--port", "\(port)", "echo", "--count", "50", "--bytes", "100000", "--half-close"])
        let result = finish(child, timeout: 45)
        XCTAssertEqual(result.stdoutText.split(separator: "\n").last, "DONE ok=50", "\(result)\n\(forwarder.stderr.text)")
        forwarder.signal(SIGTERM)
        assertDiedOf(finish(forwarder), SIGTERM)
        gateway.signal(SIGTERM)
        _ = finish(gateway)
    }

    func testWssWithTheClientsCAAndAnUnverifiedServerIsRefused() throws {
        let tls = try TLSMaterial.shared()
        let (server, serverPort) = try startListening(["--cert", tls.serverCert, "--key", tls.serverKey, "--echo"], scheme: "wss")
        let (forwarder, port) = try startForwarding("wss://localhost:\(serverPort)/", ["--cacert", tls.caCert])
        XCTAssertEqual(try echoThrough(port, count: 20, bytes: 50_000).last, "DONE ok=20", forwarder.stderr.text)
        forwarder.signal(SIGTERM)
        assertDiedOf(finish(forwarder), SIGTERM)
        // Without the CA the certificate is not trusted: each connection is reset, -v says why.
        let (untrusting, untrustingPort) = try startForwarding("wss://localhost:\(serverPort)/", ["-v"])
        XCTAssertEqual(try echoThrough(untrustingPort, count: 1, bytes: 1000), ["RESET 0", "DONE ok=0"])
        untrusting.signal(SIGTERM)
        let result = finish(untrusting)
        assertDiedOf(result, SIGTERM)
        assertStderr(result, contains: "[1] WebSocket not opened, connection from 127.0.0.1:")
        assertStderr(result, contains: "certificate")
        server.signal(SIGTERM)
        _ = finish(server)
    }

    func testFiftyConnectionsThroughPythonWebsocketsEachEndWithClose1000() throws {
        let peer = try startPython("fwd_echo.py", [])
        let (forwarder, port) = try startForwarding(url(peer), ["--no-deflate"])
        let lines = try echoThrough(port, count: 50, bytes: 100_000)
        XCTAssertEqual(lines.last, "DONE ok=50", "\(lines.filter { !$0.hasPrefix("OK") })\n\(forwarder.stderr.text)")
        // Each local end of stream became Close 1000 after its bytes.
        let closes = waitForLines(peer.process.stdout, "CLOSED", count: 50)
        XCTAssertEqual(closes.count, 50)
        XCTAssertEqual(Set(closes), ["CLOSED 1000 100000"])
        forwarder.signal(SIGTERM)
        assertDiedOf(finish(forwarder), SIGTERM)
    }

    func testALocalHalfCloseIsClose1000AfterEveryByte() throws {
        let peer = try startPython("fwd_echo.py", [])
        let (forwarder, port) = try startForwarding(url(peer), ["--no-deflate"])
        let child = try tcpClients(["--port", "\(port)", "echo", "--count", "20", "--bytes", "300000", "--half-close"])
        _ = finish(child, timeout: 45)
        let closes = waitForLines(peer.process.stdout, "CLOSED", count: 20)
        XCTAssertEqual(closes, Array(repeating: "CLOSED 1000 300000", count: 20), forwarder.stderr.text)
        forwarder.signal(SIGTERM)
        assertDiedOf(finish(forwarder), SIGTERM)
    }

    func testChunkSizeIsTheLargestMessageOneReadMakes() throws {
        let peer = try startPython("fwd_echo.py", ["--largest"])
        let (forwarder, port) = try startForwarding(url(peer), ["--chunk-size", "1000"])
        XCTAssertEqual(try echoThrough(port, count: 1, bytes: 100_000).last, "DONE ok=1")
        XCTAssertEqual(waitForLines(peer.process.stdout, "LARGEST", count: 1), ["LARGEST 1000"])
        forwarder.signal(SIGTERM)
        assertDiedOf(finish(forwarder), SIGTERM)
    }

    func testARefusedHandshakeResetsThatConnectionAndSaysWhyOthersPass() throws {
        let peer = try startPython("fwd_echo.py", ["--refuse-first"])
        let (forwarder, port) = try startForwarding(url(peer), ["-v"])
        XCTAssertEqual(try echoThrough(port, count: 1, bytes: 1000), ["RESET 0", "DONE ok=0"])
        XCTAssertEqual(try echoThrough(port, count: 10, bytes: 1000).last, "DONE ok=10")
        XCTAssertNotNil(forwarder.stderr.waitForLine(startingWith: "wspipe: * [1] WebSocket not opened, connection from 127.0.0.1:", timeout: 5))
        XCTAssertTrue(forwarder.stderr.text.contains("reset: the server answered 401 Unauthorized instead of 101 Switching Protocols"),
                      forwarder.stderr.text)
        forwarder.signal(SIGTERM)
        assertDiedOf(finish(forwarder), SIGTERM)
    }

    func testASlowServerHoldsUpNoOtherConnection() throws {
        // The first handshake waits 60 s for its 101; the others must not wait behind it.
        let peer = try startPython("fwd_echo.py", ["--stall-first", "60"])
        let (forwarder, port) = try startForwarding(url(peer), ["-v", "--connect-timeout", "120"])
        let holder = try tcpClients(["--port", "\(port)", "hold", "--count", "1"], stdin: .pipe)
        XCTAssertNotNil(holder.stdout.waitForLine(startingWith: "HELD 1", timeout: 15))
        XCTAssertNotNil(forwarder.stderr.waitForLine(startingWith: "wspipe: > [1] GET / HTTP/1.1", timeout: 15), forwarder.stderr.text)
        let started = monotonicSeconds()
        XCTAssertEqual(try echoThrough(port, count: 10, bytes: 10_000, timeout: 20).last, "DONE ok=10", forwarder.stderr.text)
        XCTAssertLessThan(monotonicSeconds() - started, 30)
        XCTAssertFalse(forwarder.stderr.text.contains("wspipe: * [1] connected: "), "the stalled one opened: \(forwarder.stderr.text)")
        // A signal ends the stalled opening too.
        forwarder.signal(SIGTERM)
        let result = finish(forwarder, timeout: 15)
        assertDiedOf(result, SIGTERM)
        assertStderr(result, contains: "[1] WebSocket not opened")
    }

    func testSIGTERMClosesEachWebSocketWith1001() throws {
        let peer = try startPython("fwd_echo.py", [])
        let (forwarder, port) = try startForwarding(url(peer), ["-v"])
        let holder = try tcpClients(["--port", "\(port)", "hold", "--count", "5"], stdin: .pipe)
        XCTAssertNotNil(holder.stdout.waitForLine(startingWith: "HELD 5", timeout: 15))
        // Open on our side too (a signal while the 101 is on its way ends that opening instead).
        let opened = forwarder.stderr.wait(timeout: 15) { String(decoding: $0, as: UTF8.self).components(separatedBy: "] connected: ").count == 6 }
        XCTAssertTrue(opened, forwarder.stderr.text)
        forwarder.signal(SIGTERM)
        let result = finish(forwarder, timeout: 15)
        assertDiedOf(result, SIGTERM)
        XCTAssertEqual(waitForLines(peer.process.stdout, "CLOSED", count: 5), Array(repeating: "CLOSED 1001 0", count: 5))
    }

    func testANonLoopbackAddressWarns() throws {
        let peer = try startPython("fwd_echo.py", [])
        let child = try spawnWspipe(["--forward-listen", "0.0.0.0:0", url(peer)], stdin: .null)
        XCTAssertNotNil(child.stderr.waitForLine(startingWith: "wspipe: listening on tcp://0.0.0.0:", timeout: 15), child.stderr.text)
        child.signal(SIGTERM)
        let result = finish(child)
        assertDiedOf(result, SIGTERM)
        assertStderr(result, contains: "wspipe: warning: --forward-listen on 0.0.0.0:0, which is not a loopback address: "
                     + "whoever reaches it gets a WebSocket to \(url(peer)) with this command's credentials")
    }

    func testNoSecretOfTheURLReachesTheLog() throws {
        let (server, serverPort) = try startListening(["--echo"])
        let (forwarder, port) = try startForwarding("ws://someone:pw-Xq81z@127.0.0.1:\(serverPort)/?access_token=tok-Zr55w", ["-v"],
                                                    address: "0.0.0.0:0")
        XCTAssertEqual(try echoThrough(port, count: 1, bytes: 1000).last, "DONE ok=1")
        forwarder.signal(SIGTERM)
        let result = finish(forwarder)
        assertDiedOf(result, SIGTERM)
        assertStderr(result, contains: "] connected: ")
        XCTAssertFalse(result.stderr.contains("pw-Xq81z"), result.stderr)
        XCTAssertFalse(result.stderr.contains("tok-Zr55w"), result.stderr)
        server.signal(SIGTERM)
        _ = finish(server)
    }

    func testAnAddressInUseFailsAtOnceWithStatus3() throws {
        let taken = try LoopbackSocket(listening: true)
        let result = try runWspipe(["--forward-listen", "\(taken.port)", "ws://127.0.0.1:9/"])
        assertExit(result, 3)
        XCTAssertFalse(result.stderr.contains("listening on"), result.stderr)
    }

    func testReconnectIsRefused() throws {
        let result = try runWspipe(["--forward-listen", "0", "--reconnect", "ws://127.0.0.1:9/"])
        assertExit(result, 2)
        assertStderr(result, contains: "wspipe: --reconnect does not apply to --forward-listen: each TCP connection opens its "
                     + "WebSocket once, and one that fails or ends closes that connection")
    }

    /// ssh -o ProxyCommand='wspipe -b ws://gw/ssh': wspipe -b as the stdio pipe of a TCP
    /// stream to a TCP echo, through the gateway (--forward) and through a program per
    /// connection (socat).
    func testBinaryStdioPipeCarriesATCPStreamExactly() throws {
        let echo = try startPeer(executable: Locations.python, arguments: ["\(Locations.peers)/tcp_clients.py", "--port", "0", "serve-echo"])
        for server in [["--forward", "tcp:127.0.0.1:\(echo.port)"], ["-b", "--exec", "/usr/bin/socat", "-", "TCP:127.0.0.1:\(echo.port)"]] {
            let (gateway, serverPort) = try startListening(server)
            let bytes = randomBytes(300_000)
            let result = try runWspipe(["-b", "ws://127.0.0.1:\(serverPort)/"], stdin: .bytes(bytes), timeout: 30)
            assertExit(result, 0)
            XCTAssertEqual(result.stdout.count, bytes.count, "\(server)")
            XCTAssertTrue(result.stdout == bytes, "the stream came back changed through \(server)")
            gateway.signal(SIGTERM)
            _ = finish(gateway)
        }
    }
}
