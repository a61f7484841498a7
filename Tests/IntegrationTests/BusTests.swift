// --broadcast --bus: wspipe processes joined by a real redis-server or nats-server on
// loopback (BusTestCase). Clients are peers/bus_clients.py: many connections in one Python process.
import Foundation
import XCTest
import TestSupport
#if canImport(Glibc)
import Glibc
#endif

final class BusTests: BusTestCase {
    /// One bus_clients.py result line.
    private struct ClientResult {
        let process: Int
        let count: Int
        let order: String
        let set: String
        let close: String
    }

    private func startClients(_ count: Int, expecting: Int, seconds: Double, ports: [Int],
                              expected: [(text: Bool, bytes: [UInt8])]? = nil, dump: String? = nil) throws -> ChildProcess {
        var environment = Locations.baseEnvironment
        if let dump { environment["BUS_DUMP"] = dump }
        if let expected {
            let file = path("expected.txt")
            try expected.map { ($0.text ? "t " : "b ") + $0.bytes.map { String(format: "%02x", $0) }.joined() }
                .joined(separator: "\n").write(toFile: file, atomically: true, encoding: .utf8)
            environment["BUS_EXPECT"] = file
        }
        let clients = try ChildProcess(executable: Locations.python,
                                       arguments: ["\(Locations.peers)/bus_clients.py", "\(count)", "\(expecting)", "\(seconds)"]
                                           + ports.map { "ws://127.0.0.1:\($0)/" },
                                       environment: environment, stdin: .null)
        addTeardownBlock { clients.kill() }
        XCTAssertEqual(clients.stdout.waitForLine(startingWith: "ready", timeout: 90), "ready", clients.stderr.text)
        return clients
    }

    private func results(_ clients: ChildProcess, timeout: Double) -> (expected: String?, clients: [ClientResult]) {
        let result = finish(clients, timeout: timeout)
        var expected: String?
        var lines: [ClientResult] = []
        for line in result.stdoutText.split(separator: "\n") {
            let fields = line.split(separator: " ").map(String.init)
            if fields.first == "expected", fields.count == 2 { expected = fields[1] }
            guard fields.count == 6, let process = Int(fields[1]), let count = Int(fields[2]) else { continue }
            lines.append(ClientResult(process: process, count: count, order: fields[3], set: fields[4], close: fields[5]))
        }
        XCTAssertFalse(lines.isEmpty, "no client results: \(result)")
        return (expected, lines)
    }

    private func jsonLine(text: Bool, _ bytes: [UInt8]) -> String {
        text ? "{\"type\":\"text\",\"data\":\(String(decoding: try! JSONSerialization.data(withJSONObject: [String(decoding: bytes, as: UTF8.self)]), as: UTF8.self).dropFirst().dropLast())}\n"
             : "{\"type\":\"binary\",\"base64\":\"\(Data(bytes).base64EncodedString())\"}\n"
    }

