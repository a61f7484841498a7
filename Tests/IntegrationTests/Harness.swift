// The integration-test harness: the XCTestCase base class that starts peers (Python
// servers in peers/), runs wspipe and cleans up after each test. Where things are, the
// child processes, peers, TLS material, raw sockets and frame bytes are in TestSupport
// (Tests/TestSupport), shared by every test target.
//
// Run: scripts/setup (once: .venv with websockets and websocat), then
//   swift build --build-tests && swift test --skip-build --filter IntegrationTests
// The binary under test is .build/debug/wspipe (next to the test bundle), or $WSPIPE_BIN.
//
// Peers print `PORT <n>` when listening on a free port and `RECORDED <n>` when they have
// written the record of their n-th connection: tests wait for these lines, never sleep.
// Every run has a hard timeout that kills the child and fails the test.
import Foundation
import XCTest
import TestSupport
#if canImport(Glibc)
import Glibc
#endif

// MARK: - The test case base class

class IntegrationTestCase: XCTestCase {
    private var cleanups: [() -> Void] = []
    private(set) var temporaryDirectory = ""

    override func setUpWithError() throws {
        try super.setUpWithError()
        // Writing to the stdin of a child that has exited must not kill the test runner.
        signal(SIGPIPE, SIG_IGN)
        guard FileManager.default.isExecutableFile(atPath: Locations.python) else {
            XCTFail("\(Locations.python) is missing: run scripts/setup (it makes .venv with websockets and websocat)")
            throw HarnessError("no venv python")
        }
        guard FileManager.default.isExecutableFile(atPath: Locations.wspipe) else {
            XCTFail("wspipe binary not found at \(Locations.wspipe): run `swift build --build-tests` or set WSPIPE_BIN")
            throw HarnessError("no wspipe binary")
        }
        temporaryDirectory = NSTemporaryDirectory() + "wspipe-it-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: temporaryDirectory, withIntermediateDirectories: true)
        let directory = temporaryDirectory
        cleanups.append { try? FileManager.default.removeItem(atPath: directory) }
    }

    override func tearDown() {
        for cleanup in cleanups.reversed() { cleanup() }
        cleanups = []
        super.tearDown()
    }

    func path(_ name: String) -> String { temporaryDirectory + "/" + name }

    // MARK: Peers

    /// Starts a peer and waits for its `PORT n` line.
    func startPeer(executable: String, arguments: [String], stdin: StandardInput = .null,
                   recordFile: String? = nil, portLine: String = "PORT ", portFromStderr: Bool = false,
                   file: StaticString = #filePath, line: UInt = #line) throws -> Peer {
        let environment = Locations.baseEnvironment.merging(["PYTHONDONTWRITEBYTECODE": "1"]) { $1 }
        do {
            let peer = try Peer.launch(executable: executable, arguments: arguments, environment: environment, stdin: stdin,
                                       recordFile: recordFile, portLine: portLine, portFromStderr: portFromStderr)
            cleanups.append { peer.process.kill() }
            return peer
        } catch {
            XCTFail("\(error)", file: file, line: line)
            throw error
        }
    }

    func startPython(_ script: String, _ arguments: [String], recordFile: String? = nil,
                     file: StaticString = #filePath, line: UInt = #line) throws -> Peer {
        try startPeer(executable: Locations.python, arguments: ["\(Locations.peers)/\(script)", "--port", "0"] + arguments,
                      recordFile: recordFile, file: file, line: line)
    }

    /// echo.py: every message back unchanged.
    func startEcho(_ arguments: [String] = [], file: StaticString = #filePath, line: UInt = #line) throws -> Peer {
        try startPython("echo.py", arguments, file: file, line: line)
    }

    /// record.py: records each connection (see the script).
    func startRecorder(_ arguments: [String] = [], file: StaticString = #filePath, line: UInt = #line) throws -> Peer {
        let record = path("record-\(UUID().uuidString).json")
        return try startPython("record.py", ["--record", record] + arguments, recordFile: record, file: file, line: line)
    }

    /// raw.py: a scripted misbehaving server.
    func startRaw(_ scenario: String, file: StaticString = #filePath, line: UInt = #line) throws -> Peer {
        let record = path("raw-\(UUID().uuidString).json")
        return try startPython("raw.py", ["--scenario", scenario, "--record", record], recordFile: record, file: file, line: line)
    }

