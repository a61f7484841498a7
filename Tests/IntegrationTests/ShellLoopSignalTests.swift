// Ctrl-C stops a shell loop (issue 35, item 1). A shell that receives SIGINT while it waits
// for a foreground command goes on when the command exits with a status (it assumes the
// command handled the signal) and stops only when the command dies of SIGINT ("Proper
// handling of SIGINT/SIGQUIT", Cracauer). Each test runs bash in a process group of its own,
// as a terminal's foreground job, and sends one SIGINT to the whole group, as Ctrl-C does.
import Foundation
import XCTest
import TestSupport
#if canImport(Glibc)
import Glibc
#endif

final class ShellLoopSignalTests: IntegrationTestCase {
    /// `for i in 1 2 3; do echo $i >> MARKER; WSPIPE ARGUMENTS; echo "rc=$?"; done` in bash,
    /// leading its own process group (ChildProcess spawns so), wspipe's stdin and stderr
    /// being bash's.
    private func startLoop(_ arguments: [String], stdin: StandardInput = .pipe,
                           file: StaticString = #filePath, line: UInt = #line) throws -> (loop: ChildProcess, marker: String) {
        let marker = path("iterations")
        let script = #"for i in 1 2 3; do echo "$i" >> "$0"; "$@"; echo "rc=$?"; done"#
        let loop = try ChildProcess(executable: try Tool.bash.path(file: file, line: line), arguments: ["-c", script, marker, Locations.wspipe] + arguments,
                                    environment: Locations.baseEnvironment, stdin: stdin)
        addTeardownBlock { loop.kill() }
        return (loop, marker)
    }

    /// One SIGINT to the loop's process group (bash and wspipe): bash must die of it in the
    /// first iteration. `handled`: the -v line that shows wspipe's handler got the signal
    /// (rather than the default action, before the handler was installed).
    private func interruptOnce(_ loop: ChildProcess, marker: String, handled: String,
                               file: StaticString = #filePath, line: UInt = #line) {
        kill(-loop.pid, SIGINT)
        let result = finish(loop, timeout: 20, file: file, line: line)
        assertStderr(result, contains: handled, file: file, line: line)
        XCTAssertEqual(result.termination, .signaled(SIGINT), "bash goes on unless wspipe dies of SIGINT; \(result)",
                       file: file, line: line)
        XCTAssertFalse(result.stdoutText.contains("rc="), "the loop went on after wspipe; \(result)", file: file, line: line)
        XCTAssertEqual(try? String(contentsOfFile: marker, encoding: .utf8), "1\n", "iterations begun", file: file, line: line)
    }

    private func waitForStderr(_ loop: ChildProcess, _ prefix: String, file: StaticString = #filePath, line: UInt = #line) -> Bool {
        guard loop.stderr.waitForLine(startingWith: prefix, timeout: 15) != nil else {
            XCTFail("no line '\(prefix)' on stderr: \(loop.stderr.text)", file: file, line: line)
            return false
        }
        return true
    }

    func testCtrlCStopsALoopOfClients() throws {
        let echo = try startEcho()
        let (loop, marker) = try startLoop(["-v", url(echo)])
        loop.writeStdin("hello\n")
        guard waitForStdout(loop, contains: "hello\n") else { return }
        interruptOnce(loop, marker: marker, handled: "wspipe: * received signal 2")
    }

    func testCtrlCDuringTheClosingHandshakeStopsTheLoop() throws {
        // stdin's end makes wspipe send its Close; the server never answers it.
        let server = try startScripted(Wire.switching + Wire.text("ready"), then: "hold")
        let (loop, marker) = try startLoop(["-v", "--close-timeout", "3", url(server)], stdin: .null)
        guard waitForStderr(loop, "wspipe: * sending Close 1000") else { return }
        interruptOnce(loop, marker: marker, handled: "wspipe: * received signal 2")
    }

    func testCtrlCWhileAReconnectingClientWaitsForItsHandshakeStopsTheLoop() throws {
        // A listener that never accepts: the request waits in its backlog, unanswered. The
        // handler itself ends the process then (nothing to close yet).
        let silent = try LoopbackSocket(listening: true)
        let (loop, marker) = try startLoop(["-v", "--reconnect", "ws://127.0.0.1:\(silent.port)/"])
        guard waitForStderr(loop, "wspipe: > User-Agent: ") else { return }
        interruptOnce(loop, marker: marker, handled: "wspipe: > User-Agent: ")
    }

    func testCtrlCStopsALoopOfEchoServers() throws {
        let (loop, marker) = try startLoop(["-v", "-l", "0", "--echo"])
        guard waitForStderr(loop, "wspipe: listening on ") else { return }
        interruptOnce(loop, marker: marker, handled: "wspipe: * signal 2: closing 0 client(s) with 1001")
    }

    func testCtrlCStopsALoopOfForwardListeners() throws {
        let echo = try startEcho()
        let (loop, marker) = try startLoop(["-v", "--forward-listen", "0", url(echo)])
        guard waitForStderr(loop, "wspipe: listening on tcp://") else { return }
        interruptOnce(loop, marker: marker, handled: "wspipe: * signal 2: closing 0 connection(s)")
    }

    /// The ending is done before the death: the stdio server's -l unix: socket is removed and
    /// --stats printed, its "exit" being what a shell shows (128 + N; it said 0).
    func testTheStdioServerEndsItsRunThenDiesOfTheSignal() throws {
        let socket = path("s.sock")
        let server = try spawnWspipe(["-l", "unix:\(socket)", "--stats"], stdin: .pipe)
        guard server.stderr.waitForLine(startingWith: "wspipe: listening on ", timeout: 15) != nil else {
            return XCTFail("not listening: \(server.stderr.text)")
        }
        server.signal(SIGHUP)
        let result = finish(server)
        assertDiedOf(result, SIGHUP)
        assertStderr(result, contains: "\"exit\":129}")
        XCTAssertFalse(FileManager.default.fileExists(atPath: socket), "the socket is removed before the death")
    }
}