    /// Three processes, 500 clients spread over them; 1,000 messages from one process's
    /// stdin (text and binary, binary that starts with the type bytes too) and 1,000 from
    /// `redis-cli --pipe` (untagged text as `redis-cli publish` sends it, untagged bytes that
    /// are not UTF-8, tagged text and binary), at the same time: every client gets all
    /// 2,000, byte-exact, in one identical order.
    func testThreeProcessesFiveHundredClientsOneOrder() throws {
        let (_, redis) = try startRedis()
        let bus = "redis://127.0.0.1:\(redis)/ticker"
        let (a, portA) = try startBroadcast(bus, ["--jsonl"])
        let (b, portB) = try startBroadcast(bus)
        let (c, portC) = try startBroadcast(bus)
        var random = SystemRandomNumberGenerator()
        func bytes(_ n: Int) -> [UInt8] { (0..<n).map { _ in UInt8.random(in: 0...255, using: &random) } }
        var fromStdin: [(text: Bool, bytes: [UInt8])] = []
        for i in 0..<1000 {
            switch i % 4 {
            case 0: fromStdin.append((true, Array("stdin \(i) é ✓ {\"p\":\(i)}".utf8)))
            case 1: fromStdin.append((false, [0x01] + bytes(i % 50)))  // binary that looks tagged text
            case 2: fromStdin.append((false, [0x02] + bytes(1 + i % 300)))
            default: fromStdin.append((true, Array("\u{1}text that starts with 0x01, \(i)".utf8)))
            }
        }
        var published: [[UInt8]] = []
        var fromRedis: [(text: Bool, bytes: [UInt8])] = []
        for i in 0..<1000 {
            switch i % 4 {
            case 0:
                let text = Array("{\"p\":\(i)}".utf8)
                published.append(text); fromRedis.append((true, text))
            case 1:
                let binary = [0xFF] + bytes(i % 40)  // not UTF-8: binary
                published.append(binary); fromRedis.append((false, binary))
            case 2:
                let text = Array("tagged ü \(i)".utf8)
                published.append([0x01] + text); fromRedis.append((true, text))
            default:
                let binary = bytes(i % 64)
                published.append([0x02] + binary); fromRedis.append((false, binary))
            }
        }
        let clients = try startClients(500, expecting: 2000, seconds: 240, ports: [portA, portB, portC],
                                       expected: fromStdin + fromRedis)
        // Both sources at once, in slices, so that the bus interleaves them.
        for slice in 0..<10 {
            let lines = fromStdin[(slice * 100)..<(slice * 100 + 100)].map { jsonLine(text: $0.text, $0.bytes) }.joined()
            XCTAssertTrue(a.writeStdin(Array(lines.utf8)))
            try redisCLI(redis, ["--pipe"], stdin: publishCommands("ticker", Array(published[(slice * 100)..<(slice * 100 + 100)])))
        }
        let (expected, lines) = results(clients, timeout: 300)
        XCTAssertEqual(lines.count, 500)
        XCTAssertEqual(Set(lines.map(\.process)), [0, 1, 2])
        XCTAssertNotNil(expected)
        XCTAssertEqual(lines.filter { $0.count != 2000 }.count, 0, "clients short of 2,000: \(lines.filter { $0.count != 2000 }.prefix(5).map(\.count))")
        XCTAssertEqual(Set(lines.map(\.set)), [expected ?? "?"], "the messages, byte-exact and with their types")
        XCTAssertEqual(Set(lines.map(\.order)).count, 1, "one order for every client of every process")
        XCTAssertEqual(Set(lines.map(\.close)), ["open"])
        for server in [a, b, c] { server.closeStdin() }
        for server in [a, b, c] { assertExit(finish(server, timeout: 30), 0) }
    }

    /// Redis killed and restarted on its port mid-stream: the clients stay connected,
    /// delivery resumes once both processes resubscribed; the gap is reported (warnings, --jsonl bus_lost/bus_restored with their timestamps, --timestamps adding no second one, the metric).
    func testTheBusKilledAndRestartedMidStream() throws {
        var (redisChild, redis) = try startRedis()
        let bus = "redis://127.0.0.1:\(redis)/ticker"
        let (a, portA) = try startBroadcast(bus, ["--jsonl", "--timestamps", "--metrics", "/metrics"])
        let (b, portB) = try startBroadcast(bus)
        let clients = try startClients(40, expecting: 400, seconds: 120, ports: [portA, portB])
        func feed(_ range: Range<Int>) {
            for i in range { XCTAssertTrue(a.writeStdin(Array("{\"type\":\"text\",\"data\":\"m\(i)\"}\n".utf8))) }
        }
        feed(0..<200)
        usleep(1_000_000)  // delivered: nothing in flight when the bus goes
        redisChild.kill()
        for server in [a, b] {
            XCTAssertTrue(server.stderr.wait(timeout: 15) { String(decoding: $0, as: UTF8.self).contains("ticker lost: ") }, server.stderr.text)
        }
        // (What stdin gives while the bus is away waits, unread, and is published as soon as
        // this process is back: before the other may be, the at-most-once gap. So nothing here.)
        usleep(1_500_000)
        (redisChild, redis) = try startRedis(port: redis)
        for server in [a, b] {
            XCTAssertTrue(server.stderr.wait(timeout: 30) { String(decoding: $0, as: UTF8.self).contains(" restored after ") }, server.stderr.text)
        }
        feed(200..<400)
        let (_, lines) = results(clients, timeout: 150)
        XCTAssertEqual(lines.count, 40)
        XCTAssertEqual(lines.filter { $0.count != 400 }.count, 0, "counts: \(Set(lines.map(\.count)))")
        XCTAssertEqual(Set(lines.map(\.order)).count, 1, "one order everywhere")
        XCTAssertEqual(Set(lines.map(\.close)), ["open"], "clients stay connected while the bus is away")

        let scrape = try ChildProcess(executable: Locations.python,
                                      arguments: ["-c", "import urllib.request,sys; sys.stdout.write(urllib.request.urlopen('http://127.0.0.1:\(portA)/metrics', timeout=10).read().decode())"],
                                      environment: Locations.baseEnvironment, stdin: .null)
        let metrics = finish(scrape, timeout: 20).stdoutText
        XCTAssertTrue(metrics.contains("\nwspipe_bus_lost_total 1\n"), metrics)
        for server in [a, b] { server.closeStdin() }
        let resultA = finish(a, timeout: 30)
        assertExit(resultA, 0)
        assertExit(finish(b, timeout: 30), 0)
        let events = resultA.stdoutText.split(separator: "\n").filter { $0.contains("\"type\":\"bus_") }
        XCTAssertEqual(events.count, 2, resultA.stdoutText)
        XCTAssertTrue(events.first?.hasPrefix("{\"type\":\"bus_lost\",\"ts\":") == true, "\(events)")
        XCTAssertTrue(events.last?.hasPrefix("{\"type\":\"bus_restored\",\"ts\":") == true, "\(events)")
        XCTAssertTrue(events.last?.contains("\"down_seconds\":") == true, "\(events)")
        XCTAssertEqual(events.map { $0.components(separatedBy: "\"ts\":").count }, [2, 2], "one ts each, --timestamps adds none")
        assertStderr(resultA, contains: "messages published meanwhile are not delivered here")
    }

