// websocat and wscat habits (issue 19, item 6): the real binary says what wspipe calls them,
// and takes wscat's HOST:PORT as ws:// unless credentials would go with it in clear.
import TestSupport
import XCTest

final class HabitsTests: IntegrationTestCase {
    /// Each mistake: exit 2, one line naming wspipe's equivalent, nothing connected.
    func testForeignFlagsAndMisspellingsNameWhatToWrite() throws {
        let listener = try LoopbackSocket(listening: true)
        let target = "ws://127.0.0.1:\(listener.port)/"
        let hostPort = "127.0.0.1:\(listener.port)"
        let cases: [([String], [String], [String: String])] = [
            (["--tiemout", "3", target], ["unknown option '--tiemout'; did you mean --timeout?"], [:]),
            (["--no-clsoe", target], ["did you mean --no-close?"], [:]),
            (["-s", "8080"], ["unknown option '-s'", "websocat's -s PORT is wspipe -l PORT"], [:]),
            (["-E", target], ["unknown option '-E'", "what wspipe does by default"], [:]),
            (["-n", target], ["takes a number of messages, not the URL", "websocat's -n is wspipe's --no-close"], [:]),
            (["-n", hostPort], ["not the URL '\(hostPort)'"], [:]),
            (["u:secret@\(hostPort)"], ["'[redacted]@\(hostPort)' has no scheme", "user:password@"], [:]),
            (["--bearer", "tok", hostPort], ["has no scheme, and a bearer token would go with it in clear"], [:]),
            ([hostPort], ["a bearer token would go with it"], ["WSPIPE_BEARER": "tok"]),
            (["-H", "Authorization: Basic eDp5", hostPort], ["-H Authorization would go with it"], [:]),
        ]
        for (arguments, messages, environment) in cases {
            let result = try runWspipe(arguments, environment: environment)
            assertExit(result, 2)
            XCTAssertEqual(result.stderr.split(separator: "\n").count, 1, "\(arguments): one line: \(result.stderr)")
            for message in messages {
                XCTAssertTrue(result.stderr.contains(message), "\(arguments): stderr lacks '\(message)': \(result.stderr)")
            }
            XCTAssertFalse(result.stderr.contains("secret"), "\(arguments): the password was printed")
        }
        XCTAssertFalse(listener.hasPendingConnection, "a usage error connected")
    }

    /// wscat's `localhost:8080` is ws://, with a path too; -v says so.
    func testHostAndPortWithoutASchemeAreWS() throws {
        let echo = try startEcho()
        let result = try runWspipe(["-v", "127.0.0.1:\(echo.port)/room"], stdin: .bytes(Array("hi\n".utf8)))
        assertExit(result, 0)
        assertStdout(result, "hi\n")
        assertStderr(result, contains: "wspipe: * '127.0.0.1:\(echo.port)/room' has no scheme: taken as ws://127.0.0.1:\(echo.port)/room (no TLS)")
        assertStderr(result, contains: "> GET /room HTTP/1.1")
        let quiet = try runWspipe(["localhost:\(echo.port)"], stdin: .bytes(Array("a\n".utf8)))
        assertExit(quiet, 0)
        assertStdout(quiet, "a\n")
        XCTAssertEqual(quiet.stderr, "", "said only with -v")
    }
}