    /// raw.py's `script` scenario: sends `bytes` (with "{accept}" replaced by the right
    /// Sec-WebSocket-Accept), then `then`: "behave", "close" or "hold".
    func startScripted(_ bytes: [UInt8], then: String = "behave", file: StaticString = #filePath, line: UInt = #line) throws -> Peer {
        let name = UUID().uuidString
        let record = path("raw-\(name).json")
        let script = path("script-\(name).bin")
        try Data(bytes).write(to: URL(fileURLWithPath: script))
        return try startPython("raw.py", ["--scenario", "script", "--record", record, "--script", script, "--then", then],
                               recordFile: record, file: file, line: line)
    }

    // MARK: wspipe

    /// Starts wspipe; it is killed at the end of the test if still running.
    func spawnWspipe(_ arguments: [String], stdin: StandardInput = .bytes([]), environment: [String: String] = [:],
                     stdoutFile: String? = nil, closeStdoutAfterFirstLine: Bool = false) throws -> ChildProcess {
        let child = try ChildProcess(executable: Locations.wspipe, arguments: arguments,
                                     environment: Locations.baseEnvironment.merging(environment) { $1 },
                                     stdin: stdin, stdoutFile: stdoutFile, closeStdoutAfterFirstLine: closeStdoutAfterFirstLine)
        cleanups.append { child.kill() }
        return child
    }

    /// Waits for a child to end; a timeout kills it and fails the test.
    func finish(_ child: ChildProcess, timeout: Double = 20, file: StaticString = #filePath, line: UInt = #line) -> RunResult {
        let result = child.wait(timeout: timeout)
        if result.termination == .timedOut {
            XCTFail("\(child.name) did not exit within \(timeout) s: \(result)", file: file, line: line)
        }
        return result
    }

    /// Runs wspipe to its end.
    func runWspipe(_ arguments: [String], stdin: StandardInput = .bytes([]), environment: [String: String] = [:],
                   timeout: Double = 20, file: StaticString = #filePath, line: UInt = #line) throws -> RunResult {
        let child = try spawnWspipe(arguments, stdin: stdin, environment: environment)
        return finish(child, timeout: timeout, file: file, line: line)
    }

    /// Waits until `child` has written `text` on stdout (fails the test if it does not).
    func waitForStdout(_ child: ChildProcess, contains text: String, timeout: Double = 15,
                       file: StaticString = #filePath, line: UInt = #line) -> Bool {
        let needle = Array(text.utf8)
        let found = child.stdout.wait(timeout: timeout) { $0.firstRange(of: needle) != nil }
        if !found {
            XCTFail("\(child.name) did not print \(String(reflecting: text)) within \(timeout) s; stdout: "
                    + "\(String(reflecting: child.stdout.text)); stderr:\n\(child.stderr.text)", file: file, line: line)
        }
        return found
    }

    func assertExit(_ result: RunResult, _ code: Int32, file: StaticString = #filePath, line: UInt = #line) {
        XCTAssertEqual(result.termination, .exited(code), "\(result)", file: file, line: line)
    }

    /// It died of `signal`, as wspipe ends after SIGINT, SIGTERM or SIGHUP (a shell shows
    /// 128 + the signal and stops a loop).
    func assertDiedOf(_ result: RunResult, _ signal: Int32, file: StaticString = #filePath, line: UInt = #line) {
        XCTAssertEqual(result.termination, .signaled(signal), "\(result)", file: file, line: line)
    }

    func assertStdout(_ result: RunResult, _ expected: String, file: StaticString = #filePath, line: UInt = #line) {
        XCTAssertEqual(result.stdoutText, expected, "stdout differs; \(result)", file: file, line: line)
    }

    func assertStderr(_ result: RunResult, contains text: String, file: StaticString = #filePath, line: UInt = #line) {
        XCTAssertTrue(result.stderr.contains(text), "stderr lacks \(String(reflecting: text)); \(result)", file: file, line: line)
    }

    /// Every stderr line starts with "wspipe: " (DESIGN.md, Diagnostics).
    func assertStderrLinesPrefixed(_ result: RunResult, file: StaticString = #filePath, line: UInt = #line) {
        for text in result.stderr.split(separator: "\n") where !text.hasPrefix("wspipe: ") {
            XCTFail("stderr line without 'wspipe: ': \(String(reflecting: String(text)))", file: file, line: line)
        }
    }

    func url(_ peer: Peer, _ target: String = "/", scheme: String = "ws", host: String = "127.0.0.1") -> String {
        "\(scheme)://\(host):\(peer.port)\(target)"
    }
}

/// Random bytes from the system generator.
func randomBytes(_ count: Int) -> [UInt8] {
    var generator = SystemRandomNumberGenerator()
    return (0..<count).map { _ in UInt8.random(in: 0...255, using: &generator) }
}
