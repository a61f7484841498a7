// wspipe in a terminal (issue 36): peers/console.py runs the real binary in a pseudo-
// terminal of 80x24 (pexpect) and checks the screen with a terminal emulator (pyte), and
// what its own WebSocket server received. The pipeline side (stdin or stdout not a
// terminal: the bytes of today) is checked here directly.
import Foundation
import XCTest
import TestSupport

final class ConsoleTests: IntegrationTestCase {
    /// Runs one scenario of console.py; its output says what failed, with the screen.
    private func scenario(_ name: String, _ options: [String] = [], file: StaticString = #filePath, line: UInt = #line) throws {
        try requireTerminalEmulator(file: file, line: line)
        let child = try spawnHelper(Locations.python, ["\(Locations.peers)/console.py", "--wspipe", Locations.wspipe] + options + [name])
        let result = finish(child, timeout: 90, file: file, line: line)
        XCTAssertEqual(result.exitCode, 0, "scenario \(name): \(result)", file: file, line: line)
    }

    private func spawnHelper(_ executable: String, _ arguments: [String]) throws -> ChildProcess {
        let child = try ChildProcess(executable: executable, arguments: arguments,
                                     environment: Locations.baseEnvironment.merging(["PYTHONDONTWRITEBYTECODE": "1"]) { $1 })
        addTeardownBlock { child.kill() }
        return child
    }

    /// pexpect and pyte (scripts/setup puts them in .venv): a skip, or under CI=true a failure.
    private func requireTerminalEmulator(file: StaticString, line: UInt) throws {
        let check = try spawnHelper(Locations.python, ["-c", "import pexpect, pyte"])
        guard finish(check, file: file, line: line).exitCode == 0 else {
            let what = "pexpect and pyte are not installed in .venv (scripts/setup installs them)"
            if CI.isOn() { throw MissingToolError(description: what + ", and CI=true makes a missing tool a failure") }
            throw XCTSkip(what, file: file, line: line)
        }
    }

    func testPromptMarkersAndCtrlD() throws { try scenario("prompt") }

    func testEditingKeysChangeWhatIsSent() throws { try scenario("editing") }

    func testAMessageArrivingMidLineDoesNotClobberIt() throws { try scenario("midline") }

    func testSlashCommands() throws { try scenario("commands") }

    func testEscapesFromTheServerAreShownNotObeyed() throws { try scenario("escapes") }

    func testACJKLineAndA300ColumnLineWrapIn80Columns() throws { try scenario("wide") }

    func testAWindowResizeRedrawsTheLine() throws { try scenario("resize") }

    func testALineTallerThanTheScreenIsShownAroundTheCursor() throws { try scenario("tall") }

    /// pyte cuts rows when narrowed, as xterm does: nothing above the prompt is erased.
    func testNarrowingATerminalThatCutsRowsKeepsTheLinesAbove() throws { try scenario("narrow-xterm") }

    /// pyte does not reflow on resize; tmux does (as VTE and kitty do): no stale edit rows.
    func testNarrowingATerminalThatReflowsLeavesNoStaleRows() throws {
        try scenario("reflow", ["--tmux", try Tool.tmux.path()])
    }

    func testColoursUnlessNO_COLORAndTimestamps() throws { try scenario("colours") }

    func testHistoryAcrossRunsIsPrivateAndRefusesALink() throws { try scenario("history") }

    func testCtrlCRestoresTheTerminalAndDiesOfSIGINT() throws { try scenario("ctrl-c") }

    func testCtrlDRestoresTheTerminal() throws { try scenario("ctrl-d") }

    func testSIGTERMRestoresTheTerminal() throws { try scenario("sigterm") }

    func testServerCloseRestoresTheTerminal() throws { try scenario("server-close") }

    func testTimeoutRestoresTheTerminal() throws { try scenario("timeout") }

    func testCtrlZStopsWithTheTerminalRestoredAndFgResumes() throws { try scenario("suspend") }

    func testSIGTSTPFromElsewhereRestoresTheTerminalToo() throws { try scenario("sigtstp") }

    func testOneCtrlCEndsAShellLoopOfConsoles() throws { try scenario("loop") }

    func testReconnectSendAndTypedLinesAcrossConnections() throws { try scenario("reconnect") }

    func testTheConsoleKeepsDrawingWhileARetryDials() throws { try scenario("dialing") }

    func testARowSaysTheFirstConnectionIsOpening() throws { try scenario("opening") }

    func testAReconnectionsStatusRowKeepsTheTypedLine() throws { try scenario("reconnect-status") }

    func testTheServersCloseIsToldOnce() throws { try scenario("close-once") }

    func testCtrlLClearsTheScreenAndDrawsTheLineAtItsTop() throws { try scenario("clear") }

    func testExpectAndUntilWorkInTheConsoleAndATypedLineWaitsForThePreamble() throws { try scenario("conversation") }

    func testTheStdioServerIsAConsoleToo() throws { try scenario("server") }

    // MARK: - Not a console

    func testNoInteractiveKeepsTheBytePipeAtATerminal() throws { try scenario("no-interactive") }

    func testABackgroundJobIsNoConsole() throws { try scenario("background") }

    func testInteractiveWithAPipeIsAUsageError() throws {
        let result = try runWspipe(["--interactive", "ws://127.0.0.1:9/"], stdin: .bytes(Array("hello\n".utf8)))
        XCTAssertEqual(result.exitCode, 2, "\(result)")
        XCTAssertTrue(result.stderr.contains("--interactive needs a terminal on stdin and stdout"), result.stderr)
        XCTAssertTrue(result.stdout.isEmpty, "\(result)")
    }

    func testInteractiveRefusesTheModesThatAreNoConsole() throws {
        for (flag, name) in [("-b", "--binary"), ("--jsonl", "--jsonl"), ("-0", "-0/--null"), ("--receive-only", "--receive-only"),
                              ("--decompress=gzip", "--decompress")] {
            let result = try runWspipe(["--interactive", flag, "ws://127.0.0.1:9/"])
            XCTAssertEqual(result.exitCode, 2, "\(flag): \(result)")
            XCTAssertTrue(result.stderr.contains("--interactive cannot be combined with \(name)"), "\(flag): \(result.stderr)")
        }
    }

    func testTimestampsWithoutJSONLinesOutsideTheConsoleIsStillRefused() throws {
        let result = try runWspipe(["--timestamps", "ws://127.0.0.1:9/"])
        XCTAssertEqual(result.exitCode, 2, "\(result)")
        XCTAssertTrue(result.stderr.contains("--timestamps needs --jsonl"), result.stderr)
    }

    /// A terminal on stdin only (stdout a pipe): the byte pipe of today, each line a message
    /// and each reply its bytes and a newline, nothing of the console's.
    func testATerminalOnStdinOnlyKeepsTheBytePipe() throws {
        let echo = try startEcho()
        let typed = try spawnHelper(Locations.python, ["\(Locations.peers)/ttyrun.py", "--wait-echo", "--line", "one", "--line", "two",
                                                       "--eof", "--", Locations.wspipe, url(echo)])
        let result = finish(typed, timeout: 30)
        XCTAssertEqual(result.exitCode, 0, "\(result)")
        XCTAssertEqual(result.stdoutText, "one\ntwo\n", "\(result)")
    }
}