    /// A wrong password, or none where Redis wants one: one line, exit 5, the password never
    /// printed. The right one from the environment, from a file, and an ACL user in the URL.
    func testCredentials() throws {
        let (_, redis) = try startRedis(["--requirepass", "s3cret", "--user", "app", "on", ">apppw", "~*", "&*", "+@all"])
        for (url, reply) in [("redis://:hunter2@127.0.0.1:\(redis)/t", "WRONGPASS"), ("redis://127.0.0.1:\(redis)/t", "NOAUTH"),
                             ("redis://app:hunter2@127.0.0.1:\(redis)/t", "WRONGPASS")] {
            let run = try runWspipe(["-l", "0", "-v", "--broadcast", "--bus", url], stdin: .pipe, timeout: 20)
            assertExit(run, 5)
            let errors = run.stderr.split(separator: "\n").filter { !$0.hasPrefix("wspipe: * ") && !$0.hasPrefix("wspipe: listening") }
            XCTAssertEqual(errors.count, 1, run.stderr)
            XCTAssertTrue(errors.first?.hasPrefix("wspipe: the bus redis://") == true && errors.first?.contains("refused us: \(reply)") == true,
                          run.stderr)
            XCTAssertFalse(run.stderr.contains("hunter2"), "the password is never printed: \(run.stderr)")
        }
        let file = path("bus-password")
        try "s3cret\n".write(toFile: file, atomically: true, encoding: .utf8)
        for (url, arguments, environment) in [("redis://127.0.0.1:\(redis)/t", [String](), ["WSPIPE_BUS_PASSWORD": "s3cret"]),
                                              ("redis://127.0.0.1:\(redis)/t", ["--bus-password-file", file], [:]),
                                              ("redis://app:apppw@127.0.0.1:\(redis)/t", [], [:])] {
            let (server, port) = try startBroadcast(url, arguments, environment: environment)
            let got = try receive(1, from: server, port: port) {
                try redisCLI(redis, ["-a", "s3cret", "--no-auth-warning", "publish", "t", "{\"p\":1}"])
            }
            assertExit(got, 0)
            assertStdout(got, "{\"p\":1}\n")
            server.closeStdin()
            let end = finish(server)
            assertExit(end, 0)
            XCTAssertFalse(end.stderr.contains("s3cret") || end.stderr.contains("apppw"), end.stderr)
        }
    }

