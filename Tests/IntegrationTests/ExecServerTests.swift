// wspipe -l --exec/--sh: a program per client, driven by our own client.
import Foundation
import Glibc
import TestSupport
import XCTest

final class ExecServerTests: IntegrationTestCase {
    /// Starts `wspipe -l 0 ARGS` and reads the port from its `listening on` line.
    func serve(_ arguments: [String]) throws -> (ChildProcess, Int) {
        let child = try spawnWspipe(["-l", "127.0.0.1:0"] + arguments, stdin: .null)
        guard let text = child.stderr.waitForLine(startingWith: "wspipe: listening on ws://127.0.0.1:", timeout: 15),
              let port = Int(text.split(separator: ":").last?.split(separator: "/").first ?? "") else {
            throw HarnessError("no listening line; stderr: \(child.stderr.text)")
        }
        return (child, port)
    }

    func script(_ name: String, _ body: String) throws -> String {
        let file = path(name)
        try ("#!/bin/sh\n" + body + "\n").write(toFile: file, atomically: true, encoding: .utf8)
        chmod(file, 0o755)
        return file
    }

    func testCountFeedToOurClient() throws {
        let (server, port) = try serve(["--exec", Locations.packageRoot + "/examples/count.sh"])
        let result = try runWspipe(["--no-close", "ws://127.0.0.1:\(port)/?n=3"], stdin: .null)
        assertExit(result, 0)
        XCTAssertEqual(result.stdoutText.split(separator: "\n").count, 3, "\(result)")
        XCTAssertTrue(result.stdoutText.hasPrefix(#"{"n":1,"of":3,"#), "\(result)")
        XCTAssertTrue(result.stdoutText.contains(#""client":"127.0.0.1""#), "REMOTE_ADDR reaches the program")
        server.signal(SIGTERM)
        assertExit(finish(server), 0)
    }

    func testArgumentsAfterExecAreTheProgramsAndStatusBecomes1011() throws {
        let program = try script("args.sh", #"echo "$#:$1:$2"; echo "to stderr" >&2; exit 3"#)
        let (server, port) = try serve(["--exec", program, "-n", "--x y"])
        let result = try runWspipe(["--no-close", "ws://127.0.0.1:\(port)/"], stdin: .null)
        assertExit(result, 8)
        assertStdout(result, "2:-n:--x y\n")
        XCTAssertTrue(result.stderr.contains("1011") && result.stderr.contains("exit status 3"), result.stderr)
        server.signal(SIGTERM)
        let ended = finish(server)
        assertExit(ended, 0)
        XCTAssertTrue(ended.stderr.contains("wspipe: client 1: to stderr"), ended.stderr)
    }

    func testMissingProgramFailsBeforeListening() throws {
        let result = try runWspipe(["-l", "127.0.0.1:0", "--exec", path("nothing-here")])
        assertExit(result, 1)
        XCTAssertFalse(result.stderr.contains("listening on"), result.stderr)
        XCTAssertEqual(result.stderr, "wspipe: cannot run '\(path("nothing-here"))': No such file or directory\n")
    }

    func testFullPoolRefusesWith503() throws {
        let (server, port) = try serve(["--max-children", "1", "--sh", "echo ready; exec sleep 100"])
        let first = try spawnWspipe(["--no-close", "ws://127.0.0.1:\(port)/"], stdin: .null)
        XCTAssertNotNil(first.stdout.waitForLine(startingWith: "ready", timeout: 10))
        let second = try runWspipe(["ws://127.0.0.1:\(port)/"], stdin: .null)
        assertExit(second, 5)
        XCTAssertTrue(second.stderr.contains("503"), second.stderr)
        server.signal(SIGTERM)
        assertExit(finish(server), 0)
        first.kill()
        _ = finish(first)
    }

    func testShutdownEndsEveryProgramGroup() throws {
        // The program and its grandchild ignore SIGTERM: the grace, then SIGKILL.
        let program = try script("stubborn.sh", "trap '' TERM; sleep 100 & echo $$ $!; while :; do sleep 1; done")
        let (server, port) = try serve(["--close-grace", "0.3", "--exec", program])
        let client = try spawnWspipe(["--no-close", "ws://127.0.0.1:\(port)/"], stdin: .null)
        let line = try XCTUnwrap(client.stdout.waitForLine(startingWith: "", timeout: 10))
        let pids = line.split(separator: " ").compactMap { pid_t($0.trimmingCharacters(in: .whitespacesAndNewlines)) }
        XCTAssertEqual(pids.count, 2, line)
        server.signal(SIGTERM)
        let ended = finish(server, timeout: 10)
        assertExit(ended, 0)
        XCTAssertLessThan(ended.elapsed, 30)
        for pid in pids { XCTAssertNotEqual(kill(pid, 0), 0, "process \(pid) of the group is gone (\(ended.stderr))") }
        let closed = finish(client)
        XCTAssertTrue(closed.stderr.contains("1001"), closed.stderr)
    }
}
