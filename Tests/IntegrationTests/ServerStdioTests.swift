// wspipe -l without a mode: stdin and stdout bridged to one client at a time (websocat -s),
// driven by Python `websockets`, websocat and our own client; every wait bounded.
import Foundation
import Glibc
import TestSupport
import XCTest

final class ServerStdioTests: IntegrationTestCase {
    /// Starts `wspipe -l 0 -v ARGS` with a stdin pipe the test writes; returns it and its port.
    func startStdioServer(_ arguments: [String], file: StaticString = #filePath, line: UInt = #line) throws -> (ChildProcess, Int) {
        let child = try spawnWspipe(["-l", "0", "-v"] + arguments, stdin: .pipe)
        guard let port = listeningPort(child) else {
            XCTFail("no listening line; stderr: \(child.stderr.text)", file: file, line: line)
            throw HarnessError("server did not start")
        }
        return (child, port)
    }

    /// The port of a server's `listening on` line (nil when none came within 15 s).
    func listeningPort(_ child: ChildProcess) -> Int? {
        let text = child.stderr.waitForLine(startingWith: "wspipe: listening on ws://127.0.0.1:", timeout: 15)
        return text.flatMap { Int($0.split(separator: ":").last?.split(separator: "/").first ?? "") }
    }

    func pythonClient(_ arguments: [String]) throws -> ChildProcess {
        try ChildProcess(executable: Locations.python, arguments: ["\(Locations.peers)/stdio_client.py"] + arguments,
                         environment: Locations.baseEnvironment, stdin: .null)
    }

    func waitForClient(_ server: ChildProcess, _ n: Int, file: StaticString = #filePath, line: UInt = #line) {
        XCTAssertNotNil(server.stderr.waitForLine(startingWith: "wspipe: * client \(n) connected", timeout: 15),
                        "client \(n) never connected: \(server.stderr.text)", file: file, line: line)
    }

    func lines(_ from: Int, _ to: Int) -> String { (from...to).map { "\($0)\n" }.joined() }

    /// Client 1 (Python) takes lines 1-5 and leaves; client 2 (ours, -n) takes 6-10; client 3
    /// (websocat) gets 11-15 and the Close at stdin EOF (websocat closes TCP without answering
    /// it: told by -v, not in the exit status); the server then exits 0. Every line
    /// reaches exactly one client, and what the clients send reaches stdout.
    func testStdinMovesFromClientToClientWithNothingLostOrRepeated() throws {
        let (server, port) = try startStdioServer([])
        let url = "ws://127.0.0.1:\(port)/"
        server.writeStdin(lines(1, 5))
        let first = finish(try pythonClient(["take", url, "5"]), timeout: 30)
        XCTAssertEqual(first.stdoutText, (1...5).map { "got \($0)\n" }.joined() + "closed 1000\n", "\(first)")

        let second = try spawnWspipe(["-n", "5", "ws://127.0.0.1:\(port)/"], stdin: .bytes(Array("from ours\n".utf8)))
        XCTAssertTrue(server.stdout.wait(timeout: 15) { String(decoding: $0, as: UTF8.self).contains("from ours\n") })
        server.writeStdin(lines(6, 10))  // after: with its count reached, our client reads no more stdin
        let ours = finish(second, timeout: 20)
        assertExit(ours, 0)
        assertStdout(ours, lines(6, 10))

        let third = try ChildProcess(executable: Locations.websocat, arguments: ["-t", "-n", url],
                                     environment: Locations.baseEnvironment, stdin: .bytes(Array("from websocat\n".utf8)))
        waitForClient(server, 3)
        XCTAssertTrue(server.stdout.wait(timeout: 10) { String(decoding: $0, as: UTF8.self).contains("from websocat\n") })
        server.writeStdin(lines(11, 15))
        server.closeStdin()
        let result = finish(server, timeout: 20)
        assertExit(result, 0)
        let websocat = finish(third, timeout: 10)
        XCTAssertEqual(websocat.stdoutText, lines(11, 15), "\(websocat)")
        assertStderr(result, contains: "client 3 disconnected")
        XCTAssertTrue(result.stdoutText.hasPrefix("from ours\nfrom websocat\n"), result.stdoutText)  // websocat adds an empty message at its EOF
    }

