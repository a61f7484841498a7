// What the --bus tests share: a real redis-server or nats-server on loopback (started on a
// free port, killed at the end; the test skipped with one line when it is not installed,
// failed under CI=true),
// wspipe --broadcast on it, and publishers beside it.
import Foundation
import XCTest
import TestSupport
#if canImport(Glibc)
import Glibc
#endif

class BusTestCase: IntegrationTestCase {
    /// A redis-server on 127.0.0.1:`port` (a free one when nil), ready for connections.
    func startRedis(port: Int? = nil, _ extra: [String] = []) throws -> (ChildProcess, Int) {
        let server = try Tool.redisServer.path()
        _ = try Tool.redisCLI.path()  // the tests publish with it
        let port = try port ?? LoopbackSocket(listening: false).port
        let tls = extra.contains("--tls-port")
        let child = try startServer(server, ["--port", tls ? "0" : "\(port)", "--bind", "127.0.0.1", "--save", "",
                                                       "--appendonly", "no", "--dir", temporaryDirectory] + extra,
                                    ready: "Ready to accept connections") { $0.stdout }
        return (child, port)
    }

    /// `executable ARGUMENTS`, killed at the end, once `output` shows `ready`.
    private func startServer(_ executable: String, _ arguments: [String], ready: String,
                             output: (ChildProcess) -> OutputCollector) throws -> ChildProcess {
        let child = try ChildProcess(executable: executable, arguments: arguments, environment: Locations.baseEnvironment, stdin: .null)
        addTeardownBlock { child.kill() }
        guard output(child).wait(timeout: 15, until: { String(decoding: $0, as: UTF8.self).contains(ready) }) else {
            child.kill()
            throw HarnessError("\(executable) did not start: \(output(child).text)")
        }
        return child
    }

    /// `wspipe -l 0 -v --broadcast --bus URL ARGUMENTS` with a stdin pipe, once it is listening
    /// and (unless `subscribed` is false) subscribed.
    func startBroadcast(_ bus: String, _ arguments: [String] = [], environment: [String: String] = [:],
                        subscribed: Bool = true, file: StaticString = #filePath, line: UInt = #line) throws -> (ChildProcess, Int) {
        let child = try spawnWspipe(["-l", "0", "-v", "--broadcast", "--bus", bus] + arguments, stdin: .pipe, environment: environment)
        guard let text = child.stderr.waitForLine(startingWith: "wspipe: listening on ws://127.0.0.1:", timeout: 15),
              let port = Int(text.split(separator: ":").last?.split(separator: "/").first ?? "") else {
            XCTFail("no listening line: \(child.stderr.text)", file: file, line: line)
            throw HarnessError("server did not start")
        }
        if subscribed {
            guard child.stderr.wait(timeout: 15, until: { String(decoding: $0, as: UTF8.self).contains(": subscribed") }) else {
                XCTFail("not subscribed: \(child.stderr.text)", file: file, line: line)
                throw HarnessError("not subscribed")
            }
        }
        return (child, port)
    }

    /// PUBLISH commands as RESP, for `redis-cli --pipe` (binary-safe, unlike its arguments).
    func publishCommands(_ channel: String, _ messages: [[UInt8]]) -> [UInt8] {
        var out: [UInt8] = []
        for message in messages {
            out += Array("*3\r\n$7\r\nPUBLISH\r\n$\(channel.utf8.count)\r\n\(channel)\r\n$\(message.count)\r\n".utf8) + message + [13, 10]
        }
        return out
    }

    @discardableResult
    func redisCLI(_ port: Int, _ arguments: [String], stdin: [UInt8] = []) throws -> RunResult {
        let child = try ChildProcess(executable: try Tool.redisCLI.path(), arguments: ["-h", "127.0.0.1", "-p", "\(port)"] + arguments,
                                     environment: Locations.baseEnvironment, stdin: .bytes(stdin))
        let result = child.wait(timeout: 30)
        XCTAssertEqual(result.exitCode, 0, "redis-cli \(arguments): \(result)")
        return result
    }

    /// One client of a server gets `count` messages; returns its result.
    func receive(_ count: Int, from server: ChildProcess, port: Int, clientNumber: Int = 1,
                 during publish: () throws -> Void) throws -> RunResult {
        let client = try spawnWspipe(["ws://127.0.0.1:\(port)/", "-n", "\(count)"], stdin: .pipe)
        XCTAssertTrue(server.stderr.wait(timeout: 15) { String(decoding: $0, as: UTF8.self).contains("client \(clientNumber) connected") },
                      server.stderr.text)
        try publish()
        return finish(client, timeout: 20)
    }

    /// nats-server on 127.0.0.1:`port` (a free one when nil), ready for connections.
    func startNATS(port: Int? = nil, _ extra: [String] = []) throws -> (ChildProcess, Int) {
        let server = try Tool.natsServer.path()
        let port = try port ?? LoopbackSocket(listening: false).port
        let child = try startServer(server, ["-a", "127.0.0.1", "-p", "\(port)"] + extra, ready: "Server is ready") { $0.stderr }
        return (child, port)
    }

    func natsPublish(_ port: Int, _ subject: String, _ messages: [[UInt8]], credentials: String? = nil,
                     tlsCA: String? = nil, expectExit: Int32 = 0) throws {
        let lines = messages.map { $0.map { String(format: "%02x", $0) }.joined() }.joined(separator: "\n") + "\n"
        let child = try ChildProcess(executable: Locations.python,
                                     arguments: ["\(Locations.peers)/nats_pub.py"] + (tlsCA.map { ["--tls", $0] } ?? [])
                                         + ["\(port)", subject] + (credentials.map { [$0] } ?? []),
                                     environment: Locations.baseEnvironment, stdin: .bytes(Array(lines.utf8)))
        let result = child.wait(timeout: 30)
        XCTAssertEqual(result.exitCode, expectExit, "nats_pub.py: \(result)")
    }
}
