import Foundation
import Glibc
import WebSocketCore
@testable import WebSocketEngine
@testable import WebSocketExec
import WebSocketTransport
import XCTest

/// The child's end: process group terminated in time, nothing left behind, backpressure.
final class ChildLifecycleTests: ExecTestCase {
    func testGroupIgnoringSIGTERMIsKilledWithinGracePlusOneSecond() throws {
        var options = ChildOptions()
        options.closeGrace = 0.3
        // The child and its grandchild ignore SIGTERM (the ignored disposition is inherited).
        let path = try script("trap '' TERM; sleep 100 & echo $!; while :; do sleep 1; done")
        let rig = try rig(ChildCommand(program: path), childOptions: options)
        XCTAssertTrue(spin { rig.log.messages.count == 1 })
        let grandchild = pid_t(rig.log.messages[0].text) ?? -1
        let group = rig.child.pid
        XCTAssertEqual(Set(members(ofGroup: group)).isSuperset(of: [group, grandchild]), true)
        let started = Instant.now()
        rig.client.close(ClosePayload(code: .normalClosure))
        XCTAssertTrue(spin(5) { rig.outcome.value != nil })
        let took = Instant.now().seconds(since: started)
        XCTAssertLessThan(took, options.closeGrace + 1, "SIGKILL after grace + \(options.killDelay) s")
        XCTAssertEqual(rig.outcome.value?.child, .signaled(SIGKILL))
        XCTAssertTrue(spin(1) { members(ofGroup: group).isEmpty }, "the grandchild is gone too: \(members(ofGroup: group).map { (try? String(contentsOfFile: "/proc/\($0)/stat", encoding: .utf8)) ?? "" })")
        XCTAssertFalse(ownChildren().contains(group), "reaped")
    }

    func testChildThatExitsOnSIGTERMEndsAtTheGrace() throws {
        var options = ChildOptions()
        options.closeGrace = 0.2
        let rig = try rig(ChildCommand(program: "sleep", arguments: ["100"]), childOptions: options)
        XCTAssertTrue(spin(0.3) { false } == false)
        rig.client.close(ClosePayload(code: .normalClosure))
        XCTAssertTrue(spin(3) { rig.outcome.value != nil })
        XCTAssertEqual(rig.outcome.value?.child, .signaled(SIGTERM))
        XCTAssertEqual(closeCode(rig.log), 1011, "the grace passed before the program exited")
        XCTAssertEqual(closeReason(rig.log), "program did not exit")
    }

    func testClientLostWithoutCloseEndsTheChild() throws {
        var options = ChildOptions()
        options.closeGrace = 0.2
        let rig = try rig(ChildCommand(program: "sleep", arguments: ["100"]), childOptions: options)
        rig.client.abandon()
        XCTAssertTrue(spin(3) { rig.outcome.value != nil })
        guard case .lost? = rig.outcome.value?.connection else { return XCTFail("\(String(describing: rig.outcome.value))") }
        XCTAssertTrue(members(ofGroup: rig.child.pid).isEmpty)
    }

    func testGrandchildHoldingStdoutAfterTheChildExitsIsEnded() throws {
        var options = ChildOptions()
        options.closeGrace = 0.3
        // The child exits 0 at once; its background sleep keeps stdout open.
        let rig = try rig(ChildCommand.shell("sleep 100 & echo done"), childOptions: options)
        XCTAssertTrue(spin(5) { rig.log.ending != nil && rig.outcome.value != nil })
        XCTAssertEqual(rig.log.messages.map(\.text), ["done"])
        XCTAssertEqual(closeCode(rig.log), 1000)
        XCTAssertTrue(members(ofGroup: rig.child.pid).isEmpty)
    }

    func testWithoutPidfdTheExitIsPolled() throws {
        WebSocketExec.ChildProcess.pidfdDisabled = true
        defer { WebSocketExec.ChildProcess.pidfdDisabled = false }
        let descriptors = openDescriptors()
        let rig = try rig(ChildCommand.shell("echo one; exit 4"))
        XCTAssertTrue(spin { rig.log.ending != nil && rig.outcome.value != nil })
        XCTAssertEqual(rig.log.messages.map(\.text), ["one"])
        XCTAssertEqual(closeReason(rig.log), "exit status 4")
        XCTAssertEqual(ownChildren(), [])
        XCTAssertEqual(openDescriptors(), descriptors)
    }