    /// stdin streams (a file: always ready) to a client that reads 1000 lines and leaves;
    /// what it was sent is its own (in its socket, unread), and the rest of stdin goes to the
    /// next client: contiguous up to the last line, none of the first client's first 1000.
    func testManyLinesSplitBetweenTwoClients() throws {
        let total = 200_000  // 20 MB: more than loopback socket buffers hold for client 1
        let input = path("numbers")
        let pad = String(repeating: "x", count: 92)
        try Data((1...total).map { "\($0) \(pad)\n" }.joined().utf8).write(to: URL(fileURLWithPath: input))
        let server = try spawnWspipe(["-l", "0", "-v"], stdin: .file(input))
        guard let port = listeningPort(server) else {
            return XCTFail("no listening line: \(server.stderr.text)")
        }
        let first = finish(try pythonClient(["take", "ws://127.0.0.1:\(port)/", "1000"]), timeout: 30)
        XCTAssertTrue(first.stdoutText.hasPrefix((1...1000).map { "got \($0) \(pad)\n" }.joined() + "closed "), "\(first)")
        let second = try runWspipe(["--receive-only", "ws://127.0.0.1:\(port)/"], timeout: 60)
        assertExit(second, 0)
        assertExit(finish(server, timeout: 20), 0)
        let numbers = second.stdoutText.split(separator: "\n").compactMap { $0.split(separator: " ").first.flatMap { Int($0) } }
        XCTAssertEqual(numbers.last, total)
        XCTAssertEqual(numbers, Array((numbers.first ?? 0)...total))
        XCTAssertGreaterThan(numbers.first ?? 0, 1000)
    }

    func testOneshotExitsWithTheClientsStatus() throws {
        var (server, port) = try startStdioServer(["--oneshot"])
        let gone = finish(try pythonClient(["take", "ws://127.0.0.1:\(port)/", "0", "4001"]), timeout: 30)
        XCTAssertEqual(gone.stdoutText, "closed 4001\n")
        let result = finish(server, timeout: 20)
        assertExit(result, 8)
        assertStderr(result, contains: "the client closed the connection with 4001")

        (server, port) = try startStdioServer(["--oneshot", "--close-code", "4000", "--close-reason", "bye"])
        server.writeStdin("only\n")
        let client = try spawnWspipe(["--receive-only", "ws://127.0.0.1:\(port)/"], stdin: .null)
        waitForClient(server, 1)
        server.closeStdin()
        let ours = finish(client, timeout: 20)
        assertExit(ours, 8)  // our client: the server closed with 4000
        assertStdout(ours, "only\n")
        assertStderr(ours, contains: "4000")
        assertExit(finish(server, timeout: 20), 0)  // it answered with the same code: as the client would
    }

    /// --oneshot names the client in its line by role; the client's Close reason is its own
    /// words, printed as sent (a string replacement of "the server" once rewrote it too).
    func testOneshotNamesTheClientAndKeepsItsReason() throws {
        let (server, port) = try startStdioServer(["--oneshot"])
        let client = try runWspipe(["--close-code", "4002", "--close-reason", "the server is slow", "ws://127.0.0.1:\(port)/"],
                                   stdin: .null)
        assertExit(client, 0)  // its own code echoed
        let result = finish(server, timeout: 20)
        assertExit(result, 8)
        assertStderr(result, contains: "wspipe: the client closed the connection with 4002 (private application code) \"the server is slow\"\n")
    }

