import EngineTestSupport
import WebSocketCore
@testable import WebSocketEngine
import WebSocketTransport
import XCTest

/// The limits' decisions without sockets (ConnectionLimits, LimitState): -n's count, the
/// deadline of each span and the idle clock of each kind, on instants given by the test.
final class LimitStateTests: XCTestCase {
    private let start = Instant(nanoseconds: 1_000_000_000_000)
    private func at(_ seconds: Double) -> Instant { start.adding(seconds: seconds) }

    private func limits(span: ConnectionLimits.Span = .connection, clock: ConnectionLimits.IdleClock = .receivedAndSentCount,
                        idle: Double? = nil, time: Double? = nil, messages: Int? = nil) -> ConnectionLimits {
        ConnectionLimits(idleTimeout: idle, timeLimit: time, maximumMessages: messages, idleClock: clock, span: span)
    }

    func testTheCountIsDueOnceWhenItReachesTheLimitAndWhatFollowsIsPastIt() {
        var state = LimitState(limits(messages: 3), runStart: start)
        state.opened(at: at(1), sent: 0)
        XCTAssertFalse(state.received(1, at: at(2)))
        XCTAssertFalse(state.received(1, at: at(2)))
        XCTAssertFalse(state.limitReached)
        XCTAssertTrue(state.received(1, at: at(3)))
        XCTAssertTrue(state.limitReached)
        XCTAssertFalse(state.received(1, at: at(4)), "the close is due once")
        XCTAssertTrue(state.limitReached)
    }

    func testOneReadBringingTheCountPastTheLimitIsDue() {
        var state = LimitState(limits(span: .run, messages: 2), runStart: start)
        XCTAssertTrue(state.received(5, at: at(1)))
        XCTAssertEqual(state.received, 5)
    }

    func testWithoutALimitNothingIsEverDue() {
        var state = LimitState(limits(), runStart: start)
        for _ in 0..<1000 { XCTAssertFalse(state.received(1, at: at(1))) }
        XCTAssertFalse(state.limitReached)
        XCTAssertNil(state.deadline)
        XCTAssertNil(state.idleCheck(at: at(1e6), sent: 9))
    }

    func testSpanConnectionCountsAndTimesEachConnectionFromItsOpening() {
        var state = LimitState(limits(span: .connection, time: 10, messages: 2), runStart: start)
        XCTAssertNil(state.deadline, "no connection yet")
        state.opened(at: at(5), sent: 0)
        XCTAssertEqual(state.deadline, at(15))
        XCTAssertTrue(state.received(2, at: at(6)))
        state.closed()
        XCTAssertNil(state.deadline)
        state.opened(at: at(100), sent: 0)
        XCTAssertEqual(state.deadline, at(110))
        XCTAssertFalse(state.limitReached, "the next client's count starts at 0")
        XCTAssertFalse(state.received(1, at: at(101)))
        XCTAssertTrue(state.received(1, at: at(102)))
    }

    func testSpanRunTimesAndCountsTheWholeRunAcrossConnections() {
        var state = LimitState(limits(span: .run, time: 10, messages: 3), runStart: start)
        XCTAssertEqual(state.deadline, at(10), "from the start, before any connection (connecting counts)")
        state.opened(at: at(4), sent: 0)
        XCTAssertFalse(state.received(2, at: at(5)))
        state.closed()
        XCTAssertEqual(state.deadline, at(10), "reconnecting keeps the run's deadline")
        state.opened(at: at(7), sent: 0)
        XCTAssertEqual(state.deadline, at(10))
        XCTAssertTrue(state.received(1, at: at(8)), "-n counts across reconnections")
    }

    func testIdleCountsFromTheOpeningAndFromEachMessageReceived() {
        var state = LimitState(limits(idle: 2), runStart: start)
        state.opened(at: at(10), sent: 0)
        XCTAssertEqual(state.idleCheck(at: at(11), sent: 0), .checkAgain(at: at(12)))
        _ = state.received(1, at: at(11.5))
        XCTAssertEqual(state.idleCheck(at: at(12), sent: 0), .checkAgain(at: at(13.5)))
        XCTAssertEqual(state.idleCheck(at: at(13.5), sent: 0), .close, "exactly one period after the last received")
    }

    func testTheServersIdleClockSeesMessagesSentAtTheCheckAfterThem() {
        var state = LimitState(limits(clock: .receivedAndSentCount, idle: 2), runStart: start)
        state.opened(at: at(0), sent: 1)  // a greeting went before the opening
        // A message sent at 0.5 is seen at the check at 2: the clock restarts from there.
        XCTAssertEqual(state.idleCheck(at: at(2), sent: 2), .checkAgain(at: at(4)))
        XCTAssertEqual(state.idleCheck(at: at(4), sent: 2), .close, "between one and two periods after the last sent")
    }

    func testTheStdioIdleClockCountsWhatItIsToldIsSentAndNotTheDriversCount() {
        var state = LimitState(limits(span: .run, clock: .bothWaysReported, idle: 2), runStart: start)
        state.opened(at: at(0), sent: 0)
        XCTAssertEqual(state.idleCheck(at: at(2), sent: 7), .close, "the driver's count is not this clock's")
        state.opened(at: at(10), sent: 0)
        state.sent(at: at(11))
        XCTAssertEqual(state.idleCheck(at: at(12), sent: 0), .checkAgain(at: at(13)))
        XCTAssertEqual(state.idleCheck(at: at(13), sent: 0), .close, "exactly one period after the last sent")
    }

    func testOnlyTheLimitsSetCountMessages() {
        XCTAssertFalse(limits(time: 5).countsMessages)
        XCTAssertTrue(limits(idle: 5).countsMessages)
        XCTAssertTrue(limits(messages: 1).countsMessages)
    }
}

/// LimitKeeper on a real loop, without a connection: which timers it arms for each span.
final class LimitKeeperTests: XCTestCase {
    private var loop: EventLoop!

    override func setUpWithError() throws { loop = try EventLoop() }

    func testTheRunsDeadlineFiresWithoutAConnection() {
        let limits = ConnectionLimits(timeLimit: 0.05, span: .run)
        var reasons: [LimitReason] = []
        let keeper = LimitKeeper(limits, loop: loop) { reasons.append($0) }
        XCTAssertNotNil(keeper.deadline)
        XCTAssertTrue(loop.spin(5) { !reasons.isEmpty })
        XCTAssertEqual(reasons, [.timeLimit])
        keeper.cancel()
    }

    func testAConnectionsDeadlineWaitsForItsConnection() {
        let limits = ConnectionLimits(idleTimeout: 0.02, timeLimit: 0.02, span: .connection)
        var reasons: [LimitReason] = []
        let keeper = LimitKeeper(limits, loop: loop) { reasons.append($0) }
        XCTAssertNil(keeper.deadline)
        XCTAssertFalse(loop.spin(0.3) { !reasons.isEmpty }, "nothing is armed before attach")
        keeper.cancel()
    }

    func testCancelStopsTheRunsDeadline() {
        let limits = ConnectionLimits(timeLimit: 0.02, span: .run)
        var reasons: [LimitReason] = []
        let keeper = LimitKeeper(limits, loop: loop) { reasons.append($0) }
        keeper.cancel()
        XCTAssertFalse(loop.spin(0.3) { !reasons.isEmpty })
    }
}