    /// A bus message over --max-message-size is dropped with a warning, never forwarded,
    /// whether tagged (skipped as it arrives) or not; one at the limit goes through.
    func testABusMessageOverTheLimitIsDropped() throws {
        let (_, redis) = try startRedis()
        let (server, port) = try startBroadcast("redis://127.0.0.1:\(redis)/t", ["--max-message-size", "100"])
        let x100 = [UInt8](repeating: 0x78, count: 100)
        let got = try receive(2, from: server, port: port) {
            try redisCLI(redis, ["--pipe"], stdin: publishCommands("t", [
                [UInt8](repeating: 0x78, count: 150), [0x02] + [UInt8](repeating: 0, count: 200), [UInt8](repeating: 0x78, count: 101),
                [0x01] + [UInt8](repeating: 0x79, count: 101), x100, Array("after".utf8),
            ]))
        }
        assertExit(got, 0)
        assertStdout(got, String(decoding: x100, as: UTF8.self) + "\nafter\n")
        server.closeStdin()
        let end = finish(server)
        assertExit(end, 0)
        XCTAssertEqual(end.stderr.components(separatedBy: "is over --max-message-size (100 bytes): dropped").count - 1, 4, end.stderr)
        assertStderr(end, contains: "wspipe: warning: a bus message of 150 bytes is over --max-message-size (100 bytes): dropped")
    }

    /// rediss:// to `redis-server --tls-port` with a CA made for the test: --cacert trusts
    /// it; without, the bus is not reachable (a warning naming the certificate) and the
    /// server still serves.
    func testTLSToTheBus() throws {
        let tls = try TLSMaterial.shared()
        let port = try LoopbackSocket(listening: false).port
        let (_, redis) = try startRedis(port: port, ["--tls-port", "\(port)", "--tls-cert-file", tls.serverCert, "--tls-key-file", tls.serverKey,
                                                     "--tls-ca-cert-file", tls.caCert, "--tls-auth-clients", "no"])
        let (server, serverPort) = try startBroadcast("rediss://127.0.0.1:\(redis)/t", ["--cacert", tls.caCert])
        let got = try receive(1, from: server, port: serverPort) {
            try redisCLI(redis, ["--tls", "--cacert", tls.caCert, "publish", "t", "over TLS"])
        }
        assertExit(got, 0)
        assertStdout(got, "over TLS\n")
        server.closeStdin()
        assertExit(finish(server), 0)

        let (untrusting, _) = try startBroadcast("rediss://127.0.0.1:\(redis)/t", subscribed: false)
        XCTAssertTrue(untrusting.stderr.wait(timeout: 15) { String(decoding: $0, as: UTF8.self).contains("not reachable: ") }, untrusting.stderr.text)
        untrusting.closeStdin()  // not read while the bus is away: the end waits too
        XCTAssertFalse(untrusting.stdout.waitForEnd(timeout: 0.5), "stdin is not read while the bus is away")
        untrusting.signal(SIGTERM)
        let end = finish(untrusting)
        assertDiedOf(end, SIGTERM)
        assertStderr(end, contains: "certificate")
        assertStderr(end, contains: "(clients are accepted meanwhile)")
    }

    /// --bus-inbound: a client's message goes to stdout and is published on the inbound
    /// channel, with --jsonl as its object naming the client and the process; a second
    /// process whose bus is that channel delivers it to its client.
    func testClientMessagesArePublishedOnTheInboundChannel() throws {
        let (_, redis) = try startRedis()
        let (a, portA) = try startBroadcast("redis://127.0.0.1:\(redis)/ticker", ["--jsonl", "--bus-inbound", "chat.in"])
        let (b, portB) = try startBroadcast("redis://127.0.0.1:\(redis)/chat.in")
        let got = try receive(1, from: b, port: portB) {
            let talker = try runWspipe(["ws://127.0.0.1:\(portA)/"], stdin: .bytes(Array("hi from a client\n".utf8)))
            assertExit(talker, 0)
        }
        assertExit(got, 0)
        XCTAssertEqual(got.stdoutText, "{\"type\":\"text\",\"data\":\"hi from a client\",\"client\":1,\"process\":\(a.pid)}\n")
        for server in [a, b] { server.closeStdin() }
        let endA = finish(a)
        assertExit(endA, 0)
        XCTAssertTrue(endA.stdoutText.contains("{\"type\":\"text\",\"data\":\"hi from a client\",\"client\":1}\n"), endA.stdoutText)
        assertExit(finish(b), 0)
    }

