// --max-clients-per-ip, --max-handshakes-per-ip, --rate-limit (pause and close) and
// --byte-rate against the real binary, with raw clients bound to chosen loopback
// addresses (127.0.0.2, 127.0.0.3: Linux routes all of 127/8 to lo).
import Foundation
import Glibc
import TestSupport
import XCTest

final class ServerLimitsTests: IntegrationTestCase {
    func testClientsPerAddressAreCappedWith429() throws {
        let (_, port) = try startListening(["--echo", "--max-clients-per-ip", "10", "--metrics", "/metrics"])
        var admitted: [String: [LimitsClient]] = [:]
        var refused: [String: Int] = [:]
        for (source, count) in [("127.0.0.2", 20), ("127.0.0.3", 5)] {
            for _ in 0..<count {
                let client = try LimitsClient(port: port, source: source)
                let (status, head) = try client.upgrade()
                if status == 101 {
                    admitted[source, default: []].append(client)
                } else {
                    XCTAssertEqual(status, 429, head)
                    XCTAssertTrue(head.lowercased().contains("\r\nretry-after: 1\r\n"), head)
                    refused[source, default: 0] += 1
                }
            }
        }
        XCTAssertEqual(admitted["127.0.0.2"]?.count, 10)
        XCTAssertEqual(refused["127.0.0.2"], 10)
        XCTAssertEqual(admitted["127.0.0.3"]?.count, 5)
        XCTAssertNil(refused["127.0.0.3"])
        // The admitted ones are served; one leaving makes room for its address.
        let first = try XCTUnwrap(admitted["127.0.0.2"]?.first)
        try first.sendText(Array("hello".utf8))
        XCTAssertEqual(try first.readFrame().payload, Array("hello".utf8))
        first.close()
        var status = 0
        for _ in 0..<40 {
            let again = try LimitsClient(port: port, source: "127.0.0.2")
            status = try again.upgrade().status
            if status == 101 { admitted["127.0.0.2"]?.append(again); break }
            usleep(50_000)
        }
        XCTAssertEqual(status, 101, "a client that left frees its place")
        // Counted by reason, never by address; a plain GET is no client.
        let metrics = try LimitsClient.get(port: port, path: "/metrics", source: "127.0.0.2").body
        XCTAssertTrue(metrics.contains("wspipe_limited_total{reason=\"clients_per_ip\"} "), metrics)
        XCTAssertFalse(metrics.contains("127.0.0"), "no address in the metrics")
        let refusedCount = metrics.split(separator: "\n").first { $0.hasPrefix("wspipe_limited_total{reason=\"clients_per_ip\"} ") }
        XCTAssertGreaterThanOrEqual(Int(refusedCount?.split(separator: " ").last ?? "") ?? 0, 10, metrics)
    }

    func testRequestsPerAddressAreRateLimitedPlainGetsIncluded() throws {
        let (_, port) = try startListening(["--echo", "--max-handshakes-per-ip", "1/s:3", "--health", "/health"])
        var statuses: [Int] = []
        for index in 0..<5 {
            if index == 1 {
                statuses.append(try LimitsClient(port: port, source: "127.0.0.2").upgrade().status)
            } else {
                statuses.append(try LimitsClient.get(port: port, path: "/health", source: "127.0.0.2").status)
            }
        }
        XCTAssertEqual(statuses, [200, 101, 200, 429, 429], "the burst of 3 covers GETs and upgrades alike")
        let refused = try LimitsClient.get(port: port, path: "/health", source: "127.0.0.2")
        XCTAssertEqual(refused.status, 429)
        XCTAssertTrue(refused.head.lowercased().contains("\r\nretry-after: 1\r\n"), refused.head)
        XCTAssertEqual(try LimitsClient.get(port: port, path: "/health", source: "127.0.0.3").status, 200, "another address")
        usleep(1_100_000)
        XCTAssertEqual(try LimitsClient.get(port: port, path: "/health", source: "127.0.0.2").status, 200, "a second later, one more")
    }

    func testTheSlowestHandshakeRateSaysItsWaitAndKeepsServing() throws {
        // 1e-300/s was accepted and its wait of 1e300 s overflowed Int when Retry-After was
        // written: the server trapped. Rates are now plain numbers from 0.001/s (Retry-After
        // stays capped at a year).
        let (_, port) = try startListening(["--echo", "--max-handshakes-per-ip", "0.001/s", "--health", "/health"])
        XCTAssertEqual(try LimitsClient.get(port: port, path: "/health", source: "127.0.0.2").status, 200)
        let refused = try LimitsClient.get(port: port, path: "/health", source: "127.0.0.2")
        XCTAssertEqual(refused.status, 429)
        XCTAssertTrue(refused.head.lowercased().contains("\r\nretry-after: 1000\r\n"), refused.head)
        XCTAssertEqual(try LimitsClient.get(port: port, path: "/health", source: "127.0.0.3").status, 200, "still serving")
    }

