import Foundation
import Glibc
import WebSocketCore
import WebSocketEngine
import WebSocketExec
import XCTest

/// Messages both ways through real children, and the Close each ending sends.
final class ExecBridgeTests: ExecTestCase {
    func testCatEchoesLinesAndClosesWith1000WhenTheClientCloses() throws {
        let rig = try rig(ChildCommand(program: "cat"))
        rig.client.send(.text, bytes: Array("hello".utf8))
        rig.client.send(.text, bytes: Array("wörld".utf8))
        rig.client.send(.binary, bytes: Array("raw\nbytes\n".utf8))
        XCTAssertTrue(spin { rig.log.messages.count == 4 })
        XCTAssertEqual(rig.log.messages.map(\.text), ["hello", "wörld", "raw", "bytes"])
        XCTAssertEqual(rig.log.messages.map(\.kind), [.text, .text, .text, .text])
        rig.client.close(ClosePayload(code: .normalClosure))
        XCTAssertTrue(spin { rig.outcome.value != nil })
        XCTAssertEqual(rig.outcome.value?.child, .exited(0), "cat read EOF and exited")
        XCTAssertEqual(rig.outcome.value?.closeSent, ClosePayload(code: .normalClosure), "cat's exit answers the client's Close")
        guard case .closed(let handshake)? = rig.log.ending else { return XCTFail("\(String(describing: rig.log.ending))") }
        XCTAssertTrue(handshake.isNormal)
    }

    /// The client closes right after its message: the child's reply to it still comes,
    /// then the Close its exit gives answers the client's.
    func testRepliesAfterTheClientsCloseComeBeforeTheAnswer() throws {
        let rig = try rig(ChildCommand.shell("echo first; read -r line; sleep 0.1; echo \"got $line\"; exit 4"))
        rig.client.send(.text, bytes: Array("x".utf8))
        rig.client.close(ClosePayload(code: .normalClosure))
        XCTAssertTrue(spin { rig.log.ending != nil && rig.outcome.value != nil })
        XCTAssertEqual(rig.log.messages.map(\.text), ["first", "got x"])
        XCTAssertEqual(closeCode(rig.log), 1011)
        XCTAssertEqual(closeReason(rig.log), "exit status 4")
        guard case .closed(let handshake)? = rig.outcome.value?.connection else {
            return XCTFail("\(String(describing: rig.outcome.value))")
        }
        XCTAssertFalse(handshake.initiatedByUs, "the server answered the client's Close")
        XCTAssertEqual(handshake.sent, ClosePayload(code: .internalError, reason: Array("exit status 4".utf8)))
    }

    func testExitStatusZeroSendsClose1000AfterAllOutput() throws {
        let rig = try rig(ChildCommand(program: "sh", arguments: ["-c", "seq 1 1000"]))
        XCTAssertTrue(spin { rig.log.ending != nil && rig.outcome.value != nil })
        XCTAssertEqual(rig.log.messages.count, 1000)
        XCTAssertEqual(rig.log.messages.last?.text, "1000")
        XCTAssertEqual(closeCode(rig.log), 1000)
    }

    func testNonZeroExitSends1011NamingTheStatus() throws {
        let path = try script("read line; echo \"got $line\"; echo oops >&2; exit 3")
        let rig = try rig(ChildCommand(program: path))
        rig.client.send(.text, bytes: Array("x".utf8))
        XCTAssertTrue(spin { rig.log.ending != nil && rig.outcome.value != nil })
        XCTAssertEqual(rig.log.messages.map(\.text), ["got x"])
        XCTAssertEqual(closeCode(rig.log), 1011)
        XCTAssertEqual(closeReason(rig.log), "exit status 3")
        XCTAssertEqual(rig.stderr.value, ["oops"], "stderr lines reach the sink")
        XCTAssertEqual(rig.outcome.value?.child, .exited(3))
    }

    func testKilledBySignalSends1011NamingTheSignal() throws {
        let rig = try rig(ChildCommand.shell("echo before; kill -9 $$"))
        XCTAssertTrue(spin { rig.log.ending != nil && rig.outcome.value != nil })
        XCTAssertEqual(rig.log.messages.map(\.text), ["before"])
        XCTAssertEqual(closeCode(rig.log), 1011)
        XCTAssertEqual(closeReason(rig.log), "killed by signal 9")
    }

    func testLongLinesWholeAndInvalidUTF8AsBinary() throws {
        let rig = try rig(ChildCommand(program: "cat"))
        let long = [UInt8](repeating: UInt8(ascii: "a"), count: 3 << 20)  // 3 MiB: many pipe reads
        rig.client.send(.text, bytes: long)
        rig.client.send(.binary, bytes: [0x66, 0xFF, 0x0A, 0x67, 0x0A])  // "f\xFF\ng\n"
        XCTAssertTrue(spin(10) { rig.log.messages.count == 3 })
        XCTAssertEqual(rig.log.messages[0].bytes, long, "a 3 MiB line is one text message")
        XCTAssertEqual(rig.log.messages[1], .init(kind: .binary, bytes: [0x66, 0xFF]), "not UTF-8: the same bytes, binary")
        XCTAssertEqual(rig.log.messages[2], .init(kind: .text, bytes: [0x67]))
        rig.client.close(ClosePayload(code: .normalClosure))
        XCTAssertTrue(spin { rig.outcome.value != nil })
    }