    /// Bad --bus URLs are usage errors, as are the bus options without
    /// --broadcast or --bus.
    func testUsageErrors() throws {
        for (arguments, message) in [
            (["--broadcast", "--bus", "nats2://127.0.0.1:4222/t"], "wspipe: --bus 'nats2://127.0.0.1:4222/t': 'nats2' is not a bus scheme"),
            (["--broadcast", "--bus", "nats://127.0.0.1/t.*"], "a NATS subject has no wildcards"),
            (["--broadcast", "--bus", "redis://127.0.0.1"], "no channel"),
            (["--echo", "--bus", "redis://127.0.0.1/t"], "--bus needs --broadcast"),
            (["--broadcast", "--bus-inbound", "x"], "--bus-inbound needs --bus"),
            (["--broadcast", "--bus", "redis://127.0.0.1/t", "-k"], "--insecure is a client option"),
            (["--broadcast", "--bus", "redis://u:p@127.0.0.1/t", "--bus-password-file", "/x"], "has a password already"),
        ] {
            let run = try runWspipe(["-l", "0"] + arguments)
            assertExit(run, 2)
            assertStderr(run, contains: message)
        }
    }

    // MARK: - NATS

    /// Two processes, 200 clients over them; 1,000 messages from one process's stdin and
    /// 1,000 from a raw NATS publisher at the same time: every client gets all 2,000
    /// byte-exact, the clients of one process in one order, each publisher's messages in
    /// the order it sent them (core NATS orders per publisher).
    func testNATSTwoProcessesEveryMessageInEachPublishersOrder() throws {
        let (_, nats) = try startNATS()
        let bus = "nats://127.0.0.1:\(nats)/ticker"
        let (a, portA) = try startBroadcast(bus, ["--jsonl"])
        let (b, portB) = try startBroadcast(bus)
        var fromStdin: [(text: Bool, bytes: [UInt8])] = []
        var published: [[UInt8]] = []
        var fromNATS: [(text: Bool, bytes: [UInt8])] = []
        for i in 0..<1000 {
            fromStdin.append(i % 2 == 0 ? (true, Array("s\(i) é".utf8)) : (false, [0x02, UInt8(i % 256)] + Array("s\(i)".utf8)))
            if i % 2 == 0 {
                published.append(Array("n\(i) {\"p\":\(i)}".utf8)); fromNATS.append((true, published.last!))
            } else {
                published.append([0x02, 0xFF] + Array("n\(i)".utf8)); fromNATS.append((false, [0xFF] + Array("n\(i)".utf8)))
            }
        }
        let dump = path("client0.txt")
        let clients = try startClients(200, expecting: 2000, seconds: 180, ports: [portA, portB], expected: fromStdin + fromNATS,
                                       dump: dump)
        for slice in 0..<10 {
            let lines = fromStdin[(slice * 100)..<(slice * 100 + 100)].map { jsonLine(text: $0.text, $0.bytes) }.joined()
            XCTAssertTrue(a.writeStdin(Array(lines.utf8)))
            try natsPublish(nats, "ticker", Array(published[(slice * 100)..<(slice * 100 + 100)]))
        }
        let (expected, lines) = results(clients, timeout: 240)
        XCTAssertEqual(lines.count, 200)
        XCTAssertEqual(lines.filter { $0.count != 2000 }.count, 0, "clients short of 2,000: \(Set(lines.map(\.count)))")
        XCTAssertEqual(Set(lines.map(\.set)), [expected ?? "?"], "the messages, byte-exact and with their types")
        for process in [0, 1] {
            XCTAssertEqual(Set(lines.filter { $0.process == process }.map(\.order)).count, 1, "one order for the clients of process \(process)")
        }
        XCTAssertEqual(Set(lines.map(\.close)), ["open"])
        // Client 0's messages: each publisher's in its own order.
        let got = try String(contentsOfFile: dump, encoding: .utf8).split(separator: "\n").map(String.init)
        func hex(_ m: (text: Bool, bytes: [UInt8])) -> String { (m.text ? "t " : "b ") + m.bytes.map { String(format: "%02x", $0) }.joined() }
        let stdinOrder = Set(fromStdin.map(hex)), natsOrder = Set(fromNATS.map(hex))
        XCTAssertEqual(got.filter { stdinOrder.contains($0) }, fromStdin.map(hex), "stdin's messages in stdin's order")
        XCTAssertEqual(got.filter { natsOrder.contains($0) }, fromNATS.map(hex), "the publisher's in its order")
        for server in [a, b] { server.closeStdin() }
        for server in [a, b] { assertExit(finish(server, timeout: 30), 0) }
    }