    func testCountSendAndIdleTimeoutPerClient() throws {
        let (server, port) = try startStdioServer(["-n", "2", "--send", "hello", "--idle-timeout", "1"])
        let url = "ws://127.0.0.1:\(port)/"
        let counted = finish(try pythonClient(["wait", url, "a", "b", "c"]), timeout: 30)
        XCTAssertTrue(counted.stdoutText.hasPrefix("got hello\nclosed 1000 after "), "\(counted)")
        let idle = finish(try pythonClient(["wait", url]), timeout: 30)
        let lines = idle.stdoutText.split(separator: "\n")
        XCTAssertEqual(lines.first, "got hello", "\(idle)")
        let seconds = Double(lines.last?.split(separator: " ").last ?? "") ?? 0
        XCTAssertTrue(lines.last?.hasPrefix("closed 1000 after ") == true && seconds >= 0.9 && seconds < 5, "\(idle)")
        server.signal(SIGTERM)
        let result = finish(server, timeout: 20)
        assertDiedOf(result, SIGTERM)
        XCTAssertEqual(result.stdoutText, "a\nb\n", "the third message came after -n's count")
    }

    /// -n counts each client's messages from 0 (the session's limits span a connection): the
    /// second client's one message is under the count, so idleness closes it, not -n.
    func testTheCountStartsAgainForEachClient() throws {
        let (server, port) = try startStdioServer(["-n", "2", "--idle-timeout", "1"])
        let url = "ws://127.0.0.1:\(port)/"
        let first = finish(try pythonClient(["wait", url, "a", "b", "c"]), timeout: 30)
        XCTAssertTrue(first.stdoutText.hasPrefix("closed 1000 after "), "\(first)")
        let second = finish(try pythonClient(["wait", url, "d"]), timeout: 30)
        let seconds = Double(second.stdoutText.split(separator: " ").last?.trimmingCharacters(in: .whitespacesAndNewlines) ?? "") ?? 0
        XCTAssertTrue(second.stdoutText.hasPrefix("closed 1000 after ") && seconds >= 0.9 && seconds < 5,
                      "the idle timeout closed it, not the first client's count: \(second)")
        server.signal(SIGTERM)
        let result = finish(server, timeout: 20)
        assertDiedOf(result, SIGTERM)
        XCTAssertEqual(result.stdoutText, "a\nb\nd\n")
    }

    func testOneStdinMessagePerClientWithOneMessage() throws {
        let (server, port) = try startStdioServer(["-1"])
        server.writeStdin("q1\nq2\nq3\n")  // one read: -1 keeps what follows for the next clients
        for n in 1...3 {
            let client = try runWspipe(["--no-close", "ws://127.0.0.1:\(port)/"], stdin: .bytes(Array("r\(n)\n".utf8)))
            assertExit(client, 0)
            assertStdout(client, "q\(n)\n")
        }
        server.signal(SIGINT)
        let result = finish(server, timeout: 20)
        assertDiedOf(result, SIGINT)
        XCTAssertEqual(result.stdoutText, "r1\nr2\nr3\n")
    }

    /// Issue 35 item 9: `printf 'q1\nq2\nq3\n' | wspipe -l ... -1` exits after the client that
    /// got the last line (it kept serving: a fourth client got nothing, and it never ended).
    func testOneMessagePerClientEndsWhenStdinIsUsedUp() throws {
        let server = try spawnWspipe(["-l", "0", "-1"], stdin: .bytes(Array("q1\nq2\nq3\n".utf8)))
        guard let port = listeningPort(server) else { return XCTFail("no listening line: \(server.stderr.text)") }
        for n in 1...3 {
            let client = try runWspipe(["--no-close", "ws://127.0.0.1:\(port)/"], stdin: .bytes(Array("r\(n)\n".utf8)))
            assertExit(client, 0)
            assertStdout(client, "q\(n)\n")
        }
        let result = finish(server, timeout: 10)
        assertExit(result, 0)
        XCTAssertEqual(result.stdoutText, "r1\nr2\nr3\n")
        XCTAssertLessThan(result.elapsed, 9, "ended by itself, not killed")
    }

