import XCTest
@testable import WSPipeBridge
@testable import WSPipeCLI

/// One rule for a bearer token wherever it comes from (the option, the variable, the
/// file at the start and again before each reconnection attempt, --require-bearer's).
final class BearerTokenTests: XCTestCase {
    func testAGivenTokenIsVisibleASCII() throws {
        XCTAssertEqual(try BearerToken("abc.DEF-123_~+/=").value, "abc.DEF-123_~+/=")
        XCTAssertThrowsError(try BearerToken("")) { XCTAssertEqual($0 as? BearerToken.Problem, .empty) }
        for bad in ["a b", "a\tb", "a\u{7F}", "t\u{e9}", "a\r\nX-Evil: 1"] {
            XCTAssertThrowsError(try BearerToken(bad), bad) { XCTAssertEqual($0 as? BearerToken.Problem, .invalidCharacters) }
        }
    }

    func testAFileIsTrimmedThenChecked() throws {
        XCTAssertEqual(try BearerToken(fileContents: Array(" tok3n\r\n\n".utf8)).value, "tok3n")
        XCTAssertThrowsError(try BearerToken(fileContents: Array("\n \t\n".utf8))) { XCTAssertEqual($0 as? BearerToken.Problem, .empty) }
        XCTAssertThrowsError(try BearerToken(fileContents: [0x74, 0xFF])) { XCTAssertEqual($0 as? BearerToken.Problem, .notUTF8) }
        XCTAssertThrowsError(try BearerToken(fileContents: Array("two words\n".utf8))) {
            XCTAssertEqual($0 as? BearerToken.Problem, .invalidCharacters)
        }
    }

    /// --require-bearer's expected token follows the same rule as the client's.
    func testTheServersExpectedTokenIsCheckedAsTheClientsIs() {
        let files = ["/t/empty": Array("\n".utf8), "/t/spaced": Array("two words\n".utf8), "/t/good": Array("s3cret\n".utf8),
                     "/t/binary": [0x73, 0xFF, 0x0A]]
        func parse(_ args: [String], env: [String: String] = [:]) throws -> Command {
            try CommandLineParser.parse(args, environment: { env[$0] }, readFile: { files[$0] })
        }
        XCTAssertThrowsError(try parse(["-l", "8080", "--echo", "--require-bearer", "--bearer-file", "/t/empty"])) {
            XCTAssertEqual(($0 as? UsageError)?.message, "--bearer-file '/t/empty': the bearer token is empty")
        }
        XCTAssertThrowsError(try parse(["-l", "8080", "--echo", "--require-bearer", "--bearer-file", "/t/spaced"])) {
            XCTAssertEqual(($0 as? UsageError)?.message,
                           "--bearer-file '/t/spaced': the bearer token contains spaces, control or non-ASCII characters")
        }
        XCTAssertThrowsError(try parse(["-l", "8080", "--echo", "--require-bearer"], env: ["WSPIPE_BEARER": "a b"])) {
            XCTAssertEqual(($0 as? UsageError)?.message,
                           "WSPIPE_BEARER: the bearer token contains spaces, control or non-ASCII characters")
        }
        XCTAssertThrowsError(try parse(["-l", "8080", "--echo", "--require-bearer", "--bearer-file", "/t/binary"])) {
            XCTAssertEqual(($0 as? UsageError)?.message, "--bearer-file '/t/binary': it is not UTF-8 text")
            XCTAssertEqual(($0 as? UsageError)?.pointsAtHelp, false)
        }
        XCTAssertNoThrow(try parse(["-l", "8080", "--echo", "--require-bearer", "--bearer-file", "/t/good"]))
    }
}
