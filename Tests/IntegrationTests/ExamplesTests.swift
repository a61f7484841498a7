// Runs the scripts in examples/ (and scripts/demo) against their local servers in
// examples/servers/, with the wspipe built for this test run, and checks what they print.
// Needs what scripts/setup installs: .venv/bin/python (with `websockets`), jq and flock.
import Foundation
import Glibc
import XCTest
import TestSupport

final class ExamplesTests: XCTestCase {
    // MARK: - jq-price-feed.sh

    func testJQPriceFeedPrintsOnePricePerMessage() throws {
        let tools = try ExampleTools.require(self)
        let server = try ExampleServer.start("feed_server.py", ["--count", "7"], tools: tools)
        defer { server.stop() }

        let result = try ExampleRun.script("examples/jq-price-feed.sh", [server.url], tools: tools)
        XCTAssertEqual(result.status, 0, result.summary)
        let lines = result.stdout.split(separator: "\n", omittingEmptySubsequences: false).dropLast()
        XCTAssertEqual(lines.count, 7, "expected 7 prices\n" + result.summary)
        for line in lines {
            XCTAssertNotNil(Double(line), "not a price: '\(line)'\n" + result.summary)
        }
        XCTAssertTrue(result.stdout.hasSuffix("\n"), result.summary)
    }

    func testJQPriceFeedReportsWspipesStatusWhenTheServerRefuses() throws {
        let tools = try ExampleTools.require(self)
        let server = try ExampleServer.start("feed_server.py", ["--token", "right-token"], tools: tools)
        defer { server.stop() }

        let refused = try ExampleRun.script("examples/jq-price-feed.sh", [server.url], tools: tools)
        XCTAssertEqual(refused.status, 5, "401 from the server is wspipe status 5\n" + refused.summary)
        XCTAssertEqual(refused.stdout, "", refused.summary)
        XCTAssertTrue(refused.stderr.contains("401"), refused.summary)

        let accepted = try ExampleRun.script("examples/jq-price-feed.sh", [server.url], tools: tools,
                                             environment: ["WSPIPE_BEARER": "right-token"])
        XCTAssertEqual(accepted.status, 0, accepted.summary)
        XCTAssertEqual(accepted.stdout.split(separator: "\n").count, 5, accepted.summary)
    }

    // MARK: - cron-snapshot.sh

    func testCronSnapshotStoresTheReply() throws {
        let tools = try ExampleTools.require(self)
        let server = try ExampleServer.start("feed_server.py", ["--token", "cron-token"], tools: tools)
        defer { server.stop() }
        let directory = try ExampleRun.temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let output = directory + "/ticker.json"

        let result = try ExampleRun.script("examples/cron-snapshot.sh", [server.url, output], tools: tools,
                                           environment: ["WSPIPE_BEARER": "cron-token"])
        XCTAssertEqual(result.status, 0, result.summary)
        XCTAssertTrue(result.stderr.contains("stored"), result.summary)
        let stored = try String(contentsOfFile: output, encoding: .utf8)
        let object = try JSONSerialization.jsonObject(with: Data(stored.utf8)) as? [String: Any]
        XCTAssertEqual(object?["ch"] as? String, "ticker", stored)
        XCTAssertNotNil(object?["price"] as? Double, stored)
        XCTAssertEqual(object?["snapshot"] as? Bool, true, stored)
        // Only the snapshot and the lock file: the temporary file is gone.
        let files = try FileManager.default.contentsOfDirectory(atPath: directory).sorted()
        XCTAssertEqual(files, ["ticker.json", "ticker.json.lock"])
    }

