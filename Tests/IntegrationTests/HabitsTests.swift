// websocat and wscat habits (issue 19, item 6): the real binary says what wspipe calls them,
// and takes wscat's HOST:PORT as ws:// unless credentials would go with it in clear.
import Foundation
import Glibc
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

    /// wscat's flags (-s NAME, --auth) and long options written with one dash get what to
    /// write, not a misleading neighbour (--auth was "did you mean --path?", --ca "--sh?",
    /// -timeout "unknown option '-i'; did you mean --timeout?").
    func testWscatFlagsAndSingleDashOptionsNameWhatToWrite() throws {
        let listener = try LoopbackSocket(listening: true)
        let hostPort = "127.0.0.1:\(listener.port)"
        try assertUsageErrors([
            (["-s", "chat", hostPort], ["wscat's -s NAME is --protocol NAME"], [:]),
            (["--auth", "u:secret", hostPort], ["wscat's --auth USER:PASSWORD is the URL's user information"], [:]),
            (["--no-check", hostPort], ["wscat's --no-check is -k/--insecure"], [:]),
            (["--ca", "ca.pem", hostPort], ["unknown option '--ca'; wscat's --ca FILE is --cacert FILE"], [:]),
            (["-timeout", "3", hostPort], ["unknown option '-timeout'; long options take two dashes: --timeout "
                                          + "(see wspipe --help limits)"], [:]),
            (["-verbose", hostPort], ["unknown option '-verbose'; long options take two dashes: --verbose"], [:]),
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

    // MARK: Issue 35, items 5 and 6: websocketd's, wscat's, websocat's habits

    /// websocketd's `--port=8080 ./count.sh` and `-l ADDR ./count.sh`, websocat's
    /// autoreconnect:, `-l :N`: exit 2, one line naming what to write.
    func testWebsocketdAndWebsocatFormsNameWhatToWrite() throws {
        let listener = try LoopbackSocket(listening: true)
        let hostPort = "127.0.0.1:\(listener.port)"
        try assertUsageErrors([
            (["--port=8080", "./count.sh"], ["wspipe: unknown option '--port'; websocketd's --port=8080 ./count.sh is "
                                             + "wspipe -l 8080 --exec ./count.sh (see wspipe --help server)\n"], [:]),
            (["-l", "127.0.0.1:0", "./count.sh"], ["wspipe: -l takes no URL, and './count.sh' is not one; to run a program for "
                                                   + "each client, write wspipe -l 127.0.0.1:0 --exec ./count.sh (see wspipe --help server)\n"], [:]),
            (["autoreconnect:ws://u:secret@\(hostPort)/"], ["websocat's 'autoreconnect:ws://[redacted]@\(hostPort)/' is wspipe "
                                                          + "--reconnect ws://[redacted]@\(hostPort)/"], [:]),
            (["-l", ":0", "--echo"], ["wspipe: -l ':0' names no address: -l 0 listens on loopback (127.0.0.1), -l 0.0.0.0:0 "
                                      + "on every interface (see wspipe --help server)\n"], [:]),
        ], listener: listener)
    }

    /// `--exec NAME` looks in PATH only: the message says so, and names ./NAME when the
    /// current directory has it (it was "cannot run 'count.sh': No such file or directory").
    func testExecNotFoundSaysPATHWasSearched() throws {
        let directory = path("here-\(UUID().uuidString)")
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        let script = directory + "/count.sh"
        try "#!/bin/sh\necho 1\n".write(toFile: script, atomically: true, encoding: .utf8)
        chmod(script, 0o755)
        for (name, note) in [("count.sh", "; the current directory is not searched: --exec ./count.sh runs the one here"),
                             ("no-such-program", ""),
                             // A whole command in one word: the arguments go as words, or --sh.
                             ("cat -n", "; --exec takes the program and its arguments as separate words (--exec cat -n), "
                              + "--sh a shell line (--sh 'cat -n')")] {
            let child = try ChildProcess(executable: "/bin/sh", arguments: ["-c", "cd \"$1\" && exec \"$2\" -l 0 --exec \"$3\"", "sh",
                                                                            directory, Locations.wspipe, name],
                                         environment: ["PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"])
            let result = finish(child)
            assertExit(result, 1)
            XCTAssertEqual(result.stderr, "wspipe: cannot run '\(name)': not found in PATH (/usr/bin:/bin)\(note)\n")
        }
    }

    /// wscat's `-c URL` works, with one note (none with -q).
    func testWscatsDashCConnectsWithANote() throws {
        let echo = try startEcho()
        let result = try runWspipe(["-c", "ws://127.0.0.1:\(echo.port)/"], stdin: .bytes(Array("hi\n".utf8)))
        assertExit(result, 0)
        assertStdout(result, "hi\n")
        XCTAssertEqual(result.stderr, "wspipe: wscat's -c: the URL alone is enough\n")
        let quiet = try runWspipe(["-q", "-c", "127.0.0.1:\(echo.port)"], stdin: .bytes(Array("q\n".utf8)))
        assertExit(quiet, 0)
        assertStdout(quiet, "q\n")
        XCTAssertEqual(quiet.stderr, "")
    }

    /// The client's unix:/path is the server's -l unix:/path (Host localhost, path /).
    func testClientTakesUnixPath() throws {
        let socket = path("u-\(UUID().uuidString.prefix(8)).sock")
        let server = try spawnWspipe(["-l", "unix:\(socket)", "--echo"], stdin: .null)
        XCTAssertNotNil(server.stderr.waitForLine(startingWith: "wspipe: listening on ws+unix://", timeout: 15), server.stderr.text)
        let result = try runWspipe(["-v", "unix:\(socket)"], stdin: .bytes(Array("over unix\n".utf8)))
        assertExit(result, 0)
        assertStdout(result, "over unix\n")
        assertStderr(result, contains: "wspipe: > GET / HTTP/1.1")
        assertStderr(result, contains: "wspipe: > Host: localhost")
    }

    /// -l localhost:0 listens on 127.0.0.1 and [::1] at one port, and says so.
    func testListenOnLocalhostTakesBothLoopbackAddresses() throws {
        let server = try spawnWspipe(["-l", "localhost:0", "--echo"], stdin: .null)
        let line = try XCTUnwrap(server.stderr.waitForLine(startingWith: "wspipe: listening on ", timeout: 15), server.stderr.text)
        let port = try XCTUnwrap(line.split(separator: "/").dropFirst(1).first?.split(separator: ":").last.flatMap { Int($0) }, line)
        guard ipv6LoopbackAvailable() else {
            XCTAssertEqual(line, "wspipe: listening on ws://127.0.0.1:\(port)/")
            XCTAssertTrue(server.stderr.text.contains("localhost: this host has no [::1]; listening on 127.0.0.1 only"),
                          server.stderr.text)
            return
        }
        XCTAssertEqual(line, "wspipe: listening on ws://127.0.0.1:\(port)/, ws://[::1]:\(port)/")
        for host in ["127.0.0.1", "[::1]"] {
            let result = try runWspipe(["ws://\(host):\(port)/"], stdin: .bytes(Array("\(host)\n".utf8)))
            assertExit(result, 0)
            assertStdout(result, "\(host)\n")
        }
    }
}
