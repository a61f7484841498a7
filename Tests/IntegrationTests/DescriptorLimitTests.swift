// RLIMIT_NOFILE: the server modes and --forward-listen raise the soft limit to the hard one
// at start, and at the limit a listener waits (the connection stays in the backlog) rather
// than spinning on a socket it cannot accept from.
import Foundation
import TestSupport
import XCTest

final class DescriptorLimitTests: IntegrationTestCase {
    /// Runs `wspipe ARGUMENTS` under /bin/sh after `limits` (ulimit arguments), killed at the end.
    private func spawnLimited(_ limits: String, _ arguments: [String]) throws -> ChildProcess {
        let quoted = ([Locations.wspipe] + arguments).map { "'\($0)'" }.joined(separator: " ")
        let child = try ChildProcess(executable: "/bin/sh", arguments: ["-c", "ulimit \(limits) && exec \(quoted)"],
                                     environment: Locations.baseEnvironment, stdin: .null)
        addTeardownBlock { child.kill() }
        return child
    }

    private func port(_ child: ChildProcess, scheme: String) throws -> Int {
        let line = child.stderr.waitForLine(startingWith: "wspipe: listening on \(scheme)://127.0.0.1:", timeout: 15)
        let after = line?.components(separatedBy: "127.0.0.1:").dropFirst().first
        guard let digits = after?.prefix(while: \.isNumber), let port = Int(digits) else {
            XCTFail("no listening line; stderr: \(child.stderr.text)")
            throw HarnessError("not listening")
        }
        return port
    }

    /// `count` TCP connections to `port`, held open until the holder's stdin ends.
    private func hold(_ count: Int, port: Int) throws -> ChildProcess {
        let holder = try ChildProcess(executable: Locations.python,
                                      arguments: ["\(Locations.peers)/tcp_clients.py", "--port", "\(port)", "hold", "--count", "\(count)"],
                                      environment: Locations.baseEnvironment, stdin: .pipe)
        addTeardownBlock { holder.kill() }
        XCTAssertNotNil(holder.stdout.waitForLine(startingWith: "HELD \(count)", timeout: 15), holder.stderr.text)
        return holder
    }

    /// `http_client.py many PORT TARGET COUNT ARGUMENTS` to its end: stdout then stderr.
    private func requestMany(port: Int, _ target: String, _ count: Int, _ arguments: [String] = []) throws -> (stdout: String, stderr: String) {
        let many = try ChildProcess(executable: Locations.python,
                                    arguments: ["\(Locations.peers)/http_client.py", "many", String(port), target, "\(count)"] + arguments,
                                    environment: Locations.baseEnvironment, stdin: .null)
        addTeardownBlock { many.kill() }
        let result = many.wait(timeout: 30)
        return (result.stdoutText, result.stderr)
    }

    /// The soft and hard "Max open files" of a process, from /proc/PID/limits.
    private func openFilesLimits(_ pid: pid_t) throws -> (soft: String, hard: String) {
        let text = try String(contentsOfFile: "/proc/\(pid)/limits", encoding: .utf8)
        let line = try XCTUnwrap(text.split(separator: "\n").first { $0.hasPrefix("Max open files") })
        let fields = line.dropFirst("Max open files".count).split(separator: " ")
        return (String(fields[0]), String(fields[1]))
    }

    /// Starts `wspipe -v ARGUMENTS` with a soft limit of 128 and checks it runs with the hard one.
    private func assertRaisesTheSoftLimit(_ arguments: [String], scheme: String, file: StaticString = #filePath, line: UInt = #line) throws {
        let hard = try openFilesLimits(getpid()).hard
        guard let hardLimit = Int(hard), hardLimit > 200 else { throw XCTSkip("the hard limit (\(hard)) leaves no room to lower the soft one") }
        let child = try spawnLimited("-Sn 128", ["-v"] + arguments)
        _ = try port(child, scheme: scheme)
        XCTAssertEqual(try openFilesLimits(child.pid).soft, hard, file: file, line: line)
        XCTAssertTrue(child.stderr.text.contains("wspipe: * descriptor limit (RLIMIT_NOFILE) raised from 128 to \(hard)"),
                      child.stderr.text, file: file, line: line)
    }

    func testTheServerRaisesTheSoftLimitToTheHardOne() throws {
        try assertRaisesTheSoftLimit(["-l", "0", "--echo"], scheme: "ws")
    }

