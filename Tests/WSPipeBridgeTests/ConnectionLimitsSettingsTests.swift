// The CLI's --send, -n, --timeout and --idle-timeout as one ConnectionLimits value: the same
// value for every mode, with the span and idle clock each mode documents.
import WebSocketCore
import WebSocketEngine
import XCTest
@testable import WSPipeBridge
@testable import WSPipeCLI

final class ConnectionLimitsSettingsTests: XCTestCase {
    private func config(_ arguments: [String]) throws -> BridgeConfiguration {
        let command = try CommandLineParser.parse(arguments, environment: { _ in nil }, readFile: { _ in nil })
        guard case .run(let config) = command else { throw UsageError("not a run") }
        return config
    }

    private let limitFlags = ["--send", "hé", "--send", "two", "-n", "3", "--timeout", "7", "--idle-timeout", "2.5"]

    func testTheStdioSettingsBecomeOneValue() throws {
        let limits = try config(["ws://127.0.0.1:1/"] + limitFlags).stdio.limits(span: .run, idleClock: .bothWaysReported)
        XCTAssertEqual(limits.greeting, [Array("hé".utf8), Array("two".utf8)])
        XCTAssertEqual(limits.maximumMessages, 3)
        XCTAssertEqual(limits.timeLimit, 7)
        XCTAssertEqual(limits.idleTimeout, 2.5)
        XCTAssertEqual(limits.span, .run)
        XCTAssertEqual(limits.idleClock, .bothWaysReported)
    }

    func testEveryServerModeGetsThemPerClientWithTheServersIdleClock() throws {
        // --exec refuses -n (its child decides the end): the other three still apply.
        let exec = ["--send", "hé", "--send", "two", "--timeout", "7", "--idle-timeout", "2.5"]
        for (flags, mode) in [(limitFlags, ["--echo"]), (limitFlags, ["--broadcast"]), (exec, ["--exec", "/bin/cat"])] {
            let c = try config(["-l", "127.0.0.1:0"] + flags + mode)  // --exec takes the rest as its command
            let perClient = try XCTUnwrap(c.serve).server.perClient
            XCTAssertEqual(perClient, c.stdio.limits(span: .connection, idleClock: .receivedAndSentCount), "\(mode)")
            XCTAssertEqual(perClient.greeting.count, 2, "\(mode)")
            XCTAssertEqual(perClient.timeLimit, 7, "\(mode)")
            XCTAssertEqual(perClient.idleTimeout, 2.5, "\(mode)")
            XCTAssertEqual(perClient.maximumMessages, mode == ["--exec", "/bin/cat"] ? nil : 3, "\(mode)")
        }
    }

    func testTheStdioServerLeavesThemToItsSession() throws {
        let c = try config(["-l", "127.0.0.1:0"] + limitFlags)
        XCTAssertEqual(try XCTUnwrap(c.serve).server.perClient, ConnectionLimits(), "the session applies them, not the engine")
    }
}
