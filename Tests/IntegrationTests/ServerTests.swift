// wspipe -l: independent clients (Python websockets, websocat, raw sockets, our own client)
// drive the server; every refusal by its status; shutdown, slowloris, many connections.
import Foundation
import Glibc
import TestSupport
import XCTest

final class ServerTests: IntegrationTestCase {
    /// Starts `wspipe -l 0 ...` and reads the port from its `listening on` line.
    func startServer(_ arguments: [String], environment: [String: String] = [:],
                     file: StaticString = #filePath, line: UInt = #line) throws -> (ChildProcess, Int) {
        try startListening(arguments, environment: environment, file: file, line: line)
    }

    func python(_ arguments: [String], timeout: Double = 30) throws -> RunResult {
        let child = try ChildProcess(executable: Locations.python, arguments: ["\(Locations.peers)/server_client.py"] + arguments,
                                     environment: Locations.baseEnvironment, stdin: .null)
        return finish(child, timeout: timeout)
    }

    /// The answer to a raw request (`status N`, header lines, `body ...`).
    func answer(_ port: Int, _ request: String) throws -> String {
        let file = path("request-\(UUID().uuidString)")
        try Data(request.utf8).write(to: URL(fileURLWithPath: file))
        return try python(["request", String(port), file]).stdoutText
    }

    func upgrade(_ path: String = "/", _ extra: String = "", version: String = "13") -> String {
        "GET \(path) HTTP/1.1\r\nHost: localhost\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
            + "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: \(version)\r\n\(extra)\r\n"
    }

    func testEchoToPythonWebsockets() throws {
        let (server, port) = try startServer(["--echo"])
        let result = try python(["echo", "ws://127.0.0.1:\(port)/any"])
        XCTAssertEqual(result.stdoutText, "text:hello\nbinary:3:same\ntext:\ntext:1000 chars\nbinary:300000:same\nclosed 1000\n", "\(result)")
        server.signal(SIGTERM)
        assertDiedOf(finish(server), SIGTERM)
    }

