import Foundation
import XCTest
import TestSupport

/// Runs examples/swift's programs (built with the package: .build/<config>/echo-chat and
/// ticker, next to wspipe) against the examples' Python servers.
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
}
