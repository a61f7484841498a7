// --bus-ping: a bus connection that goes silent without closing (peers/relay.py's blackhole
// between wspipe and a real redis-server or nats-server: nothing forwarded, no FIN, no RST)
// is lost within the interval and the timeout, dialed again, and restored once the relay
// forwards again; a busy bus gets no PING. The interval is 0.5 s here (1 s for the PING
// count); every wait is bounded.
import Foundation
import XCTest
import TestSupport
#if canImport(Glibc)
import Glibc
#endif

final class BusKeepaliveTests: BusTestCase {
    private let interval = 0.5
    /// Beyond interval + timeout: a loaded machine's scheduling, the harness's polling.
    private let slack = 2.0

    private func startRelay(to target: Int, _ arguments: [String] = []) throws -> Peer {
        try startPeer(executable: Locations.python, arguments: ["\(Locations.peers)/relay.py", "--port", "0", "--target", "\(target)",
                                                                "--log", path("relay.log")] + arguments)
    }

    private func stderrShows(_ server: ChildProcess, _ text: String, within seconds: Double) -> Bool {
        server.stderr.wait(timeout: seconds) { String(decoding: $0, as: UTF8.self).contains(text) }
    }

    /// A client of `port` that takes `count` messages, once the server has it.
    private func startClient(_ server: ChildProcess, port: Int, count: Int) throws -> ChildProcess {
        let client = try spawnWspipe(["ws://127.0.0.1:\(port)/", "-n", "\(count)"], stdin: .pipe)
        XCTAssertTrue(stderrShows(server, "client 1 connected", within: 15), server.stderr.text)
        return client
    }

    private func clientGot(_ client: ChildProcess, _ text: String) -> Bool {
        client.stdout.wait(timeout: 15) { String(decoding: $0, as: UTF8.self).contains(text + "\n") }
    }

    /// SIGUSR1 to the relay (`holed` connections blackholed, and new ones until `reopen`:
    /// SIGUSR2 at once), then the bus must be lost within interval + timeout + slack.
    private func blackhole(_ relay: Peer, holed: Int, reopen: Bool = false, lose server: ChildProcess,
                           file: StaticString = #filePath, line: UInt = #line) {
        let start = Date()
        relay.process.signal(SIGUSR1)
        XCTAssertEqual(relay.process.stdout.waitForLine(startingWith: "HOLE", timeout: 10), "HOLE \(holed)", file: file, line: line)
        if reopen { forwardAgain(relay) }
        let bound = 2 * interval + slack
        XCTAssertTrue(stderrShows(server, " lost: nothing came from it for ", within: bound), server.stderr.text, file: file, line: line)
        XCTAssertLessThanOrEqual(Date().timeIntervalSince(start), bound, "lost within --bus-ping's interval and timeout",
                                 file: file, line: line)
    }

    private func forwardAgain(_ relay: Peer) {
        relay.process.signal(SIGUSR2)
        XCTAssertEqual(relay.process.stdout.waitForLine(startingWith: "OPEN", timeout: 10), "OPEN")
    }

    /// The server's --jsonl events of the gap, once its stdin ends.
    private func assertGapReported(_ server: ChildProcess, file: StaticString = #filePath, line: UInt = #line) {
        server.closeStdin()
        let end = finish(server, timeout: 30)
        assertExit(end, 0, file: file, line: line)
        let events = end.stdoutText.split(separator: "\n").filter { $0.contains("\"type\":\"bus_") }
        XCTAssertEqual(events.count, 2, end.stdoutText, file: file, line: line)
        XCTAssertTrue(events.first?.contains("\"reason\":\"nothing came from it for ") == true
                      && events.first?.contains("not even an answer to PING (--bus-ping)") == true, "\(events)", file: file, line: line)
        XCTAssertTrue(events.last?.hasPrefix("{\"type\":\"bus_restored\",") == true, "\(events)", file: file, line: line)
    }

