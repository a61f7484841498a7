import Foundation
import XCTest
import TestSupport
import WSKit

/// Runs examples/swift's programs (built with the package: .build/<config>/echo-chat,
/// ticker, chat-manager, next to wspipe) against the examples' Python servers.
final class SwiftExamplesTests: XCTestCase {
    private func example(_ name: String) -> String {
        (Locations.wspipe as NSString).deletingLastPathComponent + "/" + name
    }

    private func server(_ script: String, _ arguments: [String] = []) throws -> Peer {
        try Peer.launch(executable: Locations.python,
                        arguments: [Locations.packageRoot + "/examples/servers/" + script, "--port", "0"] + arguments,
                        environment: Locations.baseEnvironment)
    }

    func testEchoChatSendsTerminalLinesAndPrintsReplies() throws {
        let peer = try server("echo_server.py")
        defer { peer.process.kill() }
        let chat = try ChildProcess(executable: example("echo-chat"), arguments: ["ws://127.0.0.1:\(peer.port)/"],
                                    environment: Locations.baseEnvironment, stdin: .bytes(Array("hello\nworld\n".utf8)))
        let result = chat.wait(timeout: 20)
        XCTAssertEqual(result.exitCode, 0, "\(result)")
        XCTAssertEqual(result.stdoutText, "< hello\n< world\nclosed: 1000 bye\n")
    }

    func testTickerPrintsTheFeedAndPingRoundTrips() throws {
        let peer = try server("feed_server.py", ["--count", "5", "--interval", "0.2"])
        defer { peer.process.kill() }
        let ticker = try ChildProcess(executable: example("ticker"), arguments: ["ws://127.0.0.1:\(peer.port)/", "0.3"],
                                      environment: Locations.baseEnvironment, stdin: .null)
        let result = ticker.wait(timeout: 20)
        XCTAssertEqual(result.exitCode, 0, "\(result)")
        let lines = result.stdoutText.split(separator: "\n")
        XCTAssertEqual(lines.filter { $0.hasPrefix("{") }.count, 5, result.stdoutText)
        XCTAssertTrue(lines.contains { $0.hasPrefix("ping: ") }, result.stdoutText)
        XCTAssertEqual(lines.last, "feed ended after 5 messages: 1000 end of feed")
    }

    func testTickerReconnectsAndResubscribesAfterAServerRestart() throws {
        var feed = try server("feed_server.py", ["--count", "1000", "--interval", "0.05"])
        let port = feed.port
        defer { feed.process.kill() }
        let ticker = try ChildProcess(executable: example("ticker"), arguments: ["ws://127.0.0.1:\(port)/", "5"],
                                      environment: Locations.baseEnvironment, stdin: .null)
        XCTAssertNotNil(ticker.stdout.waitForLine(startingWith: "{", timeout: 20))
        feed.process.kill()
        XCTAssertNotNil(ticker.stdout.waitForLine(startingWith: "disconnected: ", timeout: 20))
        feed = try server("feed_server.py", ["--port", "\(port)", "--count", "3", "--interval", "0.05"])
        let result = ticker.wait(timeout: 20)
        XCTAssertEqual(result.exitCode, 0, "\(result)")
        let lines = result.stdoutText.split(separator: "\n")
        XCTAssertEqual(lines.first, "connected (attempt 1)")
        XCTAssertTrue(lines.contains { $0.hasPrefix("connected (attempt ") && $0 != "connected (attempt 1)" }, result.stdoutText)
        XCTAssertTrue(lines.last?.hasPrefix("feed ended after ") == true, result.stdoutText)
        XCTAssertTrue(lines.last?.hasSuffix(" messages: 1000 end of feed") == true, result.stdoutText)
    }

