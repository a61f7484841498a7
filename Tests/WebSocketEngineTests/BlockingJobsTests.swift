// BlockingJobs: each job on a thread of its own, results handed back on the loop, in the
// order they finish; a job that blocks holds up neither the loop nor the others.
import EngineTestSupport
import Glibc
import Synchronization
@testable import WebSocketEngine
import XCTest

final class BlockingJobsTests: XCTestCase {
    /// A gate a job waits at (a pipe: the test writes a byte to open it), bounded in time.
    final class Gate: Sendable {
        let ends: (read: Int32, write: Int32)
        init() {
            var fds: [Int32] = [-1, -1]
            precondition(pipe(&fds) == 0)
            ends = (fds[0], fds[1])
        }
        func wait(seconds: Int32) -> Bool {
            var entry = pollfd(fd: ends.read, events: Int16(POLLIN), revents: 0)
            return poll(&entry, 1, seconds * 1000) > 0
        }
        func open() { var byte: UInt8 = 1; _ = write(ends.write, &byte, 1) }
        deinit { close(ends.read); close(ends.write) }
    }

    func testABlockedJobHoldsUpNoOther() throws {
        let loop = try EventLoop()
        let jobs = try BlockingJobs<String>(loop: loop, limit: 4)
        let gate = Gate()
        var delivered: [String] = []
        jobs.run({ gate.wait(seconds: 20) ? "slow" : "slow timed out" }, then: { delivered.append($0) })
        for index in 0..<3 { jobs.run({ "quick \(index)" }, then: { delivered.append($0) }) }
        XCTAssertEqual(jobs.running, 4)
        XCTAssertTrue(jobs.isFull)
        XCTAssertTrue(loop.spin(10) { delivered.count == 3 }, "\(delivered)")
        XCTAssertEqual(Set(delivered), ["quick 0", "quick 1", "quick 2"])
        XCTAssertEqual(jobs.running, 1)
        XCTAssertFalse(jobs.isFull)
        gate.open()
        XCTAssertTrue(loop.spin(10) { delivered.count == 4 }, "\(delivered)")
        XCTAssertEqual(delivered.last, "slow")
        XCTAssertEqual(jobs.running, 0)
    }

    func testEachResultCallsOnResultAfterItsHandler() throws {
        let loop = try EventLoop()
        let jobs = try BlockingJobs<Int>(loop: loop, limit: 8)
        var order: [String] = []
        jobs.onResult = { order.append("result, \(jobs.running) running") }
        jobs.run({ 1 }, then: { order.append("done \($0)") })
        XCTAssertTrue(loop.spin(10) { order.count == 2 })
        XCTAssertEqual(order, ["done 1", "result, 0 running"])
    }
}
