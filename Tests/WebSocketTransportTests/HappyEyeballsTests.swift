// RFC 8305 ordering and attempt scheduling, with a fake clock.
import XCTest
@testable import WebSocketTransport

final class HappyEyeballsTests: XCTestCase {
    func testInterleavingStartsWithIPv6AndAlternates() {
        func order(_ items: [String]) -> [String] { HappyEyeballs.interleave(items) { $0.hasPrefix("6") } }
        XCTAssertEqual(order([]), [])
        XCTAssertEqual(order(["4a"]), ["4a"])
        XCTAssertEqual(order(["4a", "6a"]), ["6a", "4a"])
        XCTAssertEqual(order(["6a", "6b", "4a", "4b"]), ["6a", "4a", "6b", "4b"])
        XCTAssertEqual(order(["4a", "4b", "4c", "6a"]), ["6a", "4a", "4b", "4c"])
        XCTAssertEqual(order(["6a", "6b", "6c", "4a"]), ["6a", "4a", "6b", "6c"])
        XCTAssertEqual(order(["4a", "4b"]), ["4a", "4b"])
    }

    private let t0 = Instant(nanoseconds: 1_000_000_000)
    private func at(_ ms: UInt64) -> Instant { Instant(nanoseconds: t0.nanoseconds + ms * 1_000_000) }

    func testANewAttemptEveryDelayWhileOthersArePending() {
        var schedule = HappyEyeballs.Schedule(count: 3, delay: 0.25)
        XCTAssertEqual(schedule.attemptsToStart(at: at(0)), [0])
        XCTAssertEqual(schedule.wakeTime, at(250))
        XCTAssertEqual(schedule.attemptsToStart(at: at(100)), [])
        XCTAssertEqual(schedule.attemptsToStart(at: at(250)), [1])
        XCTAssertEqual(schedule.wakeTime, at(500))
        XCTAssertEqual(schedule.attemptsToStart(at: at(500)), [2])
        XCTAssertNil(schedule.wakeTime)
        XCTAssertEqual(schedule.attemptsToStart(at: at(900)), [])
        XCTAssertEqual(schedule.running, [0, 1, 2])
        XCTAssertFalse(schedule.isExhausted)
    }

    func testAFailureStartsTheNextAttemptAtOnce() {
        var schedule = HappyEyeballs.Schedule(count: 3, delay: 0.25)
        XCTAssertEqual(schedule.attemptsToStart(at: at(0)), [0])
        schedule.attemptFailed(0, at: at(10))        // IPv6 refused quickly
        XCTAssertEqual(schedule.wakeTime, at(10))
        XCTAssertEqual(schedule.attemptsToStart(at: at(10)), [1])
        XCTAssertEqual(schedule.attemptsToStart(at: at(100)), [])
        schedule.attemptFailed(1, at: at(120))
        XCTAssertEqual(schedule.attemptsToStart(at: at(120)), [2])
        schedule.attemptFailed(2, at: at(130))
        XCTAssertTrue(schedule.isExhausted)
        XCTAssertEqual(schedule.attemptsToStart(at: at(200)), [])
    }

    func testAFailureOfAnOlderAttemptAlsoAdvances() {
        var schedule = HappyEyeballs.Schedule(count: 3, delay: 0.25)
        _ = schedule.attemptsToStart(at: at(0))
        _ = schedule.attemptsToStart(at: at(250))   // attempts 0 and 1 running
        schedule.attemptFailed(0, at: at(300))
        XCTAssertEqual(schedule.attemptsToStart(at: at(300)), [2])
        XCTAssertEqual(schedule.running, [1, 2])
    }

    func testWhenEverythingRunningFailsTheNextStartsEvenIfLate() {
        var schedule = HappyEyeballs.Schedule(count: 2, delay: 10)
        _ = schedule.attemptsToStart(at: at(0))
        schedule.attemptFailed(0, at: at(5))
        XCTAssertEqual(schedule.attemptsToStart(at: at(6)), [1])
    }

    func testSingleAddressAndEmptyList() {
        var one = HappyEyeballs.Schedule(count: 1)
        XCTAssertEqual(one.attemptsToStart(at: at(0)), [0])
        XCTAssertNil(one.wakeTime)
        one.attemptFailed(0, at: at(1))
        XCTAssertTrue(one.isExhausted)
        var none = HappyEyeballs.Schedule(count: 0)
        XCTAssertEqual(none.attemptsToStart(at: at(0)), [])
        XCTAssertTrue(none.isExhausted)
    }

    /// The whole race, simulated: attempt outcomes by time, as the I/O loop drives it.
    func testSimulatedRaceWithABlackholedIPv6() {
        // [::1] never answers; 127.0.0.1 connects 5 ms after it starts.
        var schedule = HappyEyeballs.Schedule(count: 2, delay: 0.25)
        var started: [Int: UInt64] = [:]
        var winner: Int?
        var now: UInt64 = 0
        while winner == nil && now < 10_000 {
            for index in schedule.attemptsToStart(at: at(now)) { started[index] = now }
            if let start = started[1], now >= start + 5 { winner = 1 }
            now += 1
        }
        XCTAssertEqual(winner, 1)
        XCTAssertEqual(started[1], 250)
    }
}