    /// The p99 round trip of `count` echoes, one every 2 ms, in seconds.
    private func roundTrips(_ port: Int, count: Int) throws -> Double {
        let client = try LimitsClient(port: port, source: "127.0.0.3")
        XCTAssertEqual(try client.upgrade().status, 101)
        var times: [Double] = []
        for index in 0..<count {
            let payload = Array("probe \(index)".utf8)
            let start = monotonicSeconds()
            try client.sendText(payload)
            XCTAssertEqual(try client.readFrame().payload, payload)
            times.append(monotonicSeconds() - start)
            usleep(2000)
        }
        client.close()
        times.sort()
        return times[min(times.count - 1, Int(Double(times.count) * 0.99))]
    }

    func testAFloodIsPacedWhileAnotherClientStaysQuick() throws {
        let (idleServer, idlePort) = try startListening(["--echo"])
        let idleP99 = try roundTrips(idlePort, count: 300)
        idleServer.kill()

        let (_, port) = try startListening(["--echo", "--rate-limit", "1000/s", "--metrics", "/metrics"])
        let flood = try LimitsClient(port: port, source: "127.0.0.2")
        XCTAssertEqual(try flood.upgrade().status, 101)
        let total = 3000
        let start = monotonicSeconds()
        let writer = Thread {
            for index in 0..<total { try? flood.sendText(Array(String(format: "m%05d", index).utf8)) }
        }
        writer.start()
        let echoes = EchoCount()
        let reader = Thread {
            while echoes.received < total, let frame = try? flood.readFrame() {
                echoes.note(frame.payload == Array(String(format: "m%05d", echoes.received).utf8))
            }
        }
        reader.start()
        usleep(200_000)
        let busyP99 = try roundTrips(port, count: 300)
        while echoes.received < total && monotonicSeconds() - start < 20 { usleep(20_000) }
        let elapsed = monotonicSeconds() - start
        XCTAssertEqual(echoes.received, total, "every message is echoed: nothing dropped")
        XCTAssertTrue(echoes.inOrder)
        // 1,000 at once (the burst), then 1,000 a second: 2,000 more take 2 s.
        XCTAssertGreaterThan(elapsed, 1.8, "the flood went faster than the rate")
        XCTAssertLessThan(elapsed, 6, "the flood was held back far below the rate")
        let allowed = max(2 * idleP99, 0.005)
        XCTAssertLessThanOrEqual(busyP99, allowed, "p99 \(busyP99 * 1000) ms beside the flood, \(idleP99 * 1000) ms idle")
        print("rate-limit flood: \(total) echoes in \(elapsed) s; other client's p99 \(busyP99 * 1000) ms (idle server \(idleP99 * 1000) ms)")
        let metrics = try LimitsClient.get(port: port, path: "/metrics", source: "127.0.0.4").body
        let paused = metrics.split(separator: "\n").first { $0.hasPrefix("wspipe_limited_total{reason=\"rate_paused\"} ") }
        XCTAssertGreaterThan(Int(paused?.split(separator: " ").last ?? "") ?? 0, 0, metrics)
    }

    func testCloseActionCloses1008() throws {
        let (_, port) = try startListening(["--echo", "--rate-limit", "5/s", "--rate-limit-action", "close", "--metrics", "/metrics"])
        let client = try LimitsClient(port: port, source: "127.0.0.2")
        XCTAssertEqual(try client.upgrade().status, 101)
        for index in 0..<20 { try client.sendText(Array("m\(index)".utf8)) }
        var echoes = 0
        var closeCode: Int?
        while let frame = try? client.readFrame() {
            if frame.opcode == 8 {
                closeCode = frame.payload.count >= 2 ? Int(frame.payload[0]) << 8 | Int(frame.payload[1]) : nil
                break
            }
            echoes += 1
        }
        XCTAssertEqual(closeCode, 1008)
        XCTAssertEqual(echoes, 5, "the burst, and nothing of the message over the rate")
        let metrics = try LimitsClient.get(port: port, path: "/metrics", source: "127.0.0.4").body
        XCTAssertTrue(metrics.contains("wspipe_limited_total{reason=\"rate_closed\"} 1\n"), metrics)
    }

