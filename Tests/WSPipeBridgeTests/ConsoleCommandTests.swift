import XCTest
import WebSocketCore
@testable import WSPipeBridge

/// The console's lines: a message, or a slash command (issue 36).
final class ConsoleCommandTests: XCTestCase {
    private func parse(_ line: String) -> ConsoleCommand? { try? ConsoleCommand.parse(line) }

    private func error(_ line: String) -> String? {
        do throws(ConsoleCommandError) {
            _ = try ConsoleCommand.parse(line)
            return nil
        } catch {
            return error.message
        }
    }

    func testLinesAndCommands() {
        XCTAssertEqual(parse("hello /ping"), .text("hello /ping"))
        XCTAssertEqual(parse("//ping"), .text("/ping"))
        XCTAssertEqual(parse(""), .text(""))
        XCTAssertEqual(parse("/ping"), .ping(""))
        XCTAssertEqual(parse("/ping  a b"), .ping("a b"))
        XCTAssertEqual(parse("/close"), .close(ClosePayload(code: .normalClosure, reason: [])))
        XCTAssertEqual(parse("/close 4000 bye now"), .close(ClosePayload(code: CloseCode(4000), reason: Array("bye now".utf8))))
        XCTAssertEqual(parse("/binary 01ff 02"), .binaryHex([0x01, 0xFF, 0x02]))
        XCTAssertEqual(parse("/binary @a.bin"), .binaryFile("a.bin"))
        XCTAssertEqual(parse("/send @note.txt"), .sendFile("note.txt"))
        XCTAssertEqual(parse("/json on"), .json(true))
        XCTAssertEqual(parse("/json off"), .json(false))
        XCTAssertEqual(parse("/quiet"), .quiet)
        XCTAssertEqual(parse("/help"), .help)
        XCTAssertEqual(parse("/quit"), .quit)
    }

    func testCommandsThatCannotWorkSayWhy() {
        XCTAssertEqual(error("/close 1005"), "/close: '1005' is not a code that may be sent (1000-1003, 1007-1014, 3000-4999)")
        XCTAssertEqual(error("/close x"), "/close: 'x' is not a code that may be sent (1000-1003, 1007-1014, 3000-4999)")
        XCTAssertEqual(error("/binary 0"), "/binary: an odd number of hex digits")
        XCTAssertEqual(error("/binary zz"), "/binary: 'z' is not a hex digit")
        XCTAssertEqual(error("/binary"), "/binary takes hex digits (/binary 01ff) or @FILE")
        XCTAssertEqual(error("/send x"), "/send takes @FILE (the file is sent as one text message)")
        XCTAssertEqual(error("/json maybe"), "/json takes on or off")
        XCTAssertEqual(error("/ping " + String(repeating: "x", count: 126)), "/ping: at most 125 bytes of text")
        XCTAssertEqual(error("/bogus"), "unknown command /bogus (/help lists them; type // to send a line starting with /)")
    }

    func testBinaryAndJSONRendering() {
        XCTAssertEqual(ConsoleRendering.message([1, 0xAB], kind: .binary, prettyJSON: false), ["< binary 2 bytes: 01 ab"])
        XCTAssertEqual(ConsoleRendering.message(Array(0..<40), kind: .binary, prettyJSON: false).first?.hasSuffix("1f ..."), true)
        XCTAssertEqual(ConsoleRendering.message(Array(#"{"a":[1,2.5],"b":"\u001b"}"#.utf8), kind: .text, prettyJSON: true),
                       ["< {", #"    "a": ["#, "      1,", "      2.5", "    ],", #"    "b": "\u001b""#, "  }"])
        XCTAssertEqual(ConsoleRendering.message(Array("not json\u{1B}[2J".utf8), kind: .text, prettyJSON: true), ["< not json\\x1B[2J"])
    }
}