    func testCronSnapshotTellsAuthProblemsFromTemporaryOnes() throws {
        let tools = try ExampleTools.require(self)
        let server = try ExampleServer.start("feed_server.py", ["--token", "cron-token"], tools: tools)
        defer { server.stop() }
        let directory = try ExampleRun.temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let output = directory + "/ticker.json"

        // A wrong token: wspipe status 5, which needs a human (script status 1).
        let refused = try ExampleRun.script("examples/cron-snapshot.sh", [server.url, output], tools: tools,
                                            environment: ["WSPIPE_BEARER": "wrong-token"])
        XCTAssertEqual(refused.status, 1, refused.summary)
        XCTAssertTrue(refused.stderr.contains("status 5"), refused.summary)
        XCTAssertFalse(FileManager.default.fileExists(atPath: output), "nothing may be stored after a refusal")

        // The token from a file (--bearer-file) works as well.
        let tokenFile = directory + "/token"
        try Data("cron-token".utf8).write(to: URL(fileURLWithPath: tokenFile))
        let fromFile = try ExampleRun.script("examples/cron-snapshot.sh", [server.url, output], tools: tools,
                                             environment: ["FEED_TOKEN_FILE": tokenFile])
        XCTAssertEqual(fromFile.status, 0, fromFile.summary)
        XCTAssertTrue(FileManager.default.fileExists(atPath: output), fromFile.summary)

        // Nobody listening: wspipe status 3, retried next run (EX_TEMPFAIL), the old
        // snapshot is kept.
        let before = try String(contentsOfFile: output, encoding: .utf8)
        let closedPort = try ExampleRun.unusedPort()
        let unreachable = try ExampleRun.script("examples/cron-snapshot.sh", ["ws://127.0.0.1:\(closedPort)/", output],
                                                tools: tools)
        XCTAssertEqual(unreachable.status, 75, unreachable.summary)
        XCTAssertTrue(unreachable.stderr.contains("status 3"), unreachable.summary)
        XCTAssertEqual(try String(contentsOfFile: output, encoding: .utf8), before)
    }

    /// A feed that closes normally without a reply: --require-count makes it wspipe status
    /// 11, retried next run (EX_TEMPFAIL); the old snapshot is kept.
    func testCronSnapshotRetriesWhenTheServerClosesWithoutAReply() throws {
        let tools = try ExampleTools.require(self)
        let server = try ExampleServer.start("feed_server.py", ["--no-snapshot"], tools: tools)
        defer { server.stop() }
        let directory = try ExampleRun.temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let output = directory + "/ticker.json"
        try Data("{\"old\":true}\n".utf8).write(to: URL(fileURLWithPath: output))

        let result = try ExampleRun.script("examples/cron-snapshot.sh", [server.url, output], tools: tools)
        XCTAssertEqual(result.status, 75, result.summary)
        XCTAssertTrue(result.stderr.contains("the server closed without a reply (wspipe status 11)"), result.summary)
        XCTAssertEqual(try String(contentsOfFile: output, encoding: .utf8), "{\"old\":true}\n")
    }

    func testCronSnapshotSkipsWhileAnotherRunHoldsTheLock() throws {
        let tools = try ExampleTools.require(self)
        let server = try ExampleServer.start("feed_server.py", [], tools: tools)
        defer { server.stop() }
        let directory = try ExampleRun.temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let output = directory + "/ticker.json"

        // flock(1) holds the lock while it runs the script, like an earlier run still going.
        let result = try ExampleRun.run(tools.flock, [output + ".lock", ExampleRun.path("examples/cron-snapshot.sh"),
                                                     server.url, output], tools: tools)
        XCTAssertEqual(result.status, 0, result.summary)
        XCTAssertTrue(result.stderr.contains("skipping"), result.summary)
        XCTAssertFalse(FileManager.default.fileExists(atPath: output), result.summary)
    }

    // MARK: - binary-transfer.sh

    func testBinaryTransferRoundTripsAGeneratedFile() throws {
        let tools = try ExampleTools.require(self)
        let server = try ExampleServer.start("echo_server.py", [], tools: tools)
        defer { server.stop() }

        let result = try ExampleRun.script("examples/binary-transfer.sh", [server.url], tools: tools)
        XCTAssertEqual(result.status, 0, result.summary)
        XCTAssertTrue(result.stdout.contains("checksums match"), result.summary)
        XCTAssertTrue(result.stdout.contains("3145728 bytes"), result.summary)
    }