    func testLastLineWithoutNewlineIsSent() throws {
        let rig = try rig(ChildCommand.shell("printf 'a\\nlast'"))
        XCTAssertTrue(spin { rig.log.ending != nil })
        XCTAssertEqual(rig.log.messages.map(\.text), ["a", "last"])
        XCTAssertEqual(closeCode(rig.log), 1000)
    }

    func testLineOverTheLimitCloses1011() throws {
        var options = ExecOptions()
        options.maximumMessageSize = 1000
        let rig = try rig(ChildCommand.shell("echo ok; head -c 5000 /dev/zero | tr '\\0' x; echo; sleep 100"), options: options)
        XCTAssertTrue(spin { rig.log.ending != nil && rig.outcome.value != nil })
        XCTAssertEqual(rig.log.messages.map(\.text), ["ok"])
        XCTAssertEqual(closeCode(rig.log), 1011)
        XCTAssertEqual(closeReason(rig.log), "output line exceeds 1000 B")
    }

    /// The long line and what follows it in one read: ending the connection mid-scan must
    /// not leave the scan past the reset buffer (it crashed copying a negative count).
    func testLineOverTheLimitFollowedByMoreOutputInOneRead() throws {
        var options = ExecOptions()
        options.maximumMessageSize = 1000
        let rig = try rig(ChildCommand.shell("s=$(head -c 5000 /dev/zero | tr '\\0' x); printf 'ok\\n%s\\nafter\\nmore\\n' \"$s\"; sleep 100"),
                          options: options)
        XCTAssertTrue(spin { rig.log.ending != nil && rig.outcome.value != nil })
        XCTAssertEqual(rig.log.messages.map(\.text), ["ok"])
        XCTAssertEqual(closeCode(rig.log), 1011)
    }

    func testBinaryModeSendsChunks() throws {
        var options = ExecOptions()
        options.binary = true
        let rig = try rig(ChildCommand.shell("head -c 200000 /dev/zero"), options: options)
        XCTAssertTrue(spin { rig.log.ending != nil })
        XCTAssertTrue(rig.log.messages.allSatisfy { $0.kind == .binary && $0.bytes.count <= options.chunkSize })
        XCTAssertEqual(rig.log.messages.reduce(0) { $0 + $1.bytes.count }, 200_000)
        XCTAssertEqual(closeCode(rig.log), 1000)
    }

    func testEnvironmentIsOnlyWhatWasGiven() throws {
        setenv("WSPIPE_EXEC_SECRET", "leak", 1)
        defer { unsetenv("WSPIPE_EXEC_SECRET") }
        let rig = try rig(ChildCommand(program: "env"), environment: environment(["REMOTE_ADDR=1.2.3.4"]))
        XCTAssertTrue(spin { rig.log.ending != nil })
        XCTAssertEqual(Set(rig.log.messages.map(\.text)), ["PATH=/usr/local/bin:/usr/bin:/bin", "REMOTE_ADDR=1.2.3.4"])
    }

    func testNoDescriptorOfOursReachesTheChild() throws {
        // An inherited descriptor without close-on-exec (as a shell may leave one) too.
        let leaked = open("/dev/null", O_RDONLY)
        defer { close(leaked) }
        let rig = try rig(ChildCommand.shell("ls /proc/self/fd"))
        XCTAssertTrue(spin { rig.log.ending != nil })
        // ls's own directory descriptor is the one beyond 0, 1, 2.
        XCTAssertLessThanOrEqual(rig.log.messages.count, 4, "\(rig.log.messages.map(\.text))")
        XCTAssertEqual(Array(rig.log.messages.map(\.text).prefix(3)), ["0", "1", "2"])
    }

    func testPoolRefusesBeyondTheLimit() throws {
        pool = ChildPool(limit: 1, adoptsOrphans: true)
        let first = try rig(ChildCommand(program: "cat"))
        XCTAssertFalse(pool.hasRoom)
        XCTAssertThrowsError(try rig(ChildCommand(program: "cat"))) { error in
            XCTAssertEqual(error as? ChildError, .tooManyChildren(limit: 1))
        }
        first.client.close(ClosePayload(code: .normalClosure))
        XCTAssertTrue(spin { first.outcome.value != nil })
        XCTAssertTrue(pool.hasRoom, "a reaped child gives its place back")
    }

    func testMissingProgramIsReportedBeforeSpawning() {
        XCTAssertThrowsError(try ChildCommand(program: "/nonexistent/prog").executablePath(searchPath: nil)) {
            XCTAssertEqual($0 as? ChildError, .missingProgram(path: "/nonexistent/prog", errno: ENOENT))
        }
        XCTAssertThrowsError(try ChildCommand(program: "/etc/passwd").executablePath(searchPath: nil)) {
            XCTAssertEqual($0 as? ChildError, .missingProgram(path: "/etc/passwd", errno: EACCES))
        }
        XCTAssertThrowsError(try ChildCommand(program: "no-such-program-here").executablePath(searchPath: "/usr/bin:/bin")) {
            XCTAssertEqual($0 as? ChildError, .missingProgram(path: "no-such-program-here", errno: ENOENT))
        }
        XCTAssertEqual(try ChildCommand(program: "sh").executablePath(searchPath: "/nonexistent:/bin"), "/bin/sh")
        XCTAssertEqual(pool.running, 0)
    }
}
