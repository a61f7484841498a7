import EngineTestSupport
import Foundation
import Glibc
import WebSocketCore
import WebSocketEngine
import WebSocketExec
import WebSocketTransport
import XCTest

/// One exec connection in one process: a client-role driver and a server-role driver over a
/// socketpair, the server's delegate an `ExecBridge` over a real child.
struct ExecRig {
    let client: ConnectionDriver
    let log: Recorder
    let server: ConnectionDriver
    let bridge: ExecBridge
    let child: WebSocketExec.ChildProcess
    let outcome: Box<ExecOutcome?>
    let stderr: Box<[String]>
}

final class Box<T> {
    var value: T
    init(_ value: T) { self.value = value }
}

class ExecTestCase: XCTestCase {
    var loop: EventLoop!
    var pool: ChildPool!

    override func setUpWithError() throws {
        loop = try EventLoop()
        pool = ChildPool(adoptsOrphans: true)
    }

    /// Turns the loop until `done` holds or `seconds` pass.
    @discardableResult
    func spin(_ seconds: Double = 5, until done: () -> Bool) -> Bool { loop.spin(seconds, until: done) }

    func environment(_ extra: [String] = []) -> [String] {
        ["PATH=/usr/local/bin:/usr/bin:/bin"] + extra
    }

    func rig(_ command: ChildCommand, environment: [String]? = nil, childOptions: ChildOptions = .init(),
             options: ExecOptions = .init(), serverOptions: ConnectionOptions = .init(), executable: Int32 = -1) throws -> ExecRig {
        let (clientEnd, serverEnd) = streamPair()
        let stderrLines = Box<[String]>([])
        let child = try WebSocketExec.ChildProcess(command, environment: environment ?? self.environment(), loop: loop, pool: pool,
                                     options: childOptions, executable: executable) { stderrLines.value.append(String(decoding: $0, as: UTF8.self)) }
        let bridge = ExecBridge(child: child, options: options)
        let outcome = Box<ExecOutcome?>(nil)
        bridge.onEnd = { outcome.value = $0 }
        let log = Recorder()
        let client = ConnectionDriver(loop: loop, stream: clientEnd,
                                      core: WebSocketConnection(role: .client), delegate: log)
        let server = ConnectionDriver(loop: loop, stream: serverEnd,
                                      core: WebSocketConnection(role: .server), options: serverOptions, delegate: bridge)
        client.start()
        bridge.start(server)
        return ExecRig(client: client, log: log, server: server, bridge: bridge, child: child, outcome: outcome, stderr: stderrLines)
    }

    /// A script file in a fresh temporary directory, executable.
    func script(_ body: String) throws -> String {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("wspipe-exec-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let path = directory.appendingPathComponent("run.sh").path
        try ("#!/bin/sh\n" + body + "\n").write(toFile: path, atomically: true, encoding: .utf8)
        chmod(path, 0o755)
        addTeardownBlock { try? FileManager.default.removeItem(at: directory) }
        return path
    }

    /// Processes whose process group is `group` (zombies included), from /proc.
    func members(ofGroup group: pid_t) -> [pid_t] {
        guard let entries = try? FileManager.default.contentsOfDirectory(atPath: "/proc") else { return [] }
        return entries.compactMap { entry -> pid_t? in
            guard let pid = pid_t(entry), let stat = try? String(contentsOfFile: "/proc/\(entry)/stat", encoding: .utf8),
                  let close = stat.lastIndex(of: ")") else { return nil }
            // After "comm)": state ppid pgrp ...
            let fields = stat[stat.index(after: close)...].split(separator: " ")
            guard fields.count > 2, let pgrp = pid_t(fields[2]) else { return nil }
            return pgrp == group ? pid : nil
        }
    }

    /// Our own children (any state), from /proc/self/task/*/children.
    func ownChildren() -> [pid_t] {
        guard let tasks = try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/task") else { return [] }
        return tasks.flatMap { task -> [pid_t] in
            let text = (try? String(contentsOfFile: "/proc/self/task/\(task)/children", encoding: .utf8)) ?? ""
            return text.split(separator: " ").compactMap { pid_t($0.trimmingCharacters(in: .whitespacesAndNewlines)) }
        }
    }

    func openDescriptors() -> Int {
        (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd").count) ?? -1
    }

    func closeCode(_ log: Recorder) -> UInt16? { log.closes.first?.code?.rawValue }
    func closeReason(_ log: Recorder) -> String { String(decoding: log.closes.first?.reason ?? [], as: UTF8.self) }
}
