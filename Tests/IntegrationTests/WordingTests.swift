// What -v says at the ends of a session (issue 19, item 7): the compression summary counts
// every message and says how many were compressed; an offered subprotocol that the server
// did not choose is said.
import Foundation
import Glibc
import TestSupport
import XCTest

final class WordingTests: IntegrationTestCase {
    func testCompressionSummaryCountsEveryMessage() throws {
        let (server, port) = try startListening(["--echo"])
        defer { server.kill() }
        let url = "ws://127.0.0.1:\(port)/"
        let short = try runWspipe(["-v", url], stdin: .bytes(Array("a\nb\n".utf8)))
        assertExit(short, 0)
        assertStdout(short, "a\nb\n")
        assertStderr(short, contains: "wspipe: * permessage-deflate: received 2 messages (none compressed); "
                     + "sent 2 messages (none compressed)\n")

        let line = String(repeating: "x", count: 100)
        let long = try runWspipe(["-v", url], stdin: .bytes(Array("\(line)\n\(line)\n".utf8)))
        assertExit(long, 0)
        assertStderr(long, contains: "wspipe: * permessage-deflate: received 2 messages (2 compressed: ")
        assertStderr(long, contains: "; sent 2 messages (2 compressed: ")
        assertStderr(long, contains: "on the wire for 200 B, ")
    }

    func testSubprotocolNotChosenIsSaid() throws {
        let (server, port) = try startListening(["--echo", "--protocol", "json"])
        defer { server.kill() }
        let url = "ws://127.0.0.1:\(port)/"
        let none = try runWspipe(["-v", "--protocol", "chat", "-H", "Sec-WebSocket-Protocol: v2", url], stdin: .bytes([]))
        assertExit(none, 0)
        assertStderr(none, contains: "wspipe: * subprotocol: none chosen by the server (offered: chat, v2)\n")

        let chosen = try runWspipe(["-v", "--protocol", "chat", "--protocol", "json", url], stdin: .bytes([]))
        assertExit(chosen, 0)
        assertStderr(chosen, contains: "wspipe: * subprotocol: json\n")
        XCTAssertFalse(chosen.stderr.contains("none chosen"), chosen.stderr)

        let offeredNothing = try runWspipe(["-v", url], stdin: .bytes([]))
        XCTAssertFalse(offeredNothing.stderr.contains("subprotocol"), "nothing offered, nothing said: \(offeredNothing.stderr)")
    }

    /// Issue 35 item 8: -v words every ending in plain language; it printed Swift internals
    /// ("client 1 disconnected (lost: peerClosedTCP(afterOurClose: false))").
    func testVerboseEndingsAreWordedWithoutSwiftInternals() throws {
        let (server, port) = try startListening(["-v", "--echo", "--max-message-size", "10"])
        defer { server.kill() }
        let dropped = try stalledClient(port)  // upgrades, then closes TCP without a Close
        close(dropped)
        XCTAssertNotNil(server.stderr.waitForLine(startingWith: "wspipe: * client 1 disconnected", timeout: 10), server.stderr.text)
        let big = try runWspipe(["ws://127.0.0.1:\(port)/"], stdin: .bytes(Array("more than ten bytes\n".utf8)))
        assertExit(big, 8)
        XCTAssertNotNil(server.stderr.waitForLine(startingWith: "wspipe: * client 2 disconnected", timeout: 10), server.stderr.text)
        server.signal(SIGTERM)
        let result = finish(server)
        assertStderr(result, contains: "wspipe: * client 1 disconnected (lost): the client closed the TCP connection without a "
                     + "closing handshake\n")
        assertStderr(result, contains: "wspipe: * client 2 disconnected (failed) with 1009 (message too big): a message of ")
        assertNoSwiftInternals(result.stderr)
    }

    /// No "(" + lowerCamelCase + ":" (an enum case with a labelled value, as Swift prints it).
    func assertNoSwiftInternals(_ text: String, file: StaticString = #filePath, line: UInt = #line) {
        let dump = try! NSRegularExpression(pattern: "\\([a-z]+[A-Z][A-Za-z]*[:(]")
        for row in text.split(separator: "\n").map(String.init)
        where dump.firstMatch(in: row, range: NSRange(row.startIndex..., in: row)) != nil {
            XCTFail("a Swift value in a line: \(row)", file: file, line: line)
        }
    }
}
