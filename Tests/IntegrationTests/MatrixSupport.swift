// What the two combination matrices share: running cases on a few threads at once, the
// children they start (killed at the end), failures gathered per case and reported on the
// test's thread, the peers' deterministic payloads, and the tools a matrix needs.
import Foundation
import TestSupport
import XCTest
#if canImport(Glibc)
import Glibc
#endif

/// One matrix run: its children, its failures, its workers.
final class MatrixRun: @unchecked Sendable {
    private let lock = NSLock()
    private var children: [ChildProcess] = []
    private var failures: [String] = []
    private var files: [String] = []
    let directory: String

    init(directory: String) { self.directory = directory }

    /// Spawns a child that the run kills at its end if it is still running.
    func spawn(_ executable: String, _ arguments: [String], environment: [String: String] = [:],
               stdin: StandardInput = .null) throws -> ChildProcess {
        let child = try ChildProcess(executable: executable, arguments: arguments,
                                     environment: Locations.baseEnvironment.merging(environment) { $1 }, stdin: stdin)
        lock.withLock { children.append(child) }
        return child
    }

    /// A file (a Unix socket outside the test's directory) removed at the end.
    func removeAtEnd(_ path: String) {
        lock.withLock { files.append(path) }
    }

    func fail(_ text: String) {
        lock.withLock { failures.append(text) }
    }

    var failureCount: Int { lock.withLock { failures.count } }

    /// Runs `body` for every item on `workers` threads; an error thrown fails that item.
    func forEach<Item: Sendable>(_ items: [Item], workers: Int, name: @escaping @Sendable (Item) -> String,
                                 _ body: @escaping @Sendable (Item) throws -> Void) {
        let next = NextIndex()
        let group = DispatchGroup()
        for _ in 0..<max(1, min(workers, items.count)) {
            group.enter()
            let thread = Thread { [self] in
                while let index = next.take(below: items.count) {
                    do { try body(items[index]) } catch { fail("\(name(items[index])): \(error)") }
                }
                group.leave()
            }
            thread.stackSize = 4 << 20
            thread.start()
        }
        group.wait()
    }

    /// Fails the test once per failure gathered, then kills every child still running.
    func finish(file: StaticString = #filePath, line: UInt = #line) {
        let (gathered, started, made) = lock.withLock { (failures, children, files) }
        for failure in gathered { XCTFail(failure, file: file, line: line) }
        started.forEach { $0.kill() }
        made.forEach { unlink($0) }
    }
}

/// Hands out 0, 1, 2, ... to the workers.
private final class NextIndex: @unchecked Sendable {
    private let lock = NSLock()
    private var value = 0

    func take(below count: Int) -> Int? {
        lock.withLock {
            defer { value += 1 }
            return value < count ? value : nil
        }
    }
}

enum MatrixTools {
    /// The tools a matrix needs, through Tool (a missing one skips the test, or fails it
    /// under CI=true); websocat comes with .venv, which every integration test needs.
    static func require(_ tools: [Tool], file: StaticString = #filePath, line: UInt = #line) throws {
        guard FileManager.default.isExecutableFile(atPath: Locations.websocat) else {
            XCTFail("\(Locations.websocat) is missing: run scripts/setup", file: file, line: line)
            throw HarnessError("no websocat")
        }
        _ = try Tool.nodeWithWS(file: file, line: line)
        for tool in tools { _ = try tool.path(file: file, line: line) }
    }

    /// Node, and its NODE_PATH: the directory holding the `ws` module (after `require`).
    static var node: String { (try? Tool.node.path()) ?? Tool.node.candidates[0] }
    static var nodeModules: String {
        (((try? Tool.nodeWS.path()) ?? Tool.nodeWS.candidates[0]) as NSString).deletingLastPathComponent
    }

    /// The run's TLS material as PKCS#12 (websocat's wss-l: takes no PEM), made once.
    static func pkcs12(_ tls: TLSMaterial) throws -> String {
        let path = tls.directory + "/server.p12"
        lock.lock()
        defer { lock.unlock() }
        if FileManager.default.fileExists(atPath: path) { return path }
        let child = try ChildProcess(executable: "/usr/bin/openssl",
                                     arguments: ["pkcs12", "-export", "-out", path, "-inkey", tls.serverKey, "-in", tls.serverCert,
                                                 "-passout", "pass:"], environment: Locations.baseEnvironment)
        let result = child.wait(timeout: 30)
        guard result.exitCode == 0 else { throw HarnessError("openssl pkcs12: \(result)") }
        return path
    }

    private static let lock = NSLock()
}

/// Deterministic payloads: compressible text (words, no character JSON escapes) and bytes
/// with runs and noise, so permessage-deflate has real work and a shifted byte shows.
enum MatrixPayload {
    private static let words = ["wspipe", "matrix", "deflate", "frame", "socket", "message", "window", "bits", "0123456789",
                                "reconnect", "proxy", "unix", "tls", "echo"]

    static func text(_ count: Int, seed: Int) -> String {
        var state = UInt64(truncatingIfNeeded: seed &* 2654435761 &+ 1)
        var out: [UInt8] = []
        out.reserveCapacity(count + 16)
        while out.count < count {
            state = state &* 6364136223846793005 &+ 1442695040888963407
            let word = words[Int(state >> 33) % words.count]
            out += Array(word.utf8)
            out.append(state >> 60 == 0 ? 0x2C : 0x20)
        }
        return String(decoding: out.prefix(count), as: UTF8.self)
    }

    static func bytes(_ count: Int, seed: Int) -> [UInt8] {
        var state = UInt64(truncatingIfNeeded: seed &* 40503 &+ 7)
        var out: [UInt8] = []
        out.reserveCapacity(count)
        while out.count < count {
            state = state &* 6364136223846793005 &+ 1442695040888963407
            let byte = UInt8(truncatingIfNeeded: state >> 56)
            out += state & 1 == 0 ? [byte] : [UInt8](repeating: byte, count: Int(state >> 40 & 15))
        }
        return Array(out.prefix(count))
    }
}

/// A port that was free a moment ago (for peers that cannot report the one they took).
func matrixFreePort() throws -> Int { try LoopbackSocket(listening: false).port }

/// A Unix socket path short enough for sockaddr_un.
func matrixSocketPath(_ name: String) -> String {
    "/tmp/wsm-\(getpid())-\(name).sock"
}