    /// Every server mode reads through the same driver: over the rate, each closes with 1008.
    func testEveryModeClosesAClientOverTheRate() throws {
        let target = try LoopbackSocket(listening: true)
        let modes: [[String]] = [["--exec", "cat"], ["--broadcast"], [], ["--forward", "127.0.0.1:\(target.port)"], ["--echo"]]
        for mode in modes {
            let child = try spawnWspipe(["-l", "0", "--rate-limit", "3/s", "--rate-limit-action", "close"] + mode, stdin: .pipe)
            defer { child.kill() }
            guard let line = child.stderr.waitForLine(startingWith: "wspipe: listening on ws://127.0.0.1:", timeout: 15),
                  let port = Int(line.split(separator: ":").last?.split(separator: "/").first ?? "") else {
                XCTFail("\(mode): no listening line: \(child.stderr.text)")
                continue
            }
            let client = try LimitsClient(port: port, source: "127.0.0.2")
            XCTAssertEqual(try client.upgrade().status, 101, mode.joined(separator: " "))
            for index in 0..<10 { try client.sendText(Array("m\(index)".utf8)) }
            var closeCode: Int?
            while let frame = try? client.readFrame() {
                guard frame.opcode == 8 else { continue }
                closeCode = frame.payload.count >= 2 ? Int(frame.payload[0]) << 8 | Int(frame.payload[1]) : nil
                break
            }
            XCTAssertEqual(closeCode, 1008, "mode \(mode.joined(separator: " ")): \(child.stderr.text)")
        }
    }

    /// A Unix socket's clients have no address: the per-address limits leave them alone.
    func testAUnixListenerAppliesNoPerAddressLimit() throws {
        let socketPath = path("limits.sock")
        let child = try spawnWspipe(["-l", "unix:\(socketPath)", "--echo", "--max-clients-per-ip", "1",
                                     "--max-handshakes-per-ip", "1/s:1"], stdin: .null)
        defer { child.kill() }
        XCTAssertNotNil(child.stderr.waitForLine(startingWith: "wspipe: listening on", timeout: 15), child.stderr.text)
        let clients = try (0..<3).map { _ in try LimitsClient(unixPath: socketPath) }
        for client in clients { XCTAssertEqual(try client.upgrade().status, 101) }
    }

    func testByteRatePacesLargeMessages() throws {
        let (_, port) = try startListening(["--echo", "--byte-rate", "10K/s"])
        let client = try LimitsClient(port: port, source: "127.0.0.2")
        XCTAssertEqual(try client.upgrade().status, 101)
        let messages = (0..<4).map { index in [UInt8](repeating: UInt8(ascii: "a") + UInt8(index), count: 10 * 1024) }
        let start = monotonicSeconds()
        for message in messages { try client.sendText(message) }
        for (index, message) in messages.enumerated() {
            XCTAssertTrue(try client.readFrame().payload == message, "message \(index) echoed whole")
        }
        let elapsed = monotonicSeconds() - start
        // 10 KiB at once, then 10 KiB a second: the fourth message is read 2 s later.
        XCTAssertGreaterThan(elapsed, 1.8)
        XCTAssertLessThan(elapsed, 6)
    }

    func testLimitOptionsNeedTheirLimit() throws {
        for (arguments, words) in [(["--echo", "--ipv6-prefix", "48"], "--ipv6-prefix is for"),
                                   (["--echo", "--rate-limit-action", "close"], "--rate-limit-action is for"),
                                   (["--echo", "--rate-limit", "100"], "is not a rate"),
                                   (["--echo", "--byte-rate", "1Q/s"], "is not a rate"),
                                   (["--echo", "--rate-limit", "1e-300/s"], "is not a rate"),
                                   (["--echo", "--rate-limit", "0.0001/s"], "is slower than 0.001/s"),
                                   (["--echo", "--byte-rate", "1G/s:1T"], "sizes take K, M or G")] {
            let result = try runWspipe(["-l", "0"] + arguments, stdin: .null, timeout: 10)
            XCTAssertEqual(result.exitCode, 2, arguments.joined(separator: " "))
            XCTAssertTrue(result.stderr.contains(words), result.stderr)
        }
    }
}

/// The flood's echoes, counted by its reader thread.
private final class EchoCount: @unchecked Sendable {
    private let lock = NSLock()
    private var count = 0
    private var ordered = true

    var received: Int { lock.withLock { count } }
    var inOrder: Bool { lock.withLock { ordered } }

    func note(_ expected: Bool) {
        lock.withLock {
            count += 1
            if !expected { ordered = false }
        }
    }
}

private func monotonicSeconds() -> Double {
    var spec = timespec()
    clock_gettime(CLOCK_MONOTONIC, &spec)
    return Double(spec.tv_sec) + Double(spec.tv_nsec) / 1e9
}

/// A raw WebSocket client from a chosen source address: the upgrade's status and head,
/// masked text frames out (a zero key: the payload as is), frames in.
final class LimitsClient: @unchecked Sendable {
    let fd: Int32
    private var buffer: [UInt8] = []

