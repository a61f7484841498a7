import Foundation
import Glibc
import WebSocketEngine
@testable import WebSocketExec
import XCTest

/// Children spawned on a `ChildSpawner`'s threads: the same lifecycle as on the loop's.
final class ChildSpawnerTests: ExecTestCase {
    func testChildRunsEchoesAndIsReaped() throws {
        let spawner = try XCTUnwrap(ChildSpawner(loop: loop))
        let child = try ChildProcess(ChildCommand(program: "cat"), environment: environment(), loop: loop, pool: pool,
                                     spawner: spawner) { _ in }
        XCTAssertEqual(child.pid, 0, "spawned later, on the spawner's thread")
        // Written before the child exists: it waits in the pipe.
        var line: [UInt8] = Array("early\n".utf8)
        let wrote = line.withUnsafeMutableBytes { bytes -> Int in
            var vector = iovec(iov_base: bytes.baseAddress, iov_len: bytes.count)
            if case .done(let n) = try! XCTUnwrap(child.stdin).write(&vector, count: 1) { return n }
            return -1
        }
        XCTAssertEqual(wrote, 6)
        XCTAssertTrue(spin { child.pid > 0 })
        var echoed: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 64)
        XCTAssertTrue(spin {
            if case .done(let n) = buffer.withUnsafeMutableBytes({ child.stdout!.read(into: $0.baseAddress!, count: 64) }) {
                echoed += buffer[0..<n]
            }
            return echoed.count >= 6
        })
        XCTAssertEqual(String(decoding: echoed, as: UTF8.self), "early\n")
        let group = child.pid
        child.closeStdin()
        XCTAssertTrue(spin { child.termination != nil })
        child.stdoutClosed()
        XCTAssertTrue(spin { child.isFinished })
        XCTAssertEqual(child.termination, .exited(0))
        XCTAssertFalse(ownChildren().contains(group), "reaped")
        XCTAssertTrue(members(ofGroup: group).isEmpty)
        XCTAssertEqual(pool.running, 0)
    }

    func testProgramThatCannotBeExecutedIsReported() throws {
        let spawner = try XCTUnwrap(ChildSpawner(loop: loop))
        // Executable, but neither ELF nor a script: execve says ENOEXEC.
        let path = try script("")
        try Data([0x00, 0x01, 0x02, 0x03]).write(to: URL(fileURLWithPath: path))
        chmod(path, 0o755)
        let child = try ChildProcess(ChildCommand(program: path), environment: environment(), loop: loop, pool: pool,
                                     spawner: spawner) { _ in }
        var failure: ChildError?
        var finished: ChildTermination?
        child.onSpawnFailure = { failure = $0 }
        child.onFinish = { finished = $0 }
        XCTAssertTrue(spin { finished != nil })
        XCTAssertEqual(failure, .cannotSpawn(path: path, errno: ENOEXEC))
        XCTAssertEqual(finished, .exited(127))
        XCTAssertTrue(child.isFinished)
        XCTAssertNil(child.stdin)
        XCTAssertEqual(pool.running, 0)
    }
}