    func testForwardListenRaisesTheSoftLimitToTheHardOne() throws {
        try assertRaisesTheSoftLimit(["--forward-listen", "0", "ws://127.0.0.1:9/"], scheme: "tcp")
    }

    func testAtTheLimitTheListenerWaitsInsteadOfSpinningAndServesAgainAfter() throws {
        // 32 descriptors in all, soft and hard: 60 held connections leave some in the backlog.
        let server = try spawnLimited("-n 32", ["-l", "0", "--echo", "--handshake-timeout", "30"])
        let port = try port(server, scheme: "ws")
        let holder = try hold(60, port: port)
        let before = try cpuSeconds(server.pid)
        Thread.sleep(forTimeInterval: 2)
        let spent = try cpuSeconds(server.pid) - before
        // Spinning on the listening socket would take all of the 2 s; the 100 ms pauses take a few ms.
        XCTAssertLessThan(spent, 0.5, "the server used \(spent) s of CPU in 2 s at its descriptor limit")
        holder.closeStdin()
        _ = holder.wait(timeout: 10)
        let client = try runWspipe(["-n", "1", "ws://127.0.0.1:\(port)/"], stdin: .bytes(Array("after\n".utf8)))
        assertExit(client, 0)
        assertStdout(client, "after\n")
    }

    /// Out of descriptors, an accepted connection waits for one to dial with (it was reset,
    /// and so were most of the 60) and accepting pauses, without spinning; every connection
    /// is forwarded once descriptors are free again.
    func testForwardListenAtTheLimitWaitsInsteadOfSpinningAndForwardsAgainAfter() throws {
        let peer = try startPython("fwd_echo.py", [])
        let forwarder = try spawnLimited("-n 32", ["-v", "--forward-listen", "0", "--no-deflate", "ws://127.0.0.1:\(peer.port)/"])
        let port = try port(forwarder, scheme: "tcp")
        let holder = try hold(60, port: port)
        XCTAssertTrue(forwarder.stderr.wait(timeout: 5) { String(decoding: $0, as: UTF8.self).contains(
            "no descriptor left to open its WebSocket: it waits for one (up to 10 s), accepting paused") }, forwarder.stderr.text)
        Thread.sleep(forTimeInterval: 0.5)  // the openings that find descriptors are done
        let before = try cpuSeconds(forwarder.pid)
        Thread.sleep(forTimeInterval: 2)
        let spent = try cpuSeconds(forwarder.pid) - before
        XCTAssertLessThan(spent, 0.5, "--forward-listen used \(spent) s of CPU in 2 s at its descriptor limit")
        holder.closeStdin()
        _ = holder.wait(timeout: 10)
        let clients = try ChildProcess(executable: Locations.python,
                                       arguments: ["\(Locations.peers)/tcp_clients.py", "--port", "\(port)", "echo", "--count", "3",
                                                   "--bytes", "10000", "--timeout", "20"],
                                       environment: Locations.baseEnvironment, stdin: .null)
        addTeardownBlock { clients.kill() }
        let result = clients.wait(timeout: 40)
        XCTAssertEqual(result.stdoutText.split(separator: "\n").last, "DONE ok=3", "\(result)\n\(forwarder.stderr.text)")
        // The 60 held (by now closed) and the 3 echoed were each forwarded; none was reset.
        let forwardedAll = forwarder.stderr.wait(timeout: 10) {
            String(decoding: $0, as: UTF8.self).components(separatedBy: "] connected: ws://").count - 1 == 63
        }
        XCTAssertTrue(forwardedAll, forwarder.stderr.text)
        XCTAssertFalse(forwarder.stderr.text.contains("reset:"), forwarder.stderr.text)
        // -v shows a waiting connection's failed dial once, not at every try (10 a second),
        // and the dial and handshake of the try that opened it.
        let log = forwarder.stderr.text
        let waited = log.components(separatedBy: "no descriptor left to open its WebSocket").count - 1
        XCTAssertGreaterThan(waited, 0, log)
        XCTAssertEqual(log.components(separatedBy: ": Too many open files").count - 1, waited, log)
        XCTAssertEqual(log.components(separatedBy: " GET / HTTP/1.1").count - 1, 63, log)
        XCTAssertEqual(log.components(separatedBy: "] connected to 127.0.0.1:").count - 1, 63, log)
    }