    /// The URLSessionWebSocketTask-shaped manager (examples/swift/ChatManager): Bearer token
    /// and subprotocol from its URLRequest, echoes through the recursive receive handler (or
    /// the async loop), pongs from its ping timer, 1001 at the end of input.
    func testChatManagerWrittenForURLSessionWebSocketTaskRuns() throws {
        let peer = try server("echo_server.py", ["--token", "secret", "--subprotocols", "chat.v1"])
        defer { peer.process.kill() }
        for mode in [[], ["--async"]] {
            let manager = try ChildProcess(executable: example("chat-manager"),
                                           arguments: ["ws://127.0.0.1:\(peer.port)/", "secret", "--ping-interval", "0.1"] + mode,
                                           environment: Locations.baseEnvironment, stdin: .pipe)
            defer { manager.kill() }
            XCTAssertNotNil(manager.stdout.waitForLine(startingWith: "connected (chat.v1)", timeout: 10), manager.stdout.text)
            manager.writeStdin("hello\nworld\n")
            XCTAssertNotNil(manager.stdout.waitForLine(startingWith: "pong", timeout: 10), manager.stdout.text)
            manager.closeStdin()
            let result = manager.wait(timeout: 10)
            XCTAssertEqual(result.exitCode, 0, "\(mode) \(result)")
            let lines = result.stdoutText.split(separator: "\n").filter { $0 != "pong" }
            XCTAssertEqual(lines, ["connected (chat.v1)", "< hello", "< world", "closed: 1001 bye"], "\(mode)")
        }
    }

    /// A refused handshake: three retries with doubling delays, then it gives up with the
    /// error's localizedDescription (WSKit's sentence, not "The operation could not be completed").
    func testChatManagerBacksOffAndGivesUpWithTheReason() throws {
        let peer = try server("echo_server.py", ["--token", "secret"])
        defer { peer.process.kill() }
        let manager = try ChildProcess(executable: example("chat-manager"),
                                       arguments: ["ws://127.0.0.1:\(peer.port)/", "wrong", "--retry-base", "0.05"],
                                       environment: Locations.baseEnvironment, stdin: .pipe)
        defer { manager.kill() }
        let result = manager.wait(timeout: 20)
        XCTAssertEqual(result.exitCode, 1, "\(result)")
        let lines = result.stdoutText.split(separator: "\n")
        XCTAssertEqual(lines.filter { $0.hasPrefix("disconnected: ") }.map { String($0.suffix(from: $0.range(of: "; retry")!.lowerBound)) },
                       ["; retry 1 in 0.05 s", "; retry 2 in 0.1 s", "; retry 3 in 0.2 s"], result.stdoutText)
        XCTAssertEqual(lines.last, "giving up after 3 retries: the server answered 401 Unauthorized instead of 101 Switching Protocols; "
                       + "body: a valid bearer token is required", result.stdoutText)
    }

    func testBroadcastServerSendsOneClientsMessageToBoth() async throws {
        let server = try ChildProcess(executable: example("broadcast-server"), arguments: ["127.0.0.1:0", "/room"],
                                      environment: Locations.baseEnvironment, stdin: .pipe)
        defer { server.kill() }
        let line = try XCTUnwrap(server.stdout.waitForLine(startingWith: "listening on ", timeout: 20), "no listening line")
        let url = String(line.dropFirst("listening on ".count)) + "room"
        try await withTimeout(20) {
            let a = try await WebSocket.connect(to: url)
            let b = try await WebSocket.connect(to: url)
            var ai = a.messages.makeAsyncIterator()
            var bi = b.messages.makeAsyncIterator()
            // Each hears its own message once it has joined the hub.
            try await a.send(.text("a ready"))
            let aReady = try await ai.next()
            XCTAssertEqual(aReady, .text("a ready"))
            try await b.send(.text("b ready"))
            var bReady = try await bi.next()
            if bReady == .text("a ready") { bReady = try await bi.next() }  // b may have joined before a spoke
            XCTAssertEqual(bReady, .text("b ready"))
            try await a.send(.text("hello"))
            let seenByA = [try await ai.next(), try await ai.next()]
            let seenByB = try await bi.next()
            XCTAssertEqual(seenByA, [.text("b ready"), .text("hello")])
            XCTAssertEqual(seenByB, .text("hello"))
            // Standard input's end closes the server: both clients get 1001.
            server.closeStdin()
            while try await ai.next() != nil {}
            while try await bi.next() != nil {}
            XCTAssertEqual(a.closeCode, 1001)
            XCTAssertEqual(b.closeCode, 1001)
        }
        let result = await finished(server, timeout: 20)
        XCTAssertEqual(result.exitCode, 0, "\(result)")
        XCTAssertTrue(result.stdoutText.hasSuffix("closed\n"), result.stdoutText)
    }
}
