// The integration-test harness: where things are, peers (Python servers in peers/),
// TLS material made at run time, raw sockets, and the XCTestCase base class that runs
// wspipe and cleans up after each test.
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
#if canImport(Glibc)
import Glibc
#endif

enum Locations {
    /// The package root: three levels above this file (Tests/IntegrationTests/Harness.swift).
    static let packageRoot: String = {
        var url = URL(fileURLWithPath: #filePath)
        for _ in 0..<3 { url.deleteLastPathComponent() }
        return url.path
    }()

    /// The venv python that scripts/setup makes (with `websockets`).
    static var python: String { packageRoot + "/.venv/bin/python" }
    static var websocat: String { packageRoot + "/.venv/bin/websocat" }
    static var peers: String { packageRoot + "/Tests/IntegrationTests/peers" }

    /// $WSPIPE_BIN, else `wspipe` next to the running test bundle (.build/debug/wspipe).
    static let wspipe: String = {
        if let path = ProcessInfo.processInfo.environment["WSPIPE_BIN"], !path.isEmpty { return path }
        let executable = (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe"))
            ?? Bundle.main.executablePath ?? CommandLine.arguments[0]
        return ((executable as NSString).deletingLastPathComponent as NSString).appendingPathComponent("wspipe")
    }()

    /// A small fixed environment: nothing inherited (no WSPIPE_BEARER, SSL_CERT_FILE, ...).
    static let baseEnvironment = ["PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8"]
}

struct HarnessError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

// MARK: - Peers

/// What record.py and raw.py wrote about one connection.
struct ConnectionRecord: Decodable {
    struct Message: Decodable, Equatable {
        let type: String
        let data: String
        var bytes: [UInt8] { Array(Data(base64Encoded: data) ?? Data()) }
        var text: String { String(decoding: bytes, as: UTF8.self) }
    }

    struct Close: Decodable, Equatable {
        let code: Int
        let reason: String
    }

    let path: String?
    let headers: [[String]]
    let subprotocol: String?
    let messages: [Message]
    let pings: [String]
    /// Pongs received (raw.py only).
    let pongs: [String]?
    let close: Close?
    let client_started_close: Bool?

    /// Values of the headers named `name` (any case), in order.
    func values(_ name: String) -> [String] {
        headers.filter { $0[0].lowercased() == name.lowercased() }.map { $0[1] }
    }

    var texts: [String] { messages.map(\.text) }
    var pingPayloads: [String] { pings.map { String(decoding: Data(base64Encoded: $0) ?? Data(), as: UTF8.self) } }
    var pongPayloads: [String] { (pongs ?? []).map { String(decoding: Data(base64Encoded: $0) ?? Data(), as: UTF8.self) } }
}

/// A running peer server: a Python script from peers/ (or websocat).
final class Peer {
    let process: ChildProcess
    let port: Int
    let recordFile: String?

    init(process: ChildProcess, port: Int, recordFile: String?) {
        self.process = process
        self.port = port
        self.recordFile = recordFile
    }

    /// The record of the `n`th connection (1-based), once the peer has written it.
    func record(_ n: Int = 1, timeout: Double = 15) throws -> ConnectionRecord {
        try record(n, as: ConnectionRecord.self, timeout: timeout)
    }

    /// The `n`th record (1-based) in the peer's record file, decoded as `type`, once the
    /// peer has announced it with "RECORDED n".
    func record<T: Decodable>(_ n: Int, as type: T.Type, timeout: Double = 15) throws -> T {
        guard let recordFile else { throw HarnessError("this peer records nothing") }
        guard process.stdout.waitForLine(startingWith: "RECORDED \(n)", timeout: timeout) != nil else {
            throw HarnessError("the peer wrote no record for connection \(n) within \(timeout) s; stderr:\n\(process.stderr.text)")
        }
        let records = try JSONDecoder().decode([T].self, from: Data(contentsOf: URL(fileURLWithPath: recordFile)))
        guard records.count >= n else { throw HarnessError("record file has \(records.count) records, expected \(n)") }
        return records[n - 1]
    }
}

// MARK: - TLS material

/// A CA, a server certificate for localhost/127.0.0.1/::1 signed by it, and one for
/// another name (other.example), made once per test run with the openssl CLI in a
/// temporary directory (removed at exit). Nothing secret is ever committed.
final class TLSMaterial: Sendable {
    let directory: String
    var caCert: String { directory + "/ca.pem" }
    var serverCert: String { directory + "/server.pem" }
    var serverKey: String { directory + "/server.key" }
    var otherCert: String { directory + "/other.pem" }
    var otherKey: String { directory + "/other.key" }

    private init(directory: String) { self.directory = directory }

    private static let lock = NSLock()
    nonisolated(unsafe) private static var cached: Result<TLSMaterial, HarnessError>?
    nonisolated(unsafe) private static var directoryToRemove: String?

    static func shared() throws -> TLSMaterial {
        lock.lock()
        defer { lock.unlock() }
        if let cached { return try cached.get() }
        let result: Result<TLSMaterial, HarnessError>
        do {
            result = .success(try generate())
        } catch let error as HarnessError {
            result = .failure(error)
        } catch {
            result = .failure(HarnessError("\(error)"))
        }
        cached = result
        return try result.get()
    }

    private static func generate() throws -> TLSMaterial {
        let directory = NSTemporaryDirectory() + "wspipe-it-tls-\(getpid())"
        try? FileManager.default.removeItem(atPath: directory)
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        directoryToRemove = directory
        atexit {
            if let directory = TLSMaterial.directoryToRemove { try? FileManager.default.removeItem(atPath: directory) }
        }
        let ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
        func openssl(_ arguments: [String]) throws {
            let child = try ChildProcess(executable: "/usr/bin/openssl", arguments: arguments,
                                         environment: Locations.baseEnvironment.merging(["HOME": directory]) { $1 })
            let result = child.wait(timeout: 30)
            guard result.exitCode == 0 else { throw HarnessError("openssl \(arguments.joined(separator: " ")) failed: \(result)") }
        }
        func write(_ name: String, _ text: String) throws {
            try text.write(toFile: directory + "/" + name, atomically: false, encoding: .utf8)
        }
        try openssl(["req", "-x509"] + ec + ["-keyout", directory + "/ca.key", "-out", directory + "/ca.pem", "-days", "2",
                     "-subj", "/CN=wspipe integration test CA",
                     "-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign,cRLSign"])
        for (name, names) in [("server", "DNS:localhost,IP:127.0.0.1,IP:::1"), ("other", "DNS:other.example")] {
            try write(name + ".ext", """
                subjectAltName=\(names)
                basicConstraints=CA:FALSE
                keyUsage=critical,digitalSignature
                extendedKeyUsage=serverAuth

                """)
            try openssl(["req"] + ec + ["-keyout", "\(directory)/\(name).key", "-out", "\(directory)/\(name).csr",
                                         "-subj", "/CN=\(name == "server" ? "localhost" : "other.example")"])
            try openssl(["x509", "-req", "-in", "\(directory)/\(name).csr", "-CA", directory + "/ca.pem",
                         "-CAkey", directory + "/ca.key", "-CAcreateserial", "-days", "2",
                         "-extfile", "\(directory)/\(name).ext", "-out", "\(directory)/\(name).pem"])
        }
        return TLSMaterial(directory: directory)
    }
}

// MARK: - Raw sockets

/// A TCP socket on the loopback bound to a free port: listening (the kernel completes
/// connections into the backlog, nobody ever accepts or answers them) or only bound
/// (connections to it are refused).
final class LoopbackSocket {
    let fd: Int32
    let port: Int

    init(listening: Bool) throws {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw HarnessError("socket: \(String(cString: strerror(errno)))") }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = 0
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { raw -> Bool in
                bind(fd, raw, length) == 0 && getsockname(fd, raw, &length) == 0
            }
        }
        guard bound, !listening || listen(fd, 16) == 0 else {
            Glibc.close(fd)
            throw HarnessError("bind/listen: \(String(cString: strerror(errno)))")
        }
        self.fd = fd
        port = Int(UInt16(bigEndian: address.sin_port))
    }