    func testEchoToWebsocatAndOurClient() throws {
        let (server, port) = try startServer(["--echo"])
        let websocat = try ChildProcess(executable: Locations.websocat, arguments: ["-t", "ws://127.0.0.1:\(port)/"],
                                        environment: Locations.baseEnvironment, stdin: .bytes(Array("one\ntwo\n".utf8)))
        XCTAssertEqual(finish(websocat).stdoutText, "one\ntwo\n")
        let ours = try runWspipe(["--jsonl", "ws://127.0.0.1:\(port)/"],
                                 stdin: .bytes(Array(#"{"type":"text","data":"a"}"# .utf8) + [10] + Array(#"{"type":"binary","base64":"AAE="}"#.utf8) + [10]))
        assertExit(ours, 0)
        XCTAssertEqual(ours.stdoutText, #"{"type":"text","data":"a"}"# + "\n" + #"{"type":"binary","base64":"AAE="}"# + "\n" + #"{"type":"close","code":1000,"reason":""}"# + "\n")
        server.signal(SIGINT)
        assertDiedOf(finish(server), SIGINT)
    }

    func testUnixSocket() throws {
        let socketPath = path("s.sock")
        // A stale socket file (nobody listening) is replaced; a regular file never is.
        let stale = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { $0.copyBytes(from: Array(socketPath.utf8)) }
        _ = withUnsafePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(stale, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) } }
        close(stale)
        let server = try spawnWspipe(["-l", "unix:\(socketPath)", "--echo"], stdin: .null)
        XCTAssertEqual(server.stderr.waitForLine(startingWith: "wspipe: listening on", timeout: 15), "wspipe: listening on ws+unix://\(socketPath)")
        let ours = try runWspipe(["ws+unix://\(socketPath)"], stdin: .bytes(Array("over unix\n".utf8)))
        assertStdout(ours, "over unix\n")
        server.signal(SIGTERM)
        assertDiedOf(finish(server), SIGTERM)
        XCTAssertFalse(FileManager.default.fileExists(atPath: socketPath), "the socket file is removed at the end")

        let regular = path("regular")
        try Data("keep".utf8).write(to: URL(fileURLWithPath: regular))
        let refused = try runWspipe(["-l", "unix:\(regular)", "--echo"])
        assertExit(refused, 3)
        XCTAssertEqual(try String(contentsOfFile: regular, encoding: .utf8), "keep")
    }

    func testRefusalsByStatus() throws {
        let (server, port) = try startServer(["--echo", "--path", "/ws", "--allow-origin", "https://app.example",
                                              "--protocol", "chat", "--require-protocol", "--require-bearer",
                                              "--health", "/healthz", "--response-header", "X-Served-By: wspipe"],
                                             environment: ["WSPIPE_BEARER": "s3cret"])
        let good = "Origin: https://app.example\r\nAuthorization: Bearer s3cret\r\nSec-WebSocket-Protocol: other, chat\r\n"
        let accepted = try answer(port, upgrade("/ws", good))
        XCTAssertTrue(accepted.hasPrefix("status 101\n"), accepted)
        XCTAssertTrue(accepted.contains("Sec-WebSocket-Protocol: chat\n"), accepted)
        XCTAssertTrue(accepted.contains("X-Served-By: wspipe\n"), accepted)
        XCTAssertTrue(accepted.contains("Sec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=\n"), accepted)

        XCTAssertTrue(try answer(port, upgrade("/other", good)).hasPrefix("status 404\n"))
        let unauthorized = try answer(port, upgrade("/ws", good.replacingOccurrences(of: "s3cret", with: "guess!")))
        XCTAssertTrue(unauthorized.hasPrefix("status 401\n") && unauthorized.contains("WWW-Authenticate: Bearer"), unauthorized)
        let noToken = try answer(port, upgrade("/ws", "Origin: https://app.example\r\nSec-WebSocket-Protocol: chat\r\n"))
        XCTAssertTrue(noToken.hasPrefix("status 401\n"), noToken)
        XCTAssertTrue(try answer(port, upgrade("/ws", good.replacingOccurrences(of: "app.example", with: "evil.example"))).hasPrefix("status 403\n"))
        XCTAssertTrue(try answer(port, upgrade("/ws", good.replacingOccurrences(of: "other, chat", with: "other"))).hasPrefix("status 400\n"))
        let version = try answer(port, upgrade("/ws", good, version: "8"))
        XCTAssertTrue(version.hasPrefix("status 426\n") && version.contains("Sec-WebSocket-Version: 13\n"), version)
        let plain = try answer(port, "GET /ws HTTP/1.1\r\nHost: x\r\n\r\n")
        XCTAssertTrue(plain.hasPrefix("status 426\n") && plain.contains("body not a WebSocket handshake"), plain)
        let health = try answer(port, "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
        XCTAssertTrue(health.hasPrefix("status 200\n") && health.hasSuffix("body ok\n"), health)
        // As the man page says: HEAD too, and HTTP/1.0 checks (HAProxy's httpchk) without Host.
        let headHealth = try answer(port, "HEAD /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
        XCTAssertTrue(headHealth.hasPrefix("status 200\n"), headHealth)
        let oldHealth = try answer(port, "GET /healthz HTTP/1.0\r\n\r\n")
        XCTAssertTrue(oldHealth.hasPrefix("status 200\n") && oldHealth.hasSuffix("body ok\n"), oldHealth)
        XCTAssertTrue(try answer(port, "GET /ws HTTP/1.0\r\n\r\n").hasPrefix("status 400\n"), "no upgrade on HTTP/1.0")
        XCTAssertTrue(try answer(port, "POST /ws HTTP/1.1\r\nHost: x\r\n\r\n").hasPrefix("status 405\n"))
        let huge = "GET /ws HTTP/1.1\r\nHost: x\r\nX-Big: " + String(repeating: "a", count: 20_000) + "\r\n\r\n"
        XCTAssertTrue(try answer(port, huge).hasPrefix("status 431\n"))
        server.signal(SIGTERM)
        let result = finish(server)
        assertDiedOf(result, SIGTERM)
        XCTAssertFalse(result.stderr.contains("s3cret"), "the token is never printed")
    }

    /// Issue 35 item 4: a refusal's reason (with the request's Origin) is on the server's
    /// stderr with -v (it said only "refused a handshake with 403"), never without -v.
    func testRefusalReasonIsSaidWithVerboseOnly() throws {
        let options = ["--echo", "--allow-origin", "https://app.example", "--require-bearer"]
        let environment = ["WSPIPE_BEARER": "s3cret"]
        let (verbose, port) = try startServer(options + ["-v"], environment: environment)
        let token = "Authorization: Bearer s3cret\r\n"
        XCTAssertTrue(try answer(port, upgrade("/", token + "Origin: https://evil.example\r\n")).hasPrefix("status 403\n"))
        XCTAssertTrue(try answer(port, upgrade("/", "Origin: https://app.example\r\n")).hasPrefix("status 401\n"))
        // Client text reaches the terminal as visible text only (a UTF-8 C1 control here).
        XCTAssertTrue(try answer(port, upgrade("/", token + "Origin: https://e\u{9B}vil.example\r\n")).hasPrefix("status 403\n"))
        verbose.signal(SIGTERM)
        let said = finish(verbose)
        assertDiedOf(said, SIGTERM)
        let refusals = said.stderr.split(separator: "\n").filter { $0.contains("refused a handshake") }
        XCTAssertEqual(refusals.count, 3, said.stderr)
        guard refusals.count == 3 else { return }
        XCTAssertTrue(refusals[0].hasPrefix("wspipe: * refused a handshake from 127.0.0.1:"), said.stderr)
        XCTAssertTrue(refusals[0].hasSuffix(" with 403 Forbidden: origin 'https://evil.example' is not allowed"), said.stderr)
        XCTAssertTrue(refusals[1].hasSuffix(" with 401 Unauthorized: a bearer token is required (Origin: https://app.example)"),
                      said.stderr)
        XCTAssertTrue(refusals[2].hasSuffix(" with 403 Forbidden: origin 'https://e??vil.example' is not allowed "
                                            + "(Origin: https://e\\x9Bvil.example)"), "the C1 control shown escaped: \(said.stderr)")
        XCTAssertFalse(said.stderr.unicodeScalars.contains("\u{9B}"), said.stderr)
        XCTAssertFalse(said.stderr.contains("s3cret"))

        let (quiet, quietPort) = try startServer(options, environment: environment)
        XCTAssertTrue(try answer(quietPort, upgrade("/", token + "Origin: https://evil.example\r\n")).hasPrefix("status 403\n"))
        quiet.signal(SIGTERM)
        let silent = finish(quiet)
        assertDiedOf(silent, SIGTERM)
        XCTAssertFalse(silent.stderr.contains("refused"), "an internet-facing server does not log every bot: \(silent.stderr)")
        XCTAssertFalse(silent.stderr.contains("evil"), silent.stderr)
    }

    func testMaxClientsAnswers503() throws {
        let (server, port) = try startServer(["--echo", "--max-clients", "1"])
        let holder = try spawnWspipe(["--receive-only", "ws://127.0.0.1:\(port)/"], stdin: .null)
        // The first client holds the only place; wait until it is connected.
        var busy = ""
        for _ in 0..<100 {
            busy = try answer(port, upgrade())
            if busy.hasPrefix("status 503\n") { break }
            usleep(50_000)
        }
        XCTAssertTrue(busy.hasPrefix("status 503\n") && busy.contains("Retry-After: 1\n"), busy)
        server.signal(SIGTERM)
        assertDiedOf(finish(server), SIGTERM)
        assertExit(finish(holder), 8)  // the server's Close 1001
    }

    func testSlowlorisIsDropped() throws {
        let (server, port) = try startServer(["--echo", "--handshake-timeout", "0.5"])
        let result = try python(["slowloris", String(port), "10"])
        XCTAssertTrue(result.stdoutText.hasPrefix("closed after"), "\(result)")
        server.signal(SIGTERM)
        assertDiedOf(finish(server), SIGTERM)
    }

    func testAClientFloodingPingsWithoutReadingGetsOnePongWaitingAndItsEcho() throws {
        // Regression test (fixed): each ping's pong went into the queue, so --echo's
        // backpressure stopped reading a client that floods pings and never reads (its
        // sends stalled after ~58k pings). Now at most one pong waits (RFC 6455 §5.5.3):
        // the server reads all 100k, and when the client reads at last, after the pongs the
        // kernel held it finds one for the most recent ping and then the echo of its text.
        let (server, port) = try startServer(["--echo"])
        let result = try python(["pingflood", String(port), "100000", "2"])
        print("MEASURE server ping flood 100000 x 125 B: \(result.stdoutText.trimmingCharacters(in: .whitespacesAndNewlines))")
        let words = result.stdoutText.split(separator: " ")
        XCTAssertEqual(words.first, "pongs", "\(result)")
        XCTAssertTrue(result.stdoutText.hasSuffix("echo yes\n"), "\(result)")
        let afterGap = words.firstIndex(of: "after-gap").flatMap { Int(words[$0 + 1]) }
        XCTAssertNotNil(afterGap, "\(result)")
        XCTAssertLessThanOrEqual(afterGap ?? .max, 2, "pongs were not coalesced: \(result)")
        server.signal(SIGTERM)
        assertDiedOf(finish(server), SIGTERM)
    }

    /// 1,000 clients at once on one loop: every handshake answered, one descriptor each, and
    /// SIGTERM closes every one with 1001 before exiting 0.
    func testThousandConnectionsAndShutdown() throws {
        let (server, port) = try startServer(["--echo"])
        let clients = try ChildProcess(executable: Locations.python,
                                       arguments: ["\(Locations.peers)/server_client.py", "hold", "ws://127.0.0.1:\(port)/", "1000"],
                                       environment: Locations.baseEnvironment, stdin: .null)
        XCTAssertEqual(clients.stdout.waitForLine(startingWith: "open", timeout: 60), "open 1000", clients.stderr.text)
        let descriptors = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(server.pid)/fd").count) ?? 0
        XCTAssertGreaterThanOrEqual(descriptors, 1000)
        XCTAssertLessThan(descriptors, 1000 + 32, "one descriptor per client plus a few")
        server.signal(SIGTERM)
        let result = finish(server, timeout: 30)
        assertDiedOf(result, SIGTERM)
        XCTAssertEqual(finish(clients, timeout: 30).stdoutText, "open 1000\ncloses 1001=1000\n")
    }

    /// Out of descriptors (EMFILE): accepting pauses instead of spinning, and once clients
    /// leave, waiting and new clients are served.
    func testRecoversFromDescriptorExhaustion() throws {
        let server = try ChildProcess(executable: "/bin/sh", arguments: ["-c", "ulimit -n 32; exec \(Locations.wspipe) -l 0 --echo -v"],
                                      environment: Locations.baseEnvironment, stdin: .null)
        defer { server.kill() }
        guard let text = server.stderr.waitForLine(startingWith: "wspipe: listening on ws://127.0.0.1:", timeout: 15),
              let port = UInt16(text.split(separator: ":").last?.split(separator: "/").first ?? "") else {
            return XCTFail("no listening line: \(server.stderr.text)")
        }
        // 40 idle TCP connections: more than the server has descriptors for.
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = port.bigEndian
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var held: [Int32] = []
        for _ in 0..<40 {
            let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
            let connected = withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
            }
            XCTAssertEqual(connected, 0, "the backlog takes the connection")
            held.append(fd)
        }
        usleep(300_000)
        for fd in held { close(fd) }
        let ours = try runWspipe(["ws://127.0.0.1:\(port)/"], stdin: .bytes(Array("after exhaustion\n".utf8)))
        assertStdout(ours, "after exhaustion\n")
        server.signal(SIGTERM)
        assertDiedOf(finish(server), SIGTERM)
    }

    /// --broadcast to 50 clients, one of which never reads: the 49 get every message, the
    /// stalled one is closed with 1013 once its queue is full, and client messages reach stdout.
    func testBroadcastToFiftyClientsWithOneStalled() throws {
        let server = try spawnWspipe(["-l", "0", "-v", "--broadcast"], stdin: .pipe)
        guard let text = server.stderr.waitForLine(startingWith: "wspipe: listening on ws://127.0.0.1:", timeout: 15),
              let port = Int(text.split(separator: ":").last?.split(separator: "/").first ?? "") else {
            return XCTFail("no listening line: \(server.stderr.text)")
        }
        let clients = try ChildProcess(executable: Locations.python,
                                       arguments: ["\(Locations.peers)/server_client.py", "fanout", "ws://127.0.0.1:\(port)/", "50"],
                                       environment: Locations.baseEnvironment, stdin: .null)
        XCTAssertEqual(clients.stdout.waitForLine(startingWith: "ready", timeout: 30), "ready", clients.stderr.text)
        let talker = try runWspipe(["ws://127.0.0.1:\(port)/"], stdin: .bytes(Array("hello server\n".utf8)))
        assertExit(talker, 0)
        XCTAssertTrue(server.stdout.wait(timeout: 10) { String(decoding: $0, as: UTF8.self).contains("hello server\n") })
        // 800 lines of 16 KiB (13 MB): more than the 4 MiB a client may fall behind plus what
        // the kernel buffers hold for it; in batches, so that the one Python process reading
        // for the 49 others keeps them near each other.
        let line = String(repeating: "x", count: 16 * 1024) + "\n"
        for _ in 0..<40 {
            server.writeStdin(Array(String(repeating: line, count: 20).utf8))
            usleep(30_000)
        }
        server.closeStdin()
        let result = finish(server, timeout: 60)
        assertExit(result, 0)
        assertStderr(result, contains: "closed 1 slow client(s) with 1013")
        assertStderr(result, contains: " is more than 4 MiB behind (")  // -v names it
        let lines = finish(clients, timeout: 60).stdoutText.split(separator: "\n").map(String.init)
        XCTAssertEqual(lines.first, "ready")
        XCTAssertEqual(lines.dropFirst().first, "stalled 1013")
        XCTAssertEqual(Array(lines.dropFirst(2)), Array(repeating: "800 messages 1000", count: 49))
    }

    /// Messages a batch cannot hold: lines of 64 KiB and more go to every client from where
    /// stdin put them (after their header, the batch's last frame); a --jsonl payload larger
    /// than the batch buffer gets a buffer of its own; a 5 MiB line is more than the 4 MiB a
    /// client may fall behind, and still no client is dropped. Two clients without
    /// permessage-deflate (the batch) and one with it (its own copy) get the same bytes.
    func testBroadcastOfMessagesLargerThanABatch() throws {
        let x = String(repeating: "x", count: 200_000), y = String(repeating: "y", count: 70_000)
        var random = SystemRandomNumberGenerator()
        let blob = (0..<300_000).map { _ in UInt8.random(in: 0...255, using: &random) }
        let huge = String(repeating: "h", count: 5 << 20)
        for (flags, input, clientFlags, expected) in [
            ([String](), "a\n\(x)\nb\n\(y)\nc\n", [String](), Array("a\n\(x)\nb\n\(y)\nc\n".utf8)),
            (["--jsonl"], "{\"type\":\"binary\",\"base64\":\"\(Data(blob).base64EncodedString())\"}\n{\"type\":\"binary\",\"base64\":\"eg==\"}\n",
             ["-b"], blob + Array("z".utf8)),
            // Larger than the 4 MiB a client may fall behind: it still reaches every client.
            ([], "\(huge)\nend\n", [], Array("\(huge)\nend\n".utf8)),
        ] {
            let server = try spawnWspipe(["-l", "0", "-v", "--broadcast"] + flags, stdin: .pipe)
            guard let text = server.stderr.waitForLine(startingWith: "wspipe: listening on ws://127.0.0.1:", timeout: 15),
                  let port = Int(text.split(separator: ":").last?.split(separator: "/").first ?? "") else {
                return XCTFail("no listening line: \(server.stderr.text)")
            }
            let url = "ws://127.0.0.1:\(port)/"
            var clients: [ChildProcess] = []
            for extra in [["--no-deflate"], ["--no-deflate"], []] {
                clients.append(try spawnWspipe(["--receive-only"] + clientFlags + extra + [url]))
                XCTAssertNotNil(server.stderr.waitForLine(startingWith: "wspipe: * client \(clients.count) connected", timeout: 15),
                                server.stderr.text)
            }
            server.writeStdin(Array(input.utf8))
            server.closeStdin()
            assertExit(finish(server, timeout: 30), 0)
            for (i, client) in clients.enumerated() {
                let result = finish(client, timeout: 30)
                assertExit(result, 0)
                XCTAssertTrue(result.stdout == expected, "client \(i + 1) \(flags): \(result.stdout.count) bytes, expected \(expected.count)")
            }
        }
    }

    /// -n 5: a client's sixth and later messages are not written, even when they came in
    /// the same read as the fifth; a close object on stdin is the Close, and said as such.
    func testBroadcastCountsAndTheCloseObject() throws {
        let server = try spawnWspipe(["-l", "0", "-v", "--broadcast", "-n", "5"], stdin: .pipe)
        guard let text = server.stderr.waitForLine(startingWith: "wspipe: listening on ws://127.0.0.1:", timeout: 15),
              let port = Int(text.split(separator: ":").last?.split(separator: "/").first ?? "") else {
            return XCTFail("no listening line: \(server.stderr.text)")
        }
        let burst = (0..<10).map { "m\($0)\n" }.joined()
        let client = try runWspipe(["--no-deflate", "ws://127.0.0.1:\(port)/"], stdin: .bytes(Array(burst.utf8)))
        assertExit(client, 0)
        server.closeStdin()
        let result = finish(server, timeout: 20)
        assertExit(result, 0)
        XCTAssertEqual(result.stdoutText, (0..<5).map { "m\($0)\n" }.joined())

        let jsonl = try spawnWspipe(["-l", "0", "-v", "--broadcast", "--jsonl"], stdin: .pipe)
        guard let line = jsonl.stderr.waitForLine(startingWith: "wspipe: listening on ws://127.0.0.1:", timeout: 15),
              let jsonlPort = Int(line.split(separator: ":").last?.split(separator: "/").first ?? "") else {
            return XCTFail("no listening line: \(jsonl.stderr.text)")
        }
        let listener = try spawnWspipe(["--no-deflate", "--receive-only", "ws://127.0.0.1:\(jsonlPort)/"])
        XCTAssertNotNil(jsonl.stderr.waitForLine(startingWith: "wspipe: * client 1 connected", timeout: 15), jsonl.stderr.text)
        jsonl.writeStdin(Array("{\"type\":\"text\",\"data\":\"x\"}\n{\"type\":\"close\",\"code\":4001,\"reason\":\"bye\"}\n".utf8))
        jsonl.closeStdin()
        let ended = finish(jsonl, timeout: 20)
        assertExit(ended, 0)
        assertStderr(ended, contains: "close object on stdin: closing every client with 4001")
        XCTAssertFalse(ended.stderr.contains("end of stdin"), ended.stderr)
        let heard = finish(listener, timeout: 20)
        assertStdout(heard, "x\n")
        assertStderr(heard, contains: "4001")
    }

    func testUsageErrorsAndListenFailures() throws {
        for (arguments, text) in [(["-l", "0", "--echo", "--proxy", "http://p:1"], "--proxy is a client option"),
                                  (["--echo", "ws://127.0.0.1:1/"], "--echo is a server option"),
                                  (["-l", "0", "--echo", "ws://127.0.0.1:1/"], "cannot be combined with -l"),
                                  (["-l", "0", "--echo", "--stats"], "--stats has no meaning with -l/--listen --echo"),
                                  (["-l", "example.com:80", "--echo"], "is not an IP address"),
                                  (["-l", "0", "--echo", "--require-bearer"], "WSPIPE_BEARER"),
                                  (["-l", "0", "--echo", "--response-header", "Upgrade: x"], "--response-header")] {
            let result = try runWspipe(arguments)
            assertExit(result, 2)
            assertStderr(result, contains: text)
        }
        let (server, port) = try startServer(["--echo"])
        let inUse = try runWspipe(["-l", String(port), "--echo"])
        assertExit(inUse, 3)
        assertStderr(inUse, contains: "cannot listen on 127.0.0.1:\(port): the address is already in use")
        if getuid() != 0 {
            assertExit(try runWspipe(["-l", "80", "--echo"]), 3)
        }
        server.signal(SIGTERM)
        assertDiedOf(finish(server), SIGTERM)
    }

    func testJSONLinesEvents() throws {
        let (server, port) = try startServer(["--echo", "--jsonl", "-q"])
        assertExit(try runWspipe(["ws://127.0.0.1:\(port)/feed?x=1"], stdin: .bytes(Array("hi\n".utf8))), 0)
        XCTAssertTrue(server.stdout.wait(timeout: 10) { String(decoding: $0, as: UTF8.self).contains("disconnected") })
        let lines = server.stdout.text.split(separator: "\n").map(String.init)
        XCTAssertEqual(lines.count, 2, server.stdout.text)
        XCTAssertTrue(lines[0].hasPrefix(#"{"type":"connected","client":1,"remote":"127.0.0.1:"#), lines[0])
        XCTAssertTrue(lines[0].hasSuffix(#","path":"/feed","subprotocol":null}"#), lines[0])
        XCTAssertEqual(lines.last, #"{"type":"disconnected","client":1,"code":1000,"reason":"","cause":"closed"}"#)
        server.signal(SIGTERM)
        assertDiedOf(finish(server), SIGTERM)
    }
}
