// websocat and wscat habits (issue 19, item 6): the real binary says what wspipe calls them,
// and takes wscat's HOST:PORT as ws:// unless credentials would go with it in clear.
import TestSupport
import XCTest

final class HabitsTests: IntegrationTestCase {
    /// Each case: exit 2, one line holding each of its messages, no password printed; and
    /// nothing connected to the listener whose port the cases name.
    private func assertUsageErrors(_ cases: [([String], [String], [String: String])], listener: LoopbackSocket,
                                   file: StaticString = #filePath, line: UInt = #line) throws {
        for (arguments, messages, environment) in cases {
            let result = try runWspipe(arguments, environment: environment)
            assertExit(result, 2, file: file, line: line)
            XCTAssertEqual(result.stderr.split(separator: "\n").count, 1, "\(arguments): one line: \(result.stderr)",
                           file: file, line: line)
            for message in messages {
                XCTAssertTrue(result.stderr.contains(message), "\(arguments): stderr lacks '\(message)': \(result.stderr)",
                              file: file, line: line)
            }
            XCTAssertFalse(result.stderr.contains("secret"), "\(arguments): the password was printed: \(result.stderr)",
                           file: file, line: line)
        }
        XCTAssertFalse(listener.hasPendingConnection, "a usage error connected", file: file, line: line)
    }

    /// Each mistake: exit 2, one line naming wspipe's equivalent, nothing connected.
    func testForeignFlagsAndMisspellingsNameWhatToWrite() throws {
        let listener = try LoopbackSocket(listening: true)
        let target = "ws://127.0.0.1:\(listener.port)/"
        let hostPort = "127.0.0.1:\(listener.port)"
        try assertUsageErrors([
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
        ], listener: listener)
    }

    /// A scheme-less URL's password is redacted in every message that shows the URL, as
    /// ws://'s is (it was printed in full by "more than one URL" and by -l's refusal).
    func testSchemelessPasswordIsRedactedInEveryMessage() throws {
        let listener = try LoopbackSocket(listening: true)
        let hostPort = "127.0.0.1:\(listener.port)"
        try assertUsageErrors([
            (["u:secret@\(hostPort)", "v:secret@\(hostPort)/x"],
             ["more than one URL given: '[redacted]@\(hostPort)' and '[redacted]@\(hostPort)/x'"], [:]),
            (["ws://\(hostPort)/", "u:secret@\(hostPort)"],
             ["more than one URL given: 'ws://\(hostPort)/' and '[redacted]@\(hostPort)'"], [:]),
            (["-l", "0", "u:secret@\(hostPort)"], ["a URL ('[redacted]@\(hostPort)') cannot be combined with -l/--listen"], [:]),
            (["user@\(hostPort)"], ["'[redacted]@\(hostPort)' has no scheme, and user@ (Basic authentication) would go"], [:]),
        ], listener: listener)
    }

    /// wscat's `localhost:8080?room=1` (a query and no path) is ws://, as ws://localhost:8080?room=1
    /// is; a "://" in the query is not a scheme.
    func testHostAndPortWithAQueryAndNoPathAreWS() throws {
        let echo = try startEcho()
        for target in ["/?room=1", "/r?next=ws://h/"] {
            let address = "127.0.0.1:\(echo.port)" + (target.hasPrefix("/?") ? target.dropFirst() : target[...])
            let result = try runWspipe(["-v", address], stdin: .bytes(Array("hi\n".utf8)))
            assertExit(result, 0)
            assertStdout(result, "hi\n")
            for said in ["taken as ws://127.0.0.1:\(echo.port)\(target) (no TLS)", "> GET \(target) HTTP/1.1"] {
                assertStderr(result, contains: said)
            }
        }
    }

    /// wscat's flags (-c URL, -s NAME, --auth, --connect) and long options written with one
    /// dash get what to write, not a misleading neighbour (--connect was "did you mean
    /// --reconnect?", --auth "--path?", --ca "--sh?", -timeout "unknown option '-i'").
    func testWscatFlagsAndSingleDashOptionsNameWhatToWrite() throws {
        let listener = try LoopbackSocket(listening: true)
        let hostPort = "127.0.0.1:\(listener.port)"
        try assertUsageErrors([
            (["-c", hostPort], ["unknown option '-c'; wscat's -c URL is wspipe URL: the URL needs no option"], [:]),
            (["--connect", hostPort], ["unknown option '--connect'; wscat's --connect URL is wspipe URL"], [:]),
            (["-s", "chat", hostPort], ["wscat's -s NAME is --protocol NAME"], [:]),
            (["--auth", "u:secret", hostPort], ["wscat's --auth USER:PASSWORD is the URL's user information"], [:]),
            (["--no-check", hostPort], ["wscat's --no-check is -k/--insecure"], [:]),
            (["--ca", "ca.pem", hostPort], ["unknown option '--ca'; wscat's --ca FILE is --cacert FILE"], [:]),
            (["-timeout", "3", hostPort], ["unknown option '-i'; did you mean --timeout?"], [:]),
            (["-verbose", hostPort], ["unknown option '-e'; did you mean --verbose?"], [:]),
            (["-n", "ws://\(hostPort)/"], ["(websocat's -n is wspipe's --no-close, wscat's -n is -k"], [:]),
        ], listener: listener)
        for name in ["--e", "--x"] {
            let result = try runWspipe([name, hostPort])
            assertExit(result, 2)
            XCTAssertFalse(result.stderr.contains("did you mean"), "\(name): no option is near one letter: \(result.stderr)")
        }
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