    /// Whether a connection is waiting to be accepted (no waiting).
    var hasPendingConnection: Bool {
        var entry = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
        return poll(&entry, 1, 0) > 0
    }

    deinit { Glibc.close(fd) }
}

/// Whether this machine can bind a TCP socket to ::1.
func ipv6LoopbackAvailable() -> Bool {
    let fd = socket(AF_INET6, Int32(SOCK_STREAM.rawValue), 0)
    guard fd >= 0 else { return false }
    defer { close(fd) }
    var address = sockaddr_in6()
    address.sin6_family = sa_family_t(AF_INET6)
    address.sin6_addr = in6addr_loopback
    return withUnsafePointer(to: &address) { pointer in
        pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) {
            bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in6>.size)) == 0
        }
    }
}

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
        let process = try ChildProcess(executable: executable, arguments: arguments, environment: environment, stdin: stdin)
        cleanups.append { process.kill() }
        let stream = portFromStderr ? process.stderr : process.stdout
        guard let announcement = stream.waitForLine(startingWith: portLine, timeout: 20) else {
            let result = process.wait(timeout: 0.1)
            XCTFail("peer \(arguments.first ?? executable) did not start: \(result)", file: file, line: line)
            throw HarnessError("peer did not start")
        }
        let digits = announcement.dropFirst(portLine.count).prefix { $0.isNumber }
        guard let port = Int(digits) else { throw HarnessError("bad port announcement '\(announcement)'") }
        return Peer(process: process, port: port, recordFile: recordFile)
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

// MARK: - Building server bytes

enum Wire {
    /// A correct 101 (raw.py fills in {accept}).
    static let switching = Array("HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: {accept}\r\n\r\n".utf8)

    /// A server frame (unmasked unless `mask` is given).
    static func frame(_ opcode: UInt8, _ payload: [UInt8], fin: Bool = true, rsv: UInt8 = 0, mask: [UInt8]? = nil) -> [UInt8] {
        var bytes: [UInt8] = [(fin ? 0x80 : 0) | (rsv << 4) | opcode]
        let maskBit: UInt8 = mask == nil ? 0 : 0x80
        if payload.count < 126 {
            bytes.append(maskBit | UInt8(payload.count))
        } else if payload.count < 65536 {
            bytes += [maskBit | 126, UInt8(payload.count >> 8), UInt8(payload.count & 0xFF)]
        } else {
            bytes.append(maskBit | 127)
            bytes += (0..<8).reversed().map { UInt8((UInt64(payload.count) >> (8 * UInt64($0))) & 0xFF) }
        }
        if let mask {
            bytes += mask
            bytes += payload.enumerated().map { $0.element ^ mask[$0.offset % 4] }
        } else {
            bytes += payload
        }
        return bytes
    }

    static func text(_ text: String, fin: Bool = true) -> [UInt8] { frame(0x1, Array(text.utf8), fin: fin) }

    static func close(_ code: UInt16, _ reason: [UInt8] = []) -> [UInt8] {
        frame(0x8, [UInt8(code >> 8), UInt8(code & 0xFF)] + reason)
    }
}