    func testBinaryTransferKeepsEveryByteValue() throws {
        let tools = try ExampleTools.require(self)
        let server = try ExampleServer.start("echo_server.py", [], tools: tools)
        defer { server.stop() }
        let directory = try ExampleRun.temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }

        // Every byte value, CRLF, NUL runs and invalid UTF-8, over several small chunks.
        var bytes = [UInt8](0...255) + Array("line\r\nnext\n\0\0\0".utf8) + [0xFF, 0xFE, 0xC0, 0x80]
        for round in 0..<300 { bytes += [UInt8](repeating: UInt8(truncatingIfNeeded: round), count: 97) }
        let file = directory + "/payload.bin"
        try Data(bytes).write(to: URL(fileURLWithPath: file))

        let result = try ExampleRun.script("examples/binary-transfer.sh", [server.url, file], tools: tools,
                                           environment: ["CHUNK_SIZE": "1K"])
        XCTAssertEqual(result.status, 0, result.summary)
        XCTAssertTrue(result.stdout.contains("checksums match"), result.summary)
        XCTAssertTrue(result.stdout.contains("\(bytes.count) bytes"), result.summary)
    }

    func testCronSnapshotGivesUpAfterItsTimeLimitWithStatus124() throws {
        let tools = try ExampleTools.require(self)
        // A server that takes 2.5 s to answer; the job allows 1 s.
        let server = try ExampleServer.start("feed_server.py", ["--snapshot-delay", "2.5"], tools: tools)
        defer { server.stop() }
        let directory = try ExampleRun.temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let output = directory + "/ticker.json"

        let started = Date()
        let result = try ExampleRun.script("examples/cron-snapshot.sh", [server.url, output], tools: tools,
                                           environment: ["SNAPSHOT_TIME_LIMIT": "1"])
        XCTAssertEqual(result.status, 75, "wspipe's --timeout (124) is a temporary failure\n" + result.summary)
        XCTAssertTrue(result.stderr.contains("no reply within 1 s"), result.summary)
        XCTAssertLessThan(Date().timeIntervalSince(started), 4.5, result.summary)
        XCTAssertFalse(FileManager.default.fileExists(atPath: output), "nothing stored")
    }

    // MARK: - subscribe-read-n.sh

    func testSubscribeReadNPrintsExactlyNMessages() throws {
        let tools = try ExampleTools.require(self)
        let server = try ExampleServer.start("feed_server.py", ["--count", "10"], tools: tools)
        defer { server.stop() }

        let result = try ExampleRun.script("examples/subscribe-read-n.sh", [server.url, "3"], tools: tools)
        XCTAssertEqual(result.status, 0, result.summary)
        let lines = result.stdout.split(separator: "\n").map(String.init)
        XCTAssertEqual(lines.count, 3, "exactly 3 of the 10 messages\n" + result.summary)
        for (index, line) in lines.enumerated() {
            let object = try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any]
            XCTAssertEqual(object?["seq"] as? Int, index + 1, line)
            XCTAssertNotNil(object?["price"] as? Double, line)
        }
        XCTAssertEqual(result.stderr, "", result.summary)

        // More than the feed has: the server's Close 1000 ends it, status 0, all 10 printed.
        let all = try ExampleRun.script("examples/subscribe-read-n.sh", [server.url, "50"], tools: tools)
        XCTAssertEqual(all.status, 0, all.summary)
        XCTAssertEqual(all.stdout.split(separator: "\n").count, 10, all.summary)
    }

    func testSubscribeReadNReportsTimeoutAs124() throws {
        let tools = try ExampleTools.require(self)
        // One message every 0.5 s: 10 of them take longer than the 1 s allowed.
        let server = try ExampleServer.start("feed_server.py", ["--count", "10", "--interval", "0.5"], tools: tools)
        defer { server.stop() }
        let result = try ExampleRun.script("examples/subscribe-read-n.sh", [server.url, "10"], tools: tools,
                                           environment: ["SUBSCRIBE_TIME_LIMIT": "1"])
        XCTAssertEqual(result.status, 124, result.summary)
        XCTAssertTrue(result.stderr.contains("status 124"), result.summary)
        let count = result.stdout.split(separator: "\n").count
        XCTAssertTrue((1...4).contains(count), "what arrived in time is printed\n" + result.summary)
    }

    // MARK: - jsonrpc-call.sh

    func testJSONRPCCallPrintsTheResultOrTheError() throws {
        let tools = try ExampleTools.require(self)
        let server = try ExampleServer.start("jsonrpc_server.py", [], tools: tools)
        defer { server.stop() }
        let environment = ["RPC_URL": server.url]

        let sum = try ExampleRun.script("examples/jsonrpc-call.sh", ["sum", "[1,2,3.5]"], tools: tools, environment: environment)
        XCTAssertEqual(sum.status, 0, sum.summary)
        XCTAssertEqual(sum.stdout, "6.5\n", sum.summary)

        let named = try ExampleRun.script("examples/jsonrpc-call.sh", ["subtract", #"{"minuend":10,"subtrahend":3}"#],
                                          tools: tools, environment: environment)
        XCTAssertEqual(named.status, 0, named.summary)
        XCTAssertEqual(named.stdout, "7\n", named.summary)

        // Parameters with quotes, newlines and unicode go through unchanged.
        let echo = try ExampleRun.script("examples/jsonrpc-call.sh", ["echo", #"{"text":"a \"b\"\nc é","list":[1,null,true]}"#],
                                         tools: tools, environment: environment)
        XCTAssertEqual(echo.status, 0, echo.summary)
        XCTAssertEqual(echo.stdout, #"{"text":"a \"b\"\nc é","list":[1,null,true]}"# + "\n", echo.summary)

        let missing = try ExampleRun.script("examples/jsonrpc-call.sh", ["no_such_method"], tools: tools, environment: environment)
        XCTAssertEqual(missing.status, 1, missing.summary)
        XCTAssertEqual(missing.stdout, "", missing.summary)
        XCTAssertTrue(missing.stderr.contains("error -32601"), missing.summary)

        let invalid = try ExampleRun.script("examples/jsonrpc-call.sh", ["sum", #"["x"]"#], tools: tools, environment: environment)
        XCTAssertEqual(invalid.status, 1, invalid.summary)
        XCTAssertTrue(invalid.stderr.contains("error -32602"), invalid.summary)

        let badJSON = try ExampleRun.script("examples/jsonrpc-call.sh", ["sum", "[1,"], tools: tools, environment: environment)
        XCTAssertEqual(badJSON.status, 2, badJSON.summary)

        let port = try ExampleRun.unusedPort()
        let unreachable = try ExampleRun.script("examples/jsonrpc-call.sh", ["ping"], tools: tools,
                                                environment: ["RPC_URL": "ws://127.0.0.1:\(port)/"])
        XCTAssertEqual(unreachable.status, 3, unreachable.summary)
    }

    /// Notifications before the reply: only the reply with the call's id is read.
    func testJSONRPCCallSkipsNotificationsBeforeItsReply() throws {
        let tools = try ExampleTools.require(self)
        let server = try ExampleServer.start("jsonrpc_server.py", ["--notifications", "3"], tools: tools)
        defer { server.stop() }
        let sum = try ExampleRun.script("examples/jsonrpc-call.sh", ["sum", "[1,2]"], tools: tools, environment: ["RPC_URL": server.url])
        XCTAssertEqual(sum.status, 0, sum.summary)
        XCTAssertEqual(sum.stdout, "3\n", sum.summary)
    }

    // MARK: - authenticated-subscribe.sh

    func testAuthenticatedSubscribeWaitsForTheLoginThenPrintsThePrices() throws {
        let tools = try ExampleTools.require(self)
        let server = try ExampleServer.start("feed_server.py", ["--login", "demo", "--count", "50", "--interval", "0.02"], tools: tools)
        defer { server.stop() }
        let result = try ExampleRun.script("examples/authenticated-subscribe.sh", ["4"], tools: tools,
                                           environment: ["FEED_URL": server.url])
        XCTAssertEqual(result.status, 0, result.summary)
        let prices = result.stdout.split(separator: "\n")
        XCTAssertEqual(prices.count, 4, result.summary)
        for price in prices { XCTAssertNotNil(Double(price), "not a price: '\(price)'\n" + result.summary) }

        // A wrong key: the server closes with 1008 during the wait for the login's answer.
        let refused = try ExampleRun.script("examples/authenticated-subscribe.sh", ["4"], tools: tools,
                                            environment: ["FEED_URL": server.url, "FEED_KEY": "wrong"])
        XCTAssertEqual(refused.status, 13, refused.summary)
        XCTAssertEqual(refused.stdout, "", refused.summary)
        XCTAssertTrue(refused.stderr.contains("--expect-json #1 'event=authenticated': the server closed the connection with 1008"),
                      refused.summary)
    }

    // MARK: - tail-to-websocket.sh

    func testTailToWebSocketDeliversEveryLineInOrder() throws {
        let tools = try ExampleTools.require(self)
        let directory = try ExampleRun.temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let collected = directory + "/collected.txt"
        let server = try ExampleServer.start("collect_server.py", ["--output", collected], tools: tools)
        defer { server.stop() }

        let result = try ExampleRun.script("examples/tail-to-websocket.sh", [server.url, "25"], tools: tools,
                                           environment: ["TAIL_INTERVAL": "0.02"])
        XCTAssertEqual(result.status, 0, result.summary)
        XCTAssertEqual(result.stdout, "", "--send-only prints nothing\n" + result.summary)
        XCTAssertTrue(result.stderr.contains("sent 25 lines"), result.summary)
        // wspipe closed only after the server had read every line (end-of-input barrier).
        let expected = (1...25).map { "event \($0): user=u\($0 % 7) action=login\n" }.joined()
        XCTAssertEqual((try? String(contentsOfFile: collected, encoding: .utf8)) ?? "", expected)
    }

    // MARK: - upload-download.sh

    func testUploadDownloadRoundTripsAGeneratedFile() throws {
        let tools = try ExampleTools.require(self)
        let server = try ExampleServer.start("storage_server.py", [], tools: tools)
        defer { server.stop() }

        let result = try ExampleRun.script("examples/upload-download.sh", [server.url], tools: tools)
        XCTAssertEqual(result.status, 0, result.summary)
        XCTAssertTrue(result.stdout.contains("5242880 bytes (server: 5242880 bytes)"), result.summary)
        XCTAssertTrue(result.stdout.contains("checksums match"), result.summary)
    }

    func testUploadDownloadKeepsEveryByteOfOddFiles() throws {
        let tools = try ExampleTools.require(self)
        let server = try ExampleServer.start("storage_server.py", [], tools: tools)
        defer { server.stop() }
        let directory = try ExampleRun.temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }

        var odd = [UInt8](0...255) + Array("line\r\nnext\n\0\0\0".utf8) + [0xFF, 0xFE, 0xC0, 0x80]
        for round in 0..<3000 { odd += [UInt8](repeating: UInt8(truncatingIfNeeded: round), count: 97) }
        for (name, bytes) in [("odd.bin", odd), ("empty.bin", []), ("one.bin", [0x00])] {
            let file = directory + "/" + name
            try Data(bytes).write(to: URL(fileURLWithPath: file))
            let result = try ExampleRun.script("examples/upload-download.sh", [server.url, file], tools: tools,
                                               environment: ["CHUNK_SIZE": "1K"])
            XCTAssertEqual(result.status, 0, "\(name)\n" + result.summary)
            XCTAssertTrue(result.stdout.contains("\(bytes.count) bytes (server: \(bytes.count) bytes)"), result.summary)
            XCTAssertTrue(result.stdout.contains("checksums match"), result.summary)
        }
    }

    // MARK: - scripts/demo

    func testDemoPrintsThePricesAndExitsWithWspipesStatus() throws {
        let tools = try ExampleTools.require(self)
        let result = try ExampleRun.script("scripts/demo", [], tools: tools, environment: ["DEMO_COUNT": "4"])
        XCTAssertEqual(result.status, 0, result.summary)
        let prices = result.stdout.split(separator: "\n")
        XCTAssertEqual(prices.count, 4, result.summary)
        XCTAssertTrue(prices.allSatisfy { Double($0) != nil }, result.summary)
        XCTAssertTrue(result.stderr.contains("wspipe exited with status 0"), result.summary)
    }
}

// MARK: - Helpers (private to this file)

/// The programs the examples need, checked once per test with a clear message.
private struct ExampleTools {
    let python: String
    let wspipe: String
    let flock: String

    static func require(_ test: XCTestCase) throws -> ExampleTools {
        var missing: [String] = []
        let python = ExampleRun.path(".venv/bin/python")
        if !FileManager.default.isExecutableFile(atPath: python) {
            missing.append("\(python) (run scripts/setup to create the venv with `websockets`)")
        }
        for tool in ["jq", "flock", "timeout", "sha256sum", "bash"] where ExampleRun.which(tool) == nil {
            missing.append("\(tool) (run scripts/setup)")
        }
        let wspipe = ExampleRun.wspipeBinary()
        if !FileManager.default.isExecutableFile(atPath: wspipe) {
            missing.append("the wspipe binary at \(wspipe) (build it, or set WSPIPE_BIN)")
        }
        if !missing.isEmpty {
            let message = "the example tests need: " + missing.joined(separator: "; ")
            XCTFail(message)
            throw ExampleError(message)
        }
        return ExampleTools(python: python, wspipe: wspipe, flock: ExampleRun.which("flock") ?? "flock")
    }
}

private struct ExampleError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

/// A server from examples/servers, started on a free port.
private final class ExampleServer {
    let process: Process
    let port: Int
    var url: String { "ws://127.0.0.1:\(port)/" }

    private init(process: Process, port: Int) {
        self.process = process
        self.port = port
    }

    /// Starts the server with `--port 0` and waits (up to 30 s) for its "PORT <n>" line.
    static func start(_ script: String, _ arguments: [String], tools: ExampleTools) throws -> ExampleServer {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: tools.python)
        process.arguments = [ExampleRun.path("examples/servers/" + script), "--port", "0"] + arguments
        let stdout = Pipe()
        process.standardOutput = stdout
        process.standardInput = FileHandle.nullDevice
        try process.run()

        // Read the first line without blocking forever.
        let fd = stdout.fileHandleForReading.fileDescriptor
        var line: [UInt8] = []
        let deadline = Date().addingTimeInterval(30)
        while !line.contains(0x0A) {
            let remaining = deadline.timeIntervalSinceNow
            var entry = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            guard remaining > 0, poll(&entry, 1, Int32(remaining * 1000)) > 0 else { break }
            var byte: UInt8 = 0
            guard read(fd, &byte, 1) == 1 else { break }
            line.append(byte)
        }
        let text = String(decoding: line, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
        let parts = text.split(separator: " ")
        guard parts.count == 2, parts[0] == "PORT", let port = Int(parts[1]) else {
            if process.isRunning { process.terminate() }
            process.waitUntilExit()
            throw ExampleError("\(script) did not print 'PORT <n>' (got '\(text)', status \(process.terminationStatus))")
        }
        return ExampleServer(process: process, port: port)
    }

    func stop() {
        if process.isRunning { process.terminate() }
        process.waitUntilExit()
    }
}

/// Running the scripts.
private enum ExampleRun {
    struct Result {
        let status: Int32
        let stdout: String
        let stderr: String
        let command: String

        var summary: String { "$ \(command)\nstatus \(status)\n--- stdout\n\(stdout)--- stderr\n\(stderr)" }
    }

    /// The package root: this file is Tests/IntegrationTests/ExamplesTests.swift.
    static let root = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent().path

    static func path(_ relative: String) -> String { root + "/" + relative }

    /// $WSPIPE_BIN, else the wspipe built next to this test bundle, else .build/debug/wspipe.
    static func wspipeBinary() -> String {
        if let bin = ProcessInfo.processInfo.environment["WSPIPE_BIN"], !bin.isEmpty { return bin }
        var candidates: [String] = []
        if let executable = Bundle.main.executableURL {
            candidates.append(executable.deletingLastPathComponent().appendingPathComponent("wspipe").path)
        }
        candidates.append(URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent()
            .appendingPathComponent("wspipe").path)
        candidates.append(path(".build/debug/wspipe"))
        return candidates.first { FileManager.default.isExecutableFile(atPath: $0) } ?? candidates.last!
    }

    static func which(_ tool: String) -> String? {
        let directories = (ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin").split(separator: ":")
        return directories.map { "\($0)/\(tool)" }.first { FileManager.default.isExecutableFile(atPath: $0) }
    }

    static func temporaryDirectory() throws -> String {
        var template = Array((NSTemporaryDirectory() + "/wspipe-examples.XXXXXX").utf8CString)
        guard let made = mkdtemp(&template) else { throw ExampleError("mkdtemp failed: \(String(cString: strerror(errno)))") }
        return String(cString: made)
    }

    /// A TCP port on 127.0.0.1 that nothing listens on (bound, then released).
    static func unusedPort() throws -> Int {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw ExampleError("socket failed") }
        defer { close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = 0
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, length) == 0 &&
                getsockname(fd, $0, &length) == 0 }
        }
        guard bound else { throw ExampleError("bind failed") }
        return Int(UInt16(bigEndian: address.sin_port))
    }

    /// Runs a script of the repository with WSPIPE_BIN set to the binary under test.
    static func script(_ relative: String, _ arguments: [String], tools: ExampleTools,
                       environment: [String: String] = [:], timeout: Double = 60) throws -> Result {
        try run(path(relative), arguments, tools: tools, environment: environment, timeout: timeout)
    }

    /// Runs `executable` with stdin from /dev/null and stdout/stderr captured in files (so
    /// a chatty child can never block on a full pipe); kills it after `timeout` seconds.
    static func run(_ executable: String, _ arguments: [String], tools: ExampleTools,
                    environment: [String: String] = [:], timeout: Double = 60) throws -> Result {
        let directory = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let outPath = directory + "/stdout", errPath = directory + "/stderr"
        _ = FileManager.default.createFile(atPath: outPath, contents: nil)
        _ = FileManager.default.createFile(atPath: errPath, contents: nil)
        let out = try FileHandle(forWritingTo: URL(fileURLWithPath: outPath))
        let err = try FileHandle(forWritingTo: URL(fileURLWithPath: errPath))

        var env = ProcessInfo.processInfo.environment
        env["WSPIPE_BIN"] = tools.wspipe
        env["WSPIPE_BEARER"] = nil
        env["FEED_TOKEN_FILE"] = nil
        for (key, value) in environment { env[key] = value }

        let process = Process()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        process.environment = env
        process.currentDirectoryURL = URL(fileURLWithPath: directory)
        process.standardInput = FileHandle.nullDevice
        process.standardOutput = out
        process.standardError = err
        try process.run()
        let deadline = Date().addingTimeInterval(timeout)
        while process.isRunning && Date() < deadline { usleep(20_000) }
        let timedOut = process.isRunning
        if timedOut {
            process.terminate()
        }
        process.waitUntilExit()
        try out.close()
        try err.close()
        let stdout = (try? String(contentsOfFile: outPath, encoding: .utf8)) ?? ""
        var stderr = (try? String(contentsOfFile: errPath, encoding: .utf8)) ?? ""
        if timedOut { stderr += "\n[test: killed after \(timeout) s]\n" }
        let command = ([executable] + arguments).joined(separator: " ")
        return Result(status: timedOut ? -1 : process.terminationStatus, stdout: stdout, stderr: stderr, command: command)
    }
}