    /// A client gets `before`; `bus` (through `relay`) is blackholed, as is every
    /// connection dialed while the outage lasts: lost within the bound, an attempt finds the
    /// bus silent too; the relay forwards again: restored, and `after` reaches the client.
    private func outage(_ bus: String, through relay: Peer, publish: (String) throws -> Void,
                        file: StaticString = #filePath, line: UInt = #line) throws {
        let (server, port) = try startBroadcast(bus, ["--bus-ping", "\(interval)", "--jsonl"])
        let client = try startClient(server, port: port, count: 2)
        try publish("before")
        XCTAssertTrue(clientGot(client, "before"), client.stdout.text, file: file, line: line)
        blackhole(relay, holed: 1, lose: server, file: file, line: line)
        XCTAssertTrue(stderrShows(server, " not reachable: nothing came from it for ", within: 15), server.stderr.text,
                      file: file, line: line)
        forwardAgain(relay)
        XCTAssertTrue(stderrShows(server, " restored after ", within: 15), server.stderr.text, file: file, line: line)
        try publish("after")
        let got = finish(client)
        assertExit(got, 0, file: file, line: line)
        assertStdout(got, "before\nafter\n", file: file, line: line)
        assertGapReported(server, file: file, line: line)
    }

    /// The Redis subscriber blackholed (the publisher untouched), and the subscribers dialed
    /// while the outage lasts (SUBSCRIBE never answered: the handshake's silence counts too):
    /// a process whose clients only receive notices, and gets the channel again after.
    func testASilentRedisSubscriberIsLostAndRestored() throws {
        let (_, redis) = try startRedis()
        let relay = try startRelay(to: redis, ["--hole-match", "SUBSCRIBE"])
        try outage("redis://127.0.0.1:\(relay.port)/t", through: relay) { try redisCLI(redis, ["publish", "t", $0]) }
    }

    /// The publishing connection blackholed (idle: this process publishes nothing until
    /// then): lost too, and stdin's next message goes through the new one.
    func testASilentRedisPublisherIsLost() throws {
        let (_, redis) = try startRedis()
        let relay = try startRelay(to: redis, ["--hole-match", "PING"])
        let (server, port) = try startBroadcast("redis://127.0.0.1:\(relay.port)/t", ["--bus-ping", "\(interval)", "--jsonl"])
        let client = try startClient(server, port: port, count: 1)
        blackhole(relay, holed: 1, reopen: true, lose: server)
        XCTAssertTrue(stderrShows(server, " restored after ", within: 15), server.stderr.text)
        XCTAssertTrue(server.writeStdin(Array("{\"type\":\"text\",\"data\":\"through the new publisher\"}\n".utf8)))
        let got = finish(client)
        assertExit(got, 0)
        assertStdout(got, "through the new publisher\n")
        assertGapReported(server)
    }

    /// NATS's one connection blackholed, and every one dialed while the outage lasts (no
    /// INFO: silent from the start).
    func testASilentNATSConnectionIsLostAndRestored() throws {
        let (_, nats) = try startNATS()
        let relay = try startRelay(to: nats)
        try outage("nats://127.0.0.1:\(relay.port)/t", through: relay) { try natsPublish(nats, "t", [Array($0.utf8)]) }
    }

    /// Messages every 0.1 s through both Redis connections (PUBLISH and its reply, the
    /// channel's message): no PING in 3 s with --bus-ping 1 (Redis counts the PINGs it
    /// handles); then idle for 2.6 s: PINGs.
    func testABusyBusGetsNoPingAndAnIdleOneDoes() throws {
        let (_, redis) = try startRedis()
        let (server, port) = try startBroadcast("redis://127.0.0.1:\(redis)/t", ["--bus-ping", "1"])
        func pings() throws -> Int {
            let stats = try redisCLI(redis, ["info", "commandstats"]).stdoutText
            guard let line = stats.split(whereSeparator: \.isNewline).first(where: { $0.hasPrefix("cmdstat_ping:calls=") }),
                  let calls = Int(line.dropFirst("cmdstat_ping:calls=".count).prefix { $0.isNumber }) else { return 0 }
            return calls
        }
        let client = try startClient(server, port: port, count: 31)
        server.writeStdin("m0\n")
        XCTAssertTrue(clientGot(client, "m0"), client.stdout.text)
        let before = try pings()
        for i in 1...30 {
            server.writeStdin("m\(i)\n")
            usleep(100_000)
        }
        let busy = try pings() - before
        assertExit(finish(client), 0)
        usleep(2_600_000)
        let idle = try pings() - before - busy
        XCTAssertEqual(busy, 0, "no PING while messages flow both ways")
        XCTAssertGreaterThanOrEqual(idle, 2, "the idle connections are pinged")
        server.closeStdin()
        let end = finish(server)
        assertExit(end, 0)
        XCTAssertFalse(end.stderr.contains(" lost: "), "the PINGs' answers are understood: \(end.stderr)")
    }
}