    func testTwoHundredChildrenLeaveNoZombieNoProcessNoDescriptor() throws {
        let descriptors = openDescriptors()
        var groups: [pid_t] = []
        for i in 0..<200 {
            let rig = try rig(ChildCommand(program: "cat"))
            groups.append(rig.child.pid)
            rig.client.send(.text, bytes: Array("m\(i)".utf8))
            XCTAssertTrue(spin { rig.log.messages.count == 1 })
            rig.client.close(ClosePayload(code: .normalClosure))
            XCTAssertTrue(spin { rig.outcome.value != nil && rig.log.ending != nil }, "connection \(i)")
        }
        XCTAssertEqual(pool.running, 0)
        XCTAssertEqual(ownChildren(), [], "no zombie, nothing unreaped")
        XCTAssertEqual(openDescriptors(), descriptors, "descriptors flat")
        let left = groups.filter { !members(ofGroup: $0).isEmpty }
        XCTAssertEqual(left, [], "no process of any of the groups")
    }

    func testChildThatNeverReadsStopsReadingTheSocket() throws {
        var options = ChildOptions()
        options.closeGrace = 0.2
        let rig = try rig(ChildCommand(program: "sleep", arguments: ["100"]), childOptions: options)
        let chunk = [UInt8](repeating: 0x41, count: 64 * 1024)
        // 32 MiB offered; the child reads nothing.
        for _ in 0..<512 { rig.client.send(.binary, bytes: chunk) }
        XCTAssertTrue(spin(5) { rig.server.pausesReading }, "the socket is not read while the child's stdin is full: \(rig.bridge.queuedForChild) \(rig.client.queuedBytes) \(String(describing: rig.outcome.value))")
        spin(0.5) { false }
        XCTAssertLessThanOrEqual(rig.bridge.queuedForChild, ExecOptions().stdinQueueLimit + ConnectionOptions().receiveBufferSize)
        XCTAssertGreaterThan(rig.client.queuedBytes, 16 << 20, "the rest waits in the client: TCP backpressure")
        rig.client.abandon()
        XCTAssertTrue(spin(3) { rig.outcome.value != nil })
    }

    func testSlowClientStopsReadingTheChildsStdout() throws {
        let rig = try rig(ChildCommand(program: "yes", arguments: ["0123456789abcdef"]))
        rig.client.pauseReading()
        spin(1) { false }
        // The queue's limit and two reads of the program's output: `queuedBytes` counts a
        // message waiting unframed with its entry (`MessageQueue.entryCost`), so a read of
        // 17-byte lines weighs its bytes and an entry per line.
        let read = ExecOptions().chunkSize + ExecOptions().chunkSize / 17 * MessageQueue.entryCost
        let bound = ConnectionOptions().queueLimit + 2 * read
        let queued = rig.server.queuedBytes
        XCTAssertLessThan(queued, bound, "stdout is read only while the connection has room")
        spin(0.3) { false }
        XCTAssertLessThan(rig.server.queuedBytes, bound)
        rig.client.resumeReading()
        XCTAssertTrue(spin { rig.log.messages.count > 10_000 }, "and it flows again")
        XCTAssertTrue(rig.log.messages.prefix(10_000).allSatisfy { $0.text == "0123456789abcdef" })
        rig.client.close(ClosePayload(code: .normalClosure))
        XCTAssertTrue(spin { rig.outcome.value != nil })
    }

    func testFloodingChildWithALostClientIsEnded() throws {
        var options = ChildOptions()
        options.closeGrace = 0.2
        let rig = try rig(ChildCommand(program: "yes"), childOptions: options)
        XCTAssertTrue(spin { rig.log.messages.count > 100 })
        rig.client.abandon()
        XCTAssertTrue(spin(3) { rig.outcome.value != nil })
        XCTAssertTrue(members(ofGroup: rig.child.pid).isEmpty)
    }
}