    /// A connection that finds no descriptor within the connect timeout is reset, and says so.
    /// A pair takes two descriptors: of the limits 32 and 33 one leaves a single descriptor
    /// once the pairs are made, so there a connection is accepted that can never dial.
    func testForwardListenResetsAConnectionThatWaitsLongerThanTheConnectTimeout() throws {
        let peer = try startPython("fwd_echo.py", [])
        var forwarders: [ChildProcess] = []
        for limit in [32, 33] {
            let forwarder = try spawnLimited("-n \(limit)", ["-v", "--connect-timeout", "1", "--forward-listen", "0", "--no-deflate",
                                                            "ws://127.0.0.1:\(peer.port)/"])
            let port = try port(forwarder, scheme: "tcp")
            _ = try hold(30, port: port)
            forwarders.append(forwarder)
        }
        let reset = "reset: no descriptor was free within 1 s (the connect timeout)"
        let deadline = Date(timeIntervalSinceNow: 10)
        while Date() < deadline && !forwarders.contains(where: { $0.stderr.text.contains(reset) }) {
            Thread.sleep(forTimeInterval: 0.1)
        }
        XCTAssertTrue(forwarders.contains { $0.stderr.text.contains(reset) }, forwarders.map(\.stderr.text).joined(separator: "\n---\n"))
    }

    /// Out of descriptors, a file that exists is no "not found": --static answers 503 with
    /// Retry-After and closes (before, 404, which caches keep), and serves it again after.
    func testOutOfDescriptorsAnExistingFileIs503NotFound() throws {
        let root = path("www")
        try FileManager.default.createDirectory(atPath: root, withIntermediateDirectories: true)
        try Data("hello\n".utf8).write(to: URL(fileURLWithPath: root + "/a.txt"))
        let server = try spawnLimited("-n 40", ["-l", "0", "--echo", "--static", root, "--handshake-timeout", "30"])
        let port = try port(server, scheme: "ws")
        let result = try requestMany(port: port, "/a.txt", 60)
        XCTAssertTrue(result.stdout.contains("\"503\""), result.stdout + result.stderr)
        XCTAssertFalse(result.stdout.contains("\"404\""), result.stdout)
        XCTAssertEqual(try requestMany(port: port, "/a.txt", 1).stdout, "{\"statuses\": {\"200\": 1}}\n")
    }

    /// The same for --dir: out of descriptors, a program that exists is 503, not 404.
    func testOutOfDescriptorsAnExistingProgramIs503NotFound() throws {
        let programs = path("scripts")
        try FileManager.default.createDirectory(atPath: programs, withIntermediateDirectories: true)
        try Data("#!/bin/sh\nsleep 20\n".utf8).write(to: URL(fileURLWithPath: programs + "/wait"))
        chmod(programs + "/wait", 0o755)
        let server = try spawnLimited("-n 40", ["-l", "0", "--dir", programs, "--handshake-timeout", "30"])
        let port = try port(server, scheme: "ws")
        let result = try requestMany(port: port, "/wait", 60, ["--upgrade"])
        XCTAssertTrue(result.stdout.contains("\"503\""), result.stdout + result.stderr)
        XCTAssertFalse(result.stdout.contains("\"404\""), result.stdout)
    }

    /// The gateway out of descriptors: a client it cannot dial the target for is answered 503
    /// (this server is short, the target is not at fault), not 502. A relay takes two
    /// descriptors: of the limits 40 and 41 one leaves a single one once the relays are made.
    func testForwardOutOfDescriptorsIs503NotBadGateway() throws {
        let echo = try startPeer(executable: Locations.python, arguments: ["\(Locations.peers)/tcp_clients.py", "--port", "0", "serve-echo"])
        var outputs: [String] = []
        for limit in [40, 41] {
            let server = try spawnLimited("-n \(limit)", ["-l", "0", "--forward", "tcp:127.0.0.1:\(echo.port)", "--handshake-timeout", "30"])
            let port = try port(server, scheme: "ws")
            let result = try requestMany(port: port, "/", 40, ["--upgrade"])
            outputs.append(result.stdout + result.stderr)
        }
        XCTAssertTrue(outputs.contains { $0.contains("\"503\"") }, outputs.joined(separator: "\n"))
        XCTAssertFalse(outputs.contains { $0.contains("\"502\"") }, outputs.joined(separator: "\n"))
    }
}