    /// NATS credentials (user and password, a token; a wrong one is exit 5), a payload over
    /// --max-message-size dropped, and nats-server killed and restarted on its port: the
    /// client stays and delivery resumes, the gap reported.
    func testNATSCredentialsLimitAndRestart() throws {
        var (natsChild, nats) = try startNATS(port: nil, ["--user", "app", "--pass", "apppw"])
        let wrong = try runWspipe(["-l", "0", "-v", "--broadcast", "--bus", "nats://app:hunter2@127.0.0.1:\(nats)/t"], stdin: .pipe)
        assertExit(wrong, 5)
        assertStderr(wrong, contains: "refused us: Authorization Violation")
        XCTAssertFalse(wrong.stderr.contains("hunter2"), wrong.stderr)

        let (server, port) = try startBroadcast("nats://app:apppw@127.0.0.1:\(nats)/t", ["--max-message-size", "100", "--jsonl"])
        let client = try spawnWspipe(["ws://127.0.0.1:\(port)/", "-n", "3"], stdin: .pipe)
        XCTAssertTrue(server.stderr.wait(timeout: 15) { String(decoding: $0, as: UTF8.self).contains("client 1 connected") }, server.stderr.text)
        try natsPublish(nats, "t", [[UInt8](repeating: 0x78, count: 150), Array("first".utf8)], credentials: "app:apppw")
        XCTAssertTrue(client.stdout.wait(timeout: 15) { String(decoding: $0, as: UTF8.self).contains("first\n") }, client.stdout.text)
        natsChild.kill()
        XCTAssertTrue(server.stderr.wait(timeout: 15) { String(decoding: $0, as: UTF8.self).contains("/t lost: ") }, server.stderr.text)
        (natsChild, nats) = try startNATS(port: nats, ["--user", "app", "--pass", "apppw"])
        XCTAssertTrue(server.stderr.wait(timeout: 30) { String(decoding: $0, as: UTF8.self).contains(" restored after ") }, server.stderr.text)
        XCTAssertTrue(server.writeStdin(Array("{\"type\":\"text\",\"data\":\"after the restart\"}\n".utf8)))
        try natsPublish(nats, "t", [Array("third".utf8)], credentials: "app:apppw")
        let got = finish(client)
        assertExit(got, 0)
        assertStdout(got, "first\nafter the restart\nthird\n")
        server.closeStdin()
        let end = finish(server)
        assertExit(end, 0)
        assertStderr(end, contains: "a bus message of 150 bytes is over --max-message-size (100 bytes): dropped")
        XCTAssertTrue(end.stdoutText.contains("{\"type\":\"bus_lost\",\"ts\":"), end.stdoutText)
        XCTAssertTrue(end.stdoutText.contains("{\"type\":\"bus_restored\",\"ts\":"), end.stdoutText)
        XCTAssertFalse(end.stderr.contains("apppw"), end.stderr)

        // A token: the URL's password alone.
        let (_, tokenPort) = try startNATS(port: nil, ["--auth", "s3cret-token"])
        let (tokenServer, _) = try startBroadcast("nats://s3cret-token@127.0.0.1:\(tokenPort)/t")
        tokenServer.closeStdin()
        assertExit(finish(tokenServer), 0)
    }

    /// tls:// to `nats-server --tls` with a CA made for the test: the INFO line in the
    /// clear, then TLS (--cacert trusts the CA), then CONNECT.
    func testNATSOverTLS() throws {
        let tls = try TLSMaterial.shared()
        let (_, nats) = try startNATS(port: nil, ["--tls", "--tlscert", tls.serverCert, "--tlskey", tls.serverKey])
        let (server, port) = try startBroadcast("tls://127.0.0.1:\(nats)/t", ["--cacert", tls.caCert])
        let got = try receive(1, from: server, port: port) {
            try natsPublish(nats, "t", [Array("over TLS".utf8)], tlsCA: tls.caCert)
        }
        assertExit(got, 0)
        assertStdout(got, "over TLS\n")
        server.closeStdin()
        assertExit(finish(server), 0)
    }
}
