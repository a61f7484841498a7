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

    /// A server flooding tiny messages (`yes`) must not starve the client's stdin: the
    /// client's turn counted reads (16 of 256 KiB: 1.4 million "y" messages) and read its
    /// stdin 16.7 s late (debug build); it now delivers at most a few thousand messages a
    /// turn before stdin and timers get theirs.
    func testAFloodOfTinyMessagesDoesNotStarveTheClientsStdin() throws {
        let got = path("got")
        let (server, port) = try serve(["--sh", "yes & IFS= read -r line; printf '%s\\n' \"$line\" > '\(got)'; wait"])
        let client = try spawnWspipe(["-v", "ws://127.0.0.1:\(port)/"], stdin: .pipe, stdoutFile: "/dev/null")
        XCTAssertNotNil(client.stderr.waitForLine(startingWith: "wspipe: < HTTP/1.1 101", timeout: 15), client.stderr.text)
        // A backlog for the client: stopped, it reads nothing while the flood fills the
        // socket's buffers and the server's queue, so its reads come full when it goes on.
        client.signal(SIGSTOP)
        usleep(1_000_000)
        XCTAssertTrue(client.writeStdin(Array("hello\n".utf8)))
        client.closeStdin()
        let start = monotonicSeconds()
        client.signal(SIGCONT)
        var line = ""
        while monotonicSeconds() - start < 20 {
            line = (try? String(contentsOfFile: got, encoding: .utf8)) ?? ""
            if line.hasSuffix("\n") { break }
            usleep(10_000)
        }
        let waited = monotonicSeconds() - start
        XCTAssertEqual(line, "hello\n", client.stderr.text)
        XCTAssertLessThan(waited, 2, "the line reached the server \(waited) s after stdin had it")
        client.kill()
        server.signal(SIGTERM)
        _ = finish(server)
    }

    func testCountFeedToOurClient() throws {
        let (server, port) = try serve(["--exec", Locations.packageRoot + "/examples/count.sh"])
        let result = try runWspipe(["--no-close", "ws://127.0.0.1:\(port)/?n=3"], stdin: .null)
        assertExit(result, 0)
        XCTAssertEqual(result.stdoutText.split(separator: "\n").count, 3, "\(result)")
        XCTAssertTrue(result.stdoutText.hasPrefix(#"{"n":1,"of":3,"#), "\(result)")
        XCTAssertTrue(result.stdoutText.contains(#""client":"127.0.0.1""#), "REMOTE_ADDR reaches the program")
        server.signal(SIGTERM)
        assertDiedOf(finish(server), SIGTERM)
    }

    /// A program printing empty lines to a client that does not read: each line is an empty
    /// message, which weighed nothing in the connection's queue, so the server kept reading
    /// the program and grew by about 1.2 GB per client (found by a helper). The queue now
    /// counts each waiting message's entry, and the program blocks in write.
    func testEmptyLinesToAClientThatDoesNotReadKeepTheServerSmall() throws {
        let (server, port) = try serve(["--sh", "exec yes ''"])
        let fd = try stalledClient(port)
        usleep(3_000_000)
        let peak = peakRSSKiB(of: server.pid) ?? 0
        close(fd)
        XCTAssertGreaterThan(peak, 0, "the server is gone: \(server.stderr.text)")
        XCTAssertLessThan(peak, 96 * 1024, "server peak RSS \(mebibytes(peak)) with one client that does not read")
        server.signal(SIGTERM)
        _ = finish(server)
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
        assertDiedOf(ended, SIGTERM)
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
        assertDiedOf(finish(server), SIGTERM)
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
        assertDiedOf(ended, SIGTERM)
        XCTAssertLessThan(ended.elapsed, 30)
        for pid in pids { XCTAssertNotEqual(kill(pid, 0), 0, "process \(pid) of the group is gone (\(ended.stderr))") }
        let closed = finish(client)
        XCTAssertTrue(closed.stderr.contains("1001"), closed.stderr)
    }

    // MARK: - The program's ending is the connection's (issue 19 item 1)

    /// The client's Close came right after its lines: the program's replies to them used to
    /// be dropped (0-1 of 3 lines), its Close answered at once and the program signalled.
    func testRepliesAfterTheClientsCloseReachIt() throws {
        let program = try script("upper.sh", #"echo hello; while read -r line; do printf '%s\n' "$line" | tr a-z A-Z; done"#)
        let (server, port) = try serve(["--exec", program])
        try assertEveryRun(port: port, input: "abc\ndef\n", gives: "hello\nABC\nDEF\n")
        server.signal(SIGTERM)
        assertDiedOf(finish(server), SIGTERM)
    }

    func testRepliesOfAFilterAfterTheClientsCloseReachIt() throws {
        let (server, port) = try serve(["--sh", "jq -c --unbuffered ."])
        try assertEveryRun(port: port, input: "{\"a\": 1}\n[2]\n", gives: "{\"a\":1}\n[2]\n")
        server.signal(SIGTERM)
        assertDiedOf(finish(server), SIGTERM)
    }

    /// 50 clients one after the other, each ending at stdin EOF: every one gets the whole reply.
    private func assertEveryRun(port: Int, input: String, gives expected: String, runs: Int = 50,
                                file: StaticString = #filePath, line: UInt = #line) throws {
        let started = Date()
        var lost: [String] = []
        for run in 1...runs {
            let result = try runWspipe(["ws://127.0.0.1:\(port)/"], stdin: .bytes(Array(input.utf8)), timeout: 10)
            if result.exitCode != 0 || result.stdoutText != expected { lost.append("run \(run): \(result)") }
        }
        XCTAssertEqual(lost, [], "\(lost.count) of \(runs) runs", file: file, line: line)
        XCTAssertLessThan(Date().timeIntervalSince(started), 60, "each run ends as the program does", file: file, line: line)
    }

    /// The client's Close is answered with what the program's status says, after its output.
    func testTheClientsExitStatusFollowsTheProgramsAfterItClosed() throws {
        let (server, port) = try serve(["--sh", "read -r line; echo \"got $line\"; exit 3"])
        let result = try runWspipe(["ws://127.0.0.1:\(port)/"], stdin: .bytes(Array("x\n".utf8)))
        assertExit(result, 8)
        assertStdout(result, "got x\n")
        assertStderr(result, contains: #"closed the connection with 1011 (internal error) "exit status 3""#)
        server.signal(SIGTERM)
        assertDiedOf(finish(server), SIGTERM)
    }

    /// A client that half-closes TCP right after its Close (it said all, it still reads):
    /// the end of its stream came while the program still owed its replies and the answer,
    /// and the connection ended without either (no Close at all: the old echo at least
    /// answered).
    func testAClientThatHalfClosesAfterItsCloseStillGetsTheRepliesAndTheAnswer() throws {
        let (server, port) = try serve(["--sh", "echo hi; while read -r line; do sleep 0.1; echo \"got $line\"; done; exit 3"])
        let child = try ChildProcess(executable: Locations.python,
                                     arguments: ["\(Locations.peers)/server_client.py", "halfclose", String(port), "one", "two"],
                                     environment: Locations.baseEnvironment, stdin: .null)
        let result = finish(child, timeout: 30)
        XCTAssertEqual(result.stdoutText, "text:hi\ntext:got one\ntext:got two\nclose 1011 exit status 3\n", "\(result)")
        server.signal(SIGTERM)
        assertDiedOf(finish(server), SIGTERM)
    }

    /// A client floods a program that never reads its stdin, so the server stops reading the
    /// client, then resets its connection: the program must be ended. The reset used to
    /// stop between the connection's driver and the program's bridge, so the program ran on
    /// for ever and kept its --max-children slot. With and without a per-client limit (the
    /// two ways a driver's events reach the bridge).
    func testAClientThatResetsWhileItsProgramDoesNotReadEndsTheProgram() throws {
        for limit in [[], ["--idle-timeout", "60"]] {
            let pidFile = path("program-\(limit.count).pid")
            let (server, port) = try serve(limit + ["--close-grace", "0.3", "--sh", "echo $$ > \(pidFile); exec sleep 100"])
            let fd = try stalledClient(port)
            // Masked (zero key) binary frames of 64 KiB until the socket has taken nothing for 0.5 s.
            let frame: [UInt8] = [0x82, 0xFF, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0] + [UInt8](repeating: 0x61, count: 65536)
            var offset = 0
            var lastProgress = Date()
            while Date().timeIntervalSince(lastProgress) < 0.5 {
                let n = frame.withUnsafeBytes { send(fd, $0.baseAddress! + offset, frame.count - offset, Int32(MSG_DONTWAIT | MSG_NOSIGNAL)) }
                if n > 0 {
                    offset = (offset + n) % frame.count
                    lastProgress = Date()
                } else {
                    usleep(20_000)
                }
            }
            let text = try XCTUnwrap(waitForFile(pidFile), "the program did not start: \(server.stderr.text)")
            let pid = try XCTUnwrap(pid_t(text.trimmingCharacters(in: .whitespacesAndNewlines)))
            var reset = linger(l_onoff: 1, l_linger: 0)
            setsockopt(fd, SOL_SOCKET, SO_LINGER, &reset, socklen_t(MemoryLayout<linger>.size))
            close(fd)
            let deadline = Date().addingTimeInterval(10)
            while kill(pid, 0) == 0 && Date() < deadline { usleep(50_000) }
            XCTAssertNotEqual(kill(pid, 0), 0, "the program \(pid) runs on after its client's reset (\(limit))")
            if kill(pid, 0) == 0 { kill(pid, SIGKILL) }
            server.signal(SIGTERM)
            _ = finish(server)
        }
    }

    /// The text of `file` once it has some, within 10 s.
    private func waitForFile(_ file: String) -> String? {
        let deadline = Date().addingTimeInterval(10)
        while Date() < deadline {
            if let text = try? String(contentsOfFile: file, encoding: .utf8), text.hasSuffix("\n") { return text }
            usleep(20_000)
        }
        return nil
    }

    /// A program that outlives the grace after the client's Close: 1011 "program did not
    /// exit" at the grace, then its group is signalled as before.
    func testAProgramThatDoesNotExitIsAnsweredAtTheGrace() throws {
        let (server, port) = try serve(["--close-grace", "0.5", "--sh", "trap '' TERM; echo start; exec sleep 30"])
        let result = try runWspipe(["ws://127.0.0.1:\(port)/"], stdin: .bytes(Array("x\n".utf8)))
        assertExit(result, 8)
        assertStdout(result, "start\n")
        assertStderr(result, contains: #"1011 (internal error) "program did not exit""#)
        XCTAssertGreaterThan(result.elapsed, 0.4, "the program had its grace")
        XCTAssertLessThan(result.elapsed, 5, "and no more")
        server.signal(SIGTERM)
        assertDiedOf(finish(server, timeout: 10), SIGTERM)
    }
}
