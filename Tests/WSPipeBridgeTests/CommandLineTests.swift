// The option syntax the parser accepts, and which of its errors point at --help.
import WebSocketCore
import XCTest
@testable import WSPipeBridge
@testable import WSPipeCLI

final class CommandLineTests: XCTestCase {
    private func config(_ arguments: [String]) throws -> BridgeConfiguration {
        guard case .run(let config) = try CommandLineParser.parse(arguments) else { throw UsageError("not a run") }
        return config
    }

    private func message(_ arguments: [String]) -> String? {
        do {
            _ = try CommandLineParser.parse(arguments)
            return nil
        } catch {
            return report(.usage(error.message, pointsAtHelp: error.pointsAtHelp)).message
        }
    }

    func testValueSyntaxes() throws {
        XCTAssertEqual(try config(["--close-code=4000", "ws://h/"]).stdio.closeCode, CloseCode(4000))
        XCTAssertEqual(try config(["--close-code", "4000", "ws://h/"]).stdio.closeCode, CloseCode(4000))
        XCTAssertEqual(try config(["-HX-A: 1", "ws://h/"]).client.headers.map(\.name), ["X-A"])
        XCTAssertEqual(try config(["-H", "X-A: 1", "ws://h/"]).client.headers.map(\.name), ["X-A"])
        let combined = try config(["-vb", "ws://h/"])
        XCTAssertEqual(combined.verbosity, 1)
        XCTAssertEqual(combined.stdio.mode, .binary)
        XCTAssertEqual(try config(["-kn", "3", "ws://h/"]).stdio.maxMessages, 3)
        XCTAssertEqual(try config(["--", "ws://h/-x"]).client.url.requestTarget, "/-x")
        XCTAssertEqual(try config(["ws://h/", "--ping-timeout", "2"]).pingTimeout, 2)
        XCTAssertEqual(try config(["-1", "ws://h/"]).stdio.maxMessages, 1)
        XCTAssertNil(try config(["--user-agent=", "ws://h/"]).client.userAgent)
        XCTAssertEqual(try config(["--protocol", "a", "-H", "Sec-WebSocket-Protocol: a, b", "ws://h/"]).subprotocols, ["a", "b"])
    }

    func testHelpAndVersionEndParsing() throws {
        guard case .help = try CommandLineParser.parse(["--help", "--bogus"]) else { return XCTFail("not help") }
        guard case .version = try CommandLineParser.parse(["-V"]) else { return XCTFail("not version") }
        // A bad value before --help is still reported.
        XCTAssertEqual(message(["--close-code", "x", "--help"]), "--close-code 'x' is not a number (see wspipe --help)")
    }

    func testSyntaxErrorsPointAtHelpOnce() {
        for arguments in [[], ["-v"], ["--bogus", "ws://h/"], ["--close-code", "x", "ws://h/"], ["ws://a/", "ws://b/"],
                          ["--text=1", "ws://h/"], ["--timeout"], ["--close-code", "1005", "ws://h/"], ["--tls-min", "9", "ws://h/"],
                          ["--chunk-size", "x", "ws://h/"]] {
            let text = message(arguments) ?? ""
            XCTAssertTrue(text.hasSuffix("see wspipe --help)"), "\(arguments): \(text)")
            XCTAssertFalse(text.contains(") ("), "two parentheticals in a row: \(text)")
            XCTAssertEqual(text.components(separatedBy: "(").count, 2, "one parenthetical only: \(text)")
        }
        XCTAssertEqual(message([]), "no URL given; usage: wspipe [options] ws://host[:port]/path (see wspipe --help)")
        XCTAssertEqual(message(["--tls-min", "9", "ws://h/"]),
                       "--tls-min '9' is not a TLS version (1.2 or 1.3; see wspipe --help)")
    }

    func testFileAndEnvironmentProblemsDoNotPointAtHelp() {
        for arguments in [["--cacert", "/nonexistent/ca.pem", "ws://h/"], ["--cert", "/nonexistent/c.pem", "ws://h/"],
                          ["--bearer-file", "/nonexistent/token", "ws://h/"]] {
            let text = message(arguments) ?? ""
            XCTAssertTrue(text.hasPrefix("cannot read"), text)
            XCTAssertFalse(text.contains("--help"), text)
        }
        XCTAssertEqual(report(.usage("x", pointsAtHelp: false)).status, .usage)
    }

    func testTableHasUniqueNames() {
        let long = Option.allCases.map(\.longName)
        XCTAssertEqual(Set(long).count, long.count)
        let short = Option.allCases.compactMap(\.shortName)
        XCTAssertEqual(Set(short).count, short.count)
        XCTAssertTrue(Option.allCases.allSatisfy { !$0.help.isEmpty && $0.longName.hasPrefix("--") })
        // The parser's look-ups find every option by each of its names, and nothing else.
        for option in Option.allCases {
            XCTAssertEqual(Option.named(option.longName)?.longName, option.longName)
            if let letter = option.shortName { XCTAssertEqual(Option.named(short: letter)?.longName, option.longName) }
        }
        XCTAssertNil(Option.named("--no-such-option"))
        XCTAssertNil(Option.named(short: "Z"))
    }
}
