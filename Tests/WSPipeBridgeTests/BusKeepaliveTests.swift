// --bus-ping's timing (BusKeepalive, pure: the time is given) and the option that sets it.
import XCTest
import WebSocketTransport
@testable import WSPipeBridge
@testable import WSPipeBus
@testable import WSPipeCLI

final class BusKeepaliveTests: XCTestCase {
    private let opened = Instant(nanoseconds: 1_000_000_000_000)
    private func at(_ seconds: Double) -> Instant { opened.adding(seconds: seconds) }

    func testASilentConnectionIsPingedThenDead() {
        var keepalive = BusKeepalive(interval: 30, timeout: 30, openedAt: opened)
        XCTAssertEqual(keepalive.deadline, at(30))
        XCTAssertEqual(keepalive.step(at: at(29.9)), .wait(until: at(30)))
        XCTAssertEqual(keepalive.step(at: at(30)), .ping(thenAt: at(60)))
        XCTAssertEqual(keepalive.step(at: at(45)), .wait(until: at(60)), "one PING until the timeout")
        XCTAssertEqual(keepalive.step(at: at(60)), .dead(silentFor: 60))
    }

    func testATimeoutOtherThanTheInterval() {
        var keepalive = BusKeepalive(interval: 2, timeout: 0.5, openedAt: opened)
        XCTAssertEqual(keepalive.step(at: at(2.1)), .ping(thenAt: at(2.6)))
        XCTAssertEqual(keepalive.step(at: at(2.6)), .dead(silentFor: 2.6))
    }

    /// A busy connection: bytes every 10 s, the timer looks at every deadline it was given:
    /// never a PING.
    func testBytesKeepThePingAway() {
        var keepalive = BusKeepalive(interval: 30, timeout: 30, openedAt: opened)
        var timer = keepalive.deadline
        var heard = 0.0
        for second in stride(from: 1.0, through: 600, by: 1) {
            if second.truncatingRemainder(dividingBy: 10) == 0 {
                keepalive.heard(at: at(second))
                heard = second
            }
            guard at(second) >= timer else { continue }
            let step = keepalive.step(at: at(second))
            XCTAssertEqual(step, .wait(until: at(heard + 30)), "second \(second)")
            if case .wait(let until) = step { timer = until }
        }
    }

    /// Any byte after the PING (its answer, a message) is life: the next PING comes after
    /// another interval of silence.
    func testAnythingAfterThePingAnswersIt() {
        var keepalive = BusKeepalive(interval: 30, timeout: 30, openedAt: opened)
        XCTAssertEqual(keepalive.step(at: at(30)), .ping(thenAt: at(60)))
        keepalive.heard(at: at(30.2))
        XCTAssertEqual(keepalive.step(at: at(60)), .wait(until: at(60.2)), "the timer armed for the timeout comes early")
        XCTAssertEqual(keepalive.step(at: at(60.2)), .ping(thenAt: at(90.2)))
        XCTAssertEqual(keepalive.step(at: at(90.2)), .dead(silentFor: 60))
    }

    /// A late timer (a busy loop) still pings once, and gives the full timeout after it.
    func testALateTimerPingsAndCountsTheTimeoutFromThePing() {
        var keepalive = BusKeepalive(interval: 30, timeout: 30, openedAt: opened)
        XCTAssertEqual(keepalive.step(at: at(50)), .ping(thenAt: at(80)))
        XCTAssertEqual(keepalive.step(at: at(79)), .wait(until: at(80)))
        XCTAssertEqual(keepalive.step(at: at(80)), .dead(silentFor: 80))
    }

    // MARK: - --bus-ping

    private func busServing(_ arguments: [String]) throws -> BusServing? {
        let command = try CommandLineParser.parse(["-l", "127.0.0.1:0", "--broadcast", "--bus", "redis://127.0.0.1/t"] + arguments,
                                                  environment: { _ in nil }, readFile: { _ in nil })
        guard case .run(let config) = command else { throw UsageError("not a run") }
        return config.serve?.bus
    }

    func testTheOption() throws {
        XCTAssertEqual(try busServing([])?.pingInterval, 30, "on by default")
        XCTAssertEqual(try busServing(["--bus-ping", "0.25"])?.pingInterval, 0.25)
        XCTAssertEqual(try busServing(["--bus-ping", "0"])?.pingInterval, .some(nil), "0: off")
        for bad in ["-1", "x", "inf"] {
            XCTAssertThrowsError(try busServing(["--bus-ping", bad]), bad) { error in
                XCTAssertEqual((error as? UsageError)?.message, "--bus-ping '\(bad)' is not a positive number of seconds")
            }
        }
        XCTAssertThrowsError(try CommandLineParser.parse(["-l", "0", "--broadcast", "--bus-ping", "5"],
                                                         environment: { _ in nil }, readFile: { _ in nil })) { error in
            XCTAssertEqual((error as? UsageError)?.message, "--bus-ping needs --bus")
        }
    }
}