    func testJSONLinesWithEvents() throws {
        let (server, port) = try startStdioServer(["--jsonl"])
        server.writeStdin(#"{"type":"text","data":"hi"}"# + "\n" + #"{"type":"binary","base64":"AAE="}"# + "\n")
        let client = try pythonClient(["wait", "ws://127.0.0.1:\(port)/path", "yo"])
        XCTAssertTrue(server.stdout.wait(timeout: 15) { String(decoding: $0, as: UTF8.self).contains(#""data":"yo""#) })
        server.closeStdin()
        let python = finish(client, timeout: 20)
        XCTAssertTrue(python.stdoutText.hasPrefix("got hi\ngot b'\\x00\\x01'\nclosed 1000 after "), "\(python)")
        let result = finish(server, timeout: 20)
        assertExit(result, 0)
        let lines = result.stdoutText.split(separator: "\n").map(String.init)
        XCTAssertEqual(lines.count, 4, result.stdoutText)
        XCTAssertTrue(lines[0].hasPrefix(#"{"type":"connected","client":1,"#) && lines[0].contains(#""path":"/path""#), lines[0])
        XCTAssertEqual(lines[1], #"{"type":"text","data":"yo"}"#)
        XCTAssertEqual(lines[2], #"{"type":"close","code":1000,"reason":""}"#)
        XCTAssertEqual(lines[3], #"{"type":"disconnected","client":1,"code":1000,"reason":"","cause":"closed"}"#)
    }

    /// The stdio server's events take --timestamps' "ts" as its messages do.
    func testTimestampsStampTheEvents() throws {
        let (server, port) = try startStdioServer(["--jsonl", "--timestamps"])
        let client = try pythonClient(["wait", "ws://127.0.0.1:\(port)/", "yo"])
        XCTAssertTrue(server.stdout.wait(timeout: 15) { String(decoding: $0, as: UTF8.self).contains(#""data":"yo""#) })
        server.closeStdin()
        _ = finish(client, timeout: 20)
        let result = finish(server, timeout: 20)
        assertExit(result, 0)
        let lines = result.stdoutText.split(separator: "\n").map(String.init)
        XCTAssertEqual(lines.count, 4, result.stdoutText)
        for (line, start) in zip(lines, [#"{"type":"connected","client":1,"#, #"{"type":"text","data":"yo","ts":"#,
                                         #"{"type":"close","code":1000,"#, #"{"type":"disconnected","client":1,"#]) {
            XCTAssertTrue(line.hasPrefix(start), line)
            let stamp = line.range(of: #","ts":"#).map { Double(line[$0.upperBound...].dropLast()) ?? 0 } ?? 0
            XCTAssertLessThan(abs(stamp - Date().timeIntervalSince1970), 60, line)
        }
    }

    func testEveryModeRefusesWhatItHasNoUseFor() throws {
        for (arguments, text) in [(["--echo", "--linger", "1"], "--linger has no meaning with -l/--listen --echo"),
                                  (["--broadcast", "--whole-input"], "--whole-input has no meaning with -l/--listen --broadcast"),
                                  (["-n", "1", "--exec", "cat"], "--max-messages has no meaning with -l/--listen --exec/--sh"),
                                  (["--sh", "cat", "--stats"], "--stats has no meaning with -l/--listen --exec/--sh"),
                                  (["--timestamps"], "--timestamps needs --jsonl"),
                                  (["--receive-only", "--send-only"], "nothing would be bridged"),
                                  (["--tls-min", "1.2"], "--tls-min with -l needs --cert"),
                                  (["--oneshot", "ws://127.0.0.1:1/"], "--oneshot is a server option")] {
            let result = try runWspipe((arguments.last?.hasPrefix("ws:") == true ? [] : ["-l", "0"]) + arguments)
            assertExit(result, 2)
            assertStderr(result, contains: text)
        }
    }

    /// --send, -n and --idle-timeout mean the same per client with --echo.
    func testEchoCountsAndGreetsPerClient() throws {
        let server = try spawnWspipe(["-l", "0", "--echo", "--send", "welcome", "-n", "2", "--idle-timeout", "1"], stdin: .null)
        guard let port = listeningPort(server) else {
            return XCTFail("no listening line: \(server.stderr.text)")
        }
        let counted = finish(try pythonClient(["wait", "ws://127.0.0.1:\(port)/", "a", "b", "c"]), timeout: 30)
        XCTAssertTrue(counted.stdoutText.hasPrefix("got welcome\ngot a\ngot b\nclosed 1000 after "), "\(counted)")
        let idle = finish(try pythonClient(["wait", "ws://127.0.0.1:\(port)/"]), timeout: 30)
        XCTAssertTrue(idle.stdoutText.hasPrefix("got welcome\nclosed 1000 after 1."), "\(idle)")
        server.signal(SIGTERM)
        assertDiedOf(finish(server), SIGTERM)
    }

    /// --broadcast with a stdout reader that stalls for 6 s while a client floods it: the loop
    /// is not blocked (another client connects and gets a stdin line at once), the flood waits
    /// in TCP, and every one of its lines reaches stdout once the reader reads. (Before: the
    /// loop blocked in write(2), and in a second read(2) of a stdin FIFO after each line.)
    func testBroadcastKeepsServingWhileStdoutStalls() throws {
        let flood = path("flood")
        let count = 20_000
        try Data((1...count).map { "\($0) " + String(repeating: "y", count: 1000) + "\n" }.joined().utf8)
            .write(to: URL(fileURLWithPath: flood))
        let output = path("out")
        let shell = try ChildProcess(executable: "/bin/sh",
                                     arguments: ["-c", "'\(Locations.wspipe)' -l 0 -v --broadcast | (sleep 6; cat > '\(output)')"],
                                     environment: Locations.baseEnvironment, stdin: .pipe)
        defer { shell.kill() }
        guard let port = listeningPort(shell) else {
            return XCTFail("no listening line: \(shell.stderr.text)")
        }
        let started = monotonicSeconds()
        let flooder = try spawnWspipe(["--close-timeout", "30", "ws://127.0.0.1:\(port)/"], stdin: .file(flood))
        usleep(1_000_000)  // the flood fills the stdout pipe and the 1 MiB behind it
        let listener = try spawnWspipe(["-n", "1", "--receive-only", "--close-timeout", "30", "ws://127.0.0.1:\(port)/"], stdin: .null)
        XCTAssertNotNil(shell.stderr.waitForLine(startingWith: "wspipe: * client 2 connected", timeout: 4), shell.stderr.text)
        shell.writeStdin("while stalled\n")
        XCTAssertTrue(listener.stdout.wait(timeout: 4) { String(decoding: $0, as: UTF8.self) == "while stalled\n" })
        XCTAssertLessThan(monotonicSeconds() - started, 5.5, "served while stdout was stalled")
        // Its Close is read once stdout has taken the flood (no client is read meanwhile).
        assertExit(finish(listener, timeout: 30), 0)
        assertExit(finish(flooder, timeout: 60), 0)
        shell.closeStdin()
        assertExit(finish(shell, timeout: 60), 0)
        let lines = try String(contentsOfFile: output, encoding: .utf8).split(separator: "\n")
        XCTAssertEqual(lines.count, count)
        XCTAssertEqual(lines.last?.split(separator: " ").first, "\(count)")
    }

    /// --broadcast: --close-code/--close-reason at stdin EOF; --no-close keeps the clients
    /// after it; --oneshot ends with the one client's status (echo too).
    func testBroadcastEndingsAndOneshot() throws {
        var server = try spawnWspipe(["-l", "0", "--broadcast", "--close-code", "4000", "--close-reason", "bye"], stdin: .pipe)
        guard var port = listeningPort(server) else { return XCTFail("no listening line: \(server.stderr.text)") }
        var client = try pythonClient(["wait", "ws://127.0.0.1:\(port)/", "hi"])
        XCTAssertTrue(server.stdout.wait(timeout: 15) { String(decoding: $0, as: UTF8.self) == "hi\n" })
        server.writeStdin("all\n")
        server.closeStdin()
        XCTAssertTrue(finish(client, timeout: 20).stdoutText.hasPrefix("got all\nclosed 4000 after "))
        assertExit(finish(server), 0)

        server = try spawnWspipe(["-l", "0", "-v", "--broadcast", "--no-close", "--send-only"], stdin: .pipe)
        guard let noClosePort = listeningPort(server) else { return XCTFail("no listening line: \(server.stderr.text)") }
        client = try pythonClient(["wait", "ws://127.0.0.1:\(noClosePort)/", "not printed"])
        XCTAssertNotNil(server.stderr.waitForLine(startingWith: "wspipe: * client 1 connected", timeout: 15))
        server.writeStdin("one\n")
        server.closeStdin()
        XCTAssertNotNil(server.stderr.waitForLine(startingWith: "wspipe: * end of stdin after 1 message (--no-close", timeout: 15))
        usleep(300_000)
        server.signal(SIGTERM)
        XCTAssertTrue(finish(client, timeout: 20).stdoutText.hasPrefix("got one\nclosed 1001 after "))
        let result = finish(server)
        assertDiedOf(result, SIGTERM)
        assertStdout(result, "")

        for (mode, code, status) in [("--echo", "1000", Int32(0)), ("--echo", "4001", 8), ("--broadcast", "1000", 0)] {
            server = try spawnWspipe(["-l", "0", mode, "--oneshot"], stdin: .pipe)  // --broadcast: stdin EOF would end it
            guard let found = listeningPort(server) else { return XCTFail("no listening line: \(server.stderr.text)") }
            port = found
            let gone = finish(try pythonClient(["take", "ws://127.0.0.1:\(port)/", "0", code]), timeout: 30)
            XCTAssertEqual(gone.stdoutText, "closed \(code)\n")
            assertExit(finish(server), status)
        }
    }

    /// --broadcast writes the clients' messages as the client writes its own (the one
    /// endpoint): --jsonl --timestamps gives each object its "client" and then its "ts" (the
    /// events their "ts" too, last, as messages have it); -b --base64 reads stdin lines as base64 and writes binary messages as
    /// base64 lines. Both were usage errors before (the broadcast wrote stdout by hand).
    func testBroadcastTakesTimestampsAndBase64AsTheClientDoes() throws {
        let (stamped, port) = try startStdioServer(["--broadcast", "--jsonl", "--timestamps"])
        let sent = #"{"type":"text","data":"hi"}"# + "\n" + #"{"type":"binary","base64":"AP8="}"# + "\n"
        assertExit(try runWspipe(["--no-deflate", "--jsonl", "ws://127.0.0.1:\(port)/"], stdin: .bytes(Array(sent.utf8))), 0)
        XCTAssertTrue(stamped.stdout.wait(timeout: 15) { String(decoding: $0, as: UTF8.self).contains("disconnected") },
                      stamped.stdout.text)
        stamped.closeStdin()
        let result = finish(stamped, timeout: 20)
        assertExit(result, 0)
        let lines = result.stdoutText.split(separator: "\n").map(String.init)
        XCTAssertEqual(lines.count, 4, result.stdoutText)
        guard lines.count == 4 else { return }
        XCTAssertTrue(lines[0].hasPrefix(#"{"type":"connected","client":1,"#) && lines[0].contains(#","ts":"#), lines[0])
        for (line, start) in zip(lines[1...2], [#"{"type":"text","data":"hi","client":1,"ts":"#,
                                                #"{"type":"binary","base64":"AP8=","client":1,"ts":"#]) {
            XCTAssertTrue(line.hasPrefix(start) && line.hasSuffix("}"), line)
            let seconds = Double(line.dropFirst(start.count).dropLast()) ?? 0
            XCTAssertLessThan(abs(seconds - Date().timeIntervalSince1970), 60, line)
        }
        XCTAssertTrue(lines[3].hasPrefix(#"{"type":"disconnected","client":1,"#) && lines[3].contains(#","ts":"#), lines[3])

        let (server, base64Port) = try startStdioServer(["--broadcast", "--binary", "--base64"])
        let client = try spawnWspipe(["--no-deflate", "--binary", "--base64", "ws://127.0.0.1:\(base64Port)/"], stdin: .pipe)
        waitForClient(server, 1)
        client.writeStdin("AP8=\n")
        XCTAssertTrue(server.stdout.wait(timeout: 15) { String(decoding: $0, as: UTF8.self) == "AP8=\n" }, server.stdout.text)
        server.writeStdin("aGk=\n")
        XCTAssertTrue(client.stdout.wait(timeout: 15) { String(decoding: $0, as: UTF8.self) == "aGk=\n" }, client.stdout.text)
        client.closeStdin()
        assertExit(finish(client, timeout: 20), 0)
        server.closeStdin()
        let ended = finish(server, timeout: 20)
        assertExit(ended, 0)
        assertStdout(ended, "AP8=\n")
    }

    /// A socket on stdin of --broadcast and of the stdio server: each line reaches the client
    /// as it is written (the same reader and short-read rule as the client's), its end
    /// closes with 1000 and the server exits 0.
    func testBroadcastAndTheStdioServerReadASocketOnStdin() throws {
        for mode in [["--broadcast"], ["--oneshot"]] {
            let server = try spawnWspipe(["-l", "0", "-v"] + mode, stdin: .socket)
            guard let port = listeningPort(server) else { return XCTFail("no listening line: \(server.stderr.text)") }
            let client = try spawnWspipe(["--no-deflate", "--receive-only", "ws://127.0.0.1:\(port)/"], stdin: .null)
            waitForClient(server, 1)
            server.writeStdin("a\n")
            XCTAssertTrue(client.stdout.wait(timeout: 15) { String(decoding: $0, as: UTF8.self) == "a\n" }, "\(mode): \(client.stdout.text)")
            server.writeStdin("b\n")
            XCTAssertTrue(client.stdout.wait(timeout: 15) { String(decoding: $0, as: UTF8.self) == "a\nb\n" }, "\(mode): \(client.stdout.text)")
            server.closeStdin()
            assertExit(finish(server, timeout: 20), 0)
            let heard = finish(client, timeout: 20)
            assertExit(heard, 0)
            assertStdout(heard, "a\nb\n")
        }
    }

    /// --broadcast --jsonl: a stdin line that is no message object is said with its number
    /// and skipped; the clients stay and get the lines after it (it ended the server, exit
    /// 1, and every client got 1011 without a reason).
    func testBroadcastSkipsABadJSONLine() throws {
        let (server, port) = try startStdioServer(["--broadcast", "--jsonl"])
        let client = try spawnWspipe(["--no-deflate", "--receive-only", "ws://127.0.0.1:\(port)/"])
        waitForClient(server, 1)
        server.writeStdin("{\"type\":\"text\",\"data\":\"a\"}\nnot json\n{\"type\":\"bogus\"}\n{\"type\":\"text\",\"data\":\"b\"}\n")
        XCTAssertTrue(client.stdout.wait(timeout: 15) { String(decoding: $0, as: UTF8.self) == "a\nb\n" }, client.stdout.text)
        server.closeStdin()
        let result = finish(server, timeout: 20)
        assertExit(result, 0)
        assertStderr(result, contains: "wspipe: stdin line 2 is not a --jsonl message: ")
        assertStderr(result, contains: "wspipe: stdin line 3 is not a --jsonl message: unknown type \"bogus\"")
        assertStderr(result, contains: "end of stdin after 2 messages: closing every client with 1000")
        let heard = finish(client, timeout: 20)
        assertExit(heard, 0)
        assertStdout(heard, "a\nb\n")
    }

    /// The stdio server keeps its rule for a bad --jsonl line (exit 1, 1011), and every 1011
    /// a server sends says why: "stdin error" (a broadcast's text line that is not UTF-8, a
    /// bad --jsonl line of the stdio server), "stdout error" (a broadcast's stdout failing).
    func testServer1011CloseCarriesAReason() throws {
        for (flags, input) in [(["--jsonl"], Array("{\"type\":\"text\",\"data\":\"a\"}\nnot json\n".utf8)),
                               (["--broadcast"], Array("a\n".utf8) + [0xFF, 0x0A])] {
            let (server, port) = try startStdioServer(flags)
            let client = try spawnWspipe(["--no-deflate", "--receive-only", "ws://127.0.0.1:\(port)/"])
            waitForClient(server, 1)
            server.writeStdin(input)
            let result = finish(server, timeout: 20)
            assertExit(result, 1)
            assertStderr(result, contains: "stdin line 2 is not ")
            let heard = finish(client, timeout: 20)
            assertExit(heard, 8)
            assertStdout(heard, "a\n")
            assertStderr(heard, contains: #"closed the connection with 1011 (internal error) "stdin error""#)
        }
        let server = try spawnWspipe(["-l", "0", "-v", "--broadcast"], stdin: .pipe, stdoutFile: "/dev/full")
        guard let port = listeningPort(server) else { return XCTFail("no listening line: \(server.stderr.text)") }
        let client = try runWspipe(["--no-deflate", "--no-close", "ws://127.0.0.1:\(port)/"], stdin: .bytes(Array("x\n".utf8)))
        assertExit(client, 8)
        assertStderr(client, contains: #"closed the connection with 1011 (internal error) "stdout error""#)
        assertExit(finish(server, timeout: 20), 1)
    }

    /// --exec: --send goes before the program's output; --idle-timeout counts both ways.
    func testExecGreetsAndClosesIdleClients() throws {
        let server = try spawnWspipe(["-l", "0", "--send", "hi", "--idle-timeout", "1", "--exec", "cat"], stdin: .null)
        guard let port = listeningPort(server) else { return XCTFail("no listening line: \(server.stderr.text)") }
        let client = finish(try pythonClient(["wait", "ws://127.0.0.1:\(port)/", "x"]), timeout: 30)
        XCTAssertTrue(client.stdoutText.hasPrefix("got hi\ngot x\nclosed 1000 after "), "\(client)")
        server.signal(SIGTERM)
        assertDiedOf(finish(server), SIGTERM)
    }

    /// --whole-input: all of stdin is one message to the first client, and the server ends
    /// with it (its first fragments may have gone out: no other client may get the rest).
    func testWholeInputGoesToTheFirstClientOnly() throws {
        let (server, port) = try startStdioServer(["-b", "--whole-input", "--chunk-size", "4"])
        let client = try pythonClient(["wait", "ws://127.0.0.1:\(port)/"])
        waitForClient(server, 1)
        server.writeStdin("0123456789")
        server.closeStdin()
        XCTAssertTrue(finish(client, timeout: 20).stdoutText.hasPrefix("got b'0123456789'\nclosed 1000 after "))
        assertExit(finish(server, timeout: 20), 0)

        let (early, earlyPort) = try startStdioServer(["-b", "--whole-input"])
        early.writeStdin("part")
        XCTAssertEqual(finish(try pythonClient(["take", "ws://127.0.0.1:\(earlyPort)/", "0"]), timeout: 20).stdoutText, "closed 1000\n")
        assertExit(finish(early, timeout: 20), 0)  // stdin still open: the server ended with its client
    }

    /// A ping object in a --jsonl --send-file reaches the server as a Ping (it was dropped).
    func testSendFilePingObjectsArePings() throws {
        let (server, port) = try startStdioServer(["-v", "--oneshot", "--jsonl"])
        server.closeStdin()
        let file = path("subscribe.jsonl")
        try "{\"type\":\"text\",\"data\":\"sub\"}\n{\"type\":\"ping\",\"data\":\"hello-ping\"}\n"
            .write(toFile: file, atomically: true, encoding: .utf8)
        let client = try runWspipe(["--jsonl", "--send-file", file, "ws://127.0.0.1:\(port)/"], timeout: 20)
        assertExit(client, 0)
        let result = finish(server, timeout: 20)
        assertExit(result, 0)
        XCTAssertTrue(result.stdoutText.contains("{\"type\":\"text\",\"data\":\"sub\"}\n"), result.stdoutText)
        assertStderr(result, contains: "received ping (10 bytes)")
    }
}