    init(port: Int, source: String) throws {
        fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        var timeout = timeval(tv_sec: 10, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        var one: Int32 = 1
        setsockopt(fd, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
        var local = sockaddr_in()
        local.sin_family = sa_family_t(AF_INET)
        local.sin_addr.s_addr = inet_addr(source)
        var remote = sockaddr_in()
        remote.sin_family = sa_family_t(AF_INET)
        remote.sin_port = in_port_t(UInt16(port).bigEndian)
        remote.sin_addr.s_addr = inet_addr("127.0.0.1")
        let size = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafePointer(to: &local) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, size) } }
        let connected = withUnsafePointer(to: &remote) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, size) } }
        guard bound == 0, connected == 0 else {
            let why = String(cString: strerror(errno))
            Glibc.close(fd)
            throw HarnessError("bind \(source) / connect: \(why)")
        }
    }

    init(unixPath: String) throws {
        fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        var timeout = timeval(tv_sec: 10, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            for (index, byte) in unixPath.utf8.prefix(raw.count - 1).enumerated() { raw[index] = byte }
        }
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        guard connected == 0 else {
            let why = String(cString: strerror(errno))
            Glibc.close(fd)
            throw HarnessError("connect \(unixPath): \(why)")
        }
    }

    deinit { Glibc.close(fd) }

    func close() { shutdown(fd, Int32(SHUT_RDWR)) }

    private func write(_ bytes: [UInt8]) throws {
        var offset = 0
        while offset < bytes.count {
            let n = bytes[offset...].withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            guard n > 0 else { throw HarnessError("send: \(String(cString: strerror(errno)))") }
            offset += n
        }
    }

    /// More bytes into `buffer`; false at the end of the stream or a timeout.
    private func fill() -> Bool {
        var chunk = [UInt8](repeating: 0, count: 65536)
        let n = recv(fd, &chunk, chunk.count, 0)
        guard n > 0 else { return false }
        buffer += chunk[..<n]
        return true
    }

    private func take(_ count: Int) throws -> [UInt8] {
        while buffer.count < count { guard fill() else { throw HarnessError("the stream ended") } }
        defer { buffer.removeFirst(count) }
        return Array(buffer[..<count])
    }

    /// The response head to `request` and its status.
    private func head(after request: String) throws -> (status: Int, head: String) {
        try write(Array(request.utf8))
        while buffer.firstRange(of: [13, 10, 13, 10]) == nil { guard fill() else { break } }
        let end = buffer.firstRange(of: [13, 10, 13, 10])?.upperBound ?? buffer.count
        let head = String(decoding: buffer[..<end], as: UTF8.self)
        buffer.removeFirst(end)
        return (Int(head.split(separator: " ").dropFirst().first ?? "") ?? 0, head)
    }

    func upgrade() throws -> (status: Int, head: String) {
        try head(after: "GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
            + "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n")
    }

    /// A plain GET from `source`: its status, head and body (read to the end).
    static func get(port: Int, path: String, source: String) throws -> (status: Int, head: String, body: String) {
        let client = try LimitsClient(port: port, source: source)
        let (status, head) = try client.head(after: "GET \(path) HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
        while client.fill() {}
        return (status, head, String(decoding: client.buffer, as: UTF8.self))
    }

    func sendText(_ payload: [UInt8]) throws {
        var frame: [UInt8] = [0x81]
        switch payload.count {
        case ..<126: frame.append(0x80 | UInt8(payload.count))
        case ..<65536: frame += [0x80 | 126, UInt8(payload.count >> 8), UInt8(payload.count & 0xFF)]
        default: frame.append(0x80 | 127); frame += (0..<8).reversed().map { UInt8(truncatingIfNeeded: payload.count >> ($0 * 8)) }
        }
        try write(frame + [0, 0, 0, 0] + payload)
    }

    /// The next message from the server (its fragments joined), or a Close (opcode 8).
    func readFrame() throws -> (opcode: UInt8, payload: [UInt8]) {
        var opcode: UInt8 = 0
        var payload: [UInt8] = []
        while true {
            let start = try take(2)
            var length = Int(start[1] & 0x7F)
            if length == 126 {
                length = try take(2).reduce(0) { $0 << 8 | Int($1) }
            } else if length == 127 {
                length = try take(8).reduce(0) { $0 << 8 | Int($1) }
            }
            let bytes = try take(length)
            let kind = start[0] & 0x0F
            if kind == 8 { return (8, bytes) }
            if kind >= 8 { continue }  // a Ping or Pong
            if kind != 0 { opcode = kind }
            payload += bytes
            if start[0] & 0x80 != 0 { return (opcode, payload) }
        }
    }
}
