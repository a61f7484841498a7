import EngineTestSupport
import XCTest
import WebSocketCore
import WebSocketTransport
@testable import WebSocketEngine

/// A fixed jitter sequence, repeated.
struct FixedJitter: JitterSource {
    var values: [Double]
    var index = 0
    mutating func nextUnit() -> Double {
        defer { index += 1 }
        return values[index % values.count]
    }
}

final class BackoffTests: XCTestCase {
    func testDelaysStayWithinFullJitterBounds() {
        var backoff = Backoff(baseDelay: 0.5, maxDelay: 30)
        var high = FixedJitter(values: [0.999999])
        var expected = [0.5, 1, 2, 4, 8, 16, 30, 30, 30]
        for bound in expected {
            let delay = backoff.nextDelay(jitter: &high) ?? -1
            XCTAssertLessThanOrEqual(delay, bound)
            XCTAssertGreaterThan(delay, bound * 0.99)
        }
        var zero = FixedJitter(values: [0])
        var other = Backoff()
        expected = [Backoff.minimumDelay, Backoff.minimumDelay]
        for value in expected { XCTAssertEqual(other.nextDelay(jitter: &zero), value) }  // never 0: no busy loop
        var half = FixedJitter(values: [0.5])
        var third = Backoff(baseDelay: 1, maxDelay: 5)
        XCTAssertEqual((0..<5).map { _ in third.nextDelay(jitter: &half) }, [0.5, 1, 2, 2.5, 2.5])
    }

    func testMaxRetriesAndZero() {
        var jitter = FixedJitter(values: [0.5])
        var none = Backoff(maxRetries: 0)
        XCTAssertNil(none.nextDelay(jitter: &jitter))
        var three = Backoff(maxRetries: 3)
        XCTAssertEqual((0..<5).map { _ in three.nextDelay(jitter: &jitter) != nil }, [true, true, true, false, false])
    }

    func testResetOnlyAfterALongEnoughConnection() {
        var jitter = FixedJitter(values: [0.999])
        var backoff = Backoff(baseDelay: 1, maxDelay: 100, maxRetries: 3, resetAfter: 10)
        _ = backoff.nextDelay(jitter: &jitter)
        _ = backoff.nextDelay(jitter: &jitter)
        backoff.connectionEnded(upFor: 2)  // flapping: no reset, no immediate retry
        XCTAssertGreaterThan(backoff.nextDelay(jitter: &jitter) ?? 0, 3.9)
        XCTAssertNil(backoff.nextDelay(jitter: &jitter))
        backoff.connectionEnded(upFor: 10)
        XCTAssertEqual(backoff.nextDelay(jitter: &jitter), 0)  // the first retry after a good connection goes at once
        XCTAssertEqual(backoff.retries, 1)
        XCTAssertGreaterThan(backoff.nextDelay(jitter: &jitter) ?? 0, 1.9)
    }

    func testRetryAfterAboveMaxDelayUpToTenMinutes() {
        var jitter = FixedJitter(values: [0.1])
        var backoff = Backoff(baseDelay: 0.5, maxDelay: 30)
        XCTAssertEqual(backoff.nextDelay(retryAfter: 120, jitter: &jitter), 120)
        XCTAssertEqual(backoff.nextDelay(retryAfter: 86_400, jitter: &jitter), 600)
        XCTAssertEqual(backoff.nextDelay(retryAfter: 0, jitter: &jitter) ?? 0, 0.2, accuracy: 1e-9)
    }
}

final class RetryPolicyTests: XCTestCase {
    func closed(_ code: UInt16?, byUs: Bool = false) -> AttemptFailure {
        .ended(.closed(ClosingHandshake(initiatedByUs: byUs, sent: nil, received: ClosePayload(code: code.map { CloseCode($0) }))))
    }

    func testTable() {
        let policy = RetryPolicy()
        for code: UInt16 in [1001, 1011, 1012, 1013, 1014] { XCTAssertTrue(policy.retries(closed(code)), "\(code)") }
        for code: UInt16 in [1000, 1002, 1003, 1007, 1008, 1009, 1010, 3000, 4000, 4999] {
            XCTAssertFalse(policy.retries(closed(code)), "\(code)")
        }
        XCTAssertFalse(policy.retries(closed(nil)))
        XCTAssertFalse(policy.retries(closed(1001, byUs: true)))
        for status in [429, 500, 502, 503, 504] { XCTAssertTrue(policy.retries(.handshakeStatus(status, retryAfter: nil))) }
        for status in [400, 401, 403, 404, 426, 501] { XCTAssertFalse(policy.retries(.handshakeStatus(status, retryAfter: nil))) }
        XCTAssertTrue(policy.retries(.connectFailed))
        XCTAssertTrue(policy.retries(.stale))
        XCTAssertTrue(policy.retries(.handshakeLost))
        XCTAssertTrue(policy.retries(.ended(.lost(.peerClosedTCP(afterOurClose: false)))))
        XCTAssertTrue(policy.retries(.ended(.lost(.pingTimeout(seconds: 1)))))
        XCTAssertFalse(policy.retries(.ended(.lost(.abandoned))))
        XCTAssertFalse(policy.retries(.connectRefusedForGood))
        XCTAssertFalse(policy.retries(.handshakeRejected))
        XCTAssertFalse(policy.retries(.ended(.failed(.protocolError("x")))))
        let always = RetryPolicy(reconnectOnClose: true)
        XCTAssertTrue(always.retries(closed(1000)))
        XCTAssertTrue(always.retries(closed(4000)))
        XCTAssertFalse(always.retries(closed(1000, byUs: true)))
    }

    /// A proxy that cannot reach the server (CONNECT answered 502/503/504, SOCKS5 "refused"
    /// or "unreachable") is the server being down, as a refused connect is: a restart behind
    /// a proxy ended `--reconnect` with exit 9 (found by ClientMatrixTests' restart cases).
    /// Refusals of ours (403, 407, a SOCKS5 rule) stay final.
    func testAProxyThatCannotReachTheServerIsRetriedAsARefusedConnect() {
        let proxy = ProxyURL(kind: .http, host: "127.0.0.1", port: 3128)
        let target = HostPort(host: "127.0.0.1", port: 9000)
        func http(_ status: Int) -> AttemptFailure {
            AttemptFailure(.transport(.proxy(.refused(proxy: proxy, target: target, status: status, reason: "", schemes: []))))
        }
        func socks(_ reply: UInt8) -> AttemptFailure {
            AttemptFailure(.transport(.proxy(.socks(.connectFailed(code: reply), proxy: proxy, target: target))))
        }
        for status in [502, 503, 504] { XCTAssertEqual(http(status), .connectFailed, "\(status)") }
        for status in [400, 403, 405, 407, 500] { XCTAssertEqual(http(status), .connectRefusedForGood, "\(status)") }
        for reply: UInt8 in [3, 4, 5, 6] { XCTAssertEqual(socks(reply), .connectFailed, "\(reply)") }
        for reply: UInt8 in [1, 2, 7, 8] { XCTAssertEqual(socks(reply), .connectRefusedForGood, "\(reply)") }
    }

    /// A hang-up during the TLS handshake (a TCP proxy in front of a restarting server
    /// accepts, then closes) is the server closing during the handshake: retried. wss://
    /// --reconnect behind socat ended with exit 4 (found by a new user's trial). A server
    /// that answers with something else than TLS, or a certificate that fails, stays final.
    func testAHangUpDuringTheTLSHandshakeIsRetried() {
        func tls(_ failure: TLSFailure) -> AttemptFailure { AttemptFailure(.transport(.tls(failure))) }
        XCTAssertEqual(tls(.closedDuringHandshake(hint: "")), .handshakeLost)
        for why in [StreamFailure.closed, .tlsSessionClosed, .system(errno: ECONNRESET)] {
            XCTAssertEqual(tls(.handshakeFailed(why, hint: nil)), .handshakeLost, "\(why)")
        }
        XCTAssertEqual(tls(.handshakeFailed(.tls(.other(detail: "wrong version number")), hint: "plain")), .connectRefusedForGood)
        XCTAssertEqual(tls(.verification(.unknownCA, name: "h", detail: "")), .connectRefusedForGood)
        XCTAssertTrue(RetryPolicy().retries(tls(.closedDuringHandshake(hint: ""))))
    }

    func testRetryAfter() {
        XCTAssertEqual(RetryAfter.seconds("120", now: 0), 120)
        XCTAssertEqual(RetryAfter.seconds(" 7 ", now: 0), 7)
        XCTAssertNil(RetryAfter.seconds("-1", now: 0))
        XCTAssertNil(RetryAfter.seconds("soon", now: 0))
        // 784111777 = Sun, 06 Nov 1994 08:49:37 GMT (RFC 9110's example)
        XCTAssertEqual(RetryAfter.seconds("Sun, 06 Nov 1994 08:49:37 GMT", now: 784_111_777 - 30), 30)
        XCTAssertEqual(RetryAfter.seconds("Sun, 06 Nov 1994 08:49:37 GMT", now: 784_111_777 + 30), 0)
    }
}

final class OfflineQueueTests: XCTestCase {
    func fill(_ queue: OfflineQueue, _ count: Int) {
        for i in 0..<count { queue.send(.text, fin: true, bytes: Array("m\(i)".utf8)) }
    }

    func testBlockKeepsEverythingAndSaysStop() {
        let queue = OfflineQueue(messageLimit: 3, byteLimit: 1000, policy: .block)
        fill(queue, 2)
        XCTAssertTrue(queue.acceptsMore)
        fill(queue, 3)
        XCTAssertFalse(queue.acceptsMore)
        XCTAssertEqual(queue.droppedTotal, 0)
        let sink = RecordingSink()
        XCTAssertEqual(queue.drain(into: sink), 5)
        XCTAssertEqual(sink.texts, ["m0", "m1", "m0", "m1", "m2"])
        XCTAssertTrue(queue.acceptsMore)
    }

    func testDropOldestCountsEveryDrop() {
        let queue = OfflineQueue(messageLimit: 3, byteLimit: 1000, policy: .dropOldest)
        fill(queue, 10)
        XCTAssertEqual(queue.droppedTotal, 7)
        XCTAssertEqual(queue.takeDropped(), 7)
        XCTAssertEqual(queue.takeDropped(), 0)
        let sink = RecordingSink()
        queue.drain(into: sink)
        XCTAssertEqual(sink.texts, ["m7", "m8", "m9"])
    }

    func testDropNewestAndByteBound() {
        let queue = OfflineQueue(messageLimit: 100, byteLimit: 4, policy: .dropNewest)
        fill(queue, 5)  // "m0" "m1" fit in 4 bytes
        XCTAssertEqual(queue.droppedTotal, 3)
        let sink = RecordingSink()
        queue.drain(into: sink)
        XCTAssertEqual(sink.texts, ["m0", "m1"])
    }

    func testFailOverflows() {
        let queue = OfflineQueue(messageLimit: 2, byteLimit: 1000, policy: .fail)
        fill(queue, 2)
        XCTAssertFalse(queue.overflowed)
        fill(queue, 1)
        XCTAssertTrue(queue.overflowed)
        XCTAssertFalse(queue.acceptsMore)
        XCTAssertEqual(queue.count, 2)
    }

    func testFragmentedMessagesStayWholeAndDropWhole() {
        let queue = OfflineQueue(messageLimit: 1, byteLimit: 1000, policy: .dropNewest)
        queue.send(.text, fin: false, bytes: Array("a".utf8))
        queue.send(.continuation, fin: true, bytes: Array("b".utf8))
        queue.send(.binary, fin: false, bytes: [1])
        queue.send(.continuation, fin: false, bytes: [2])
        queue.send(.continuation, fin: true, bytes: [3])
        XCTAssertEqual(queue.droppedTotal, 1)
        let sink = RecordingSink()
        queue.drain(into: sink)
        XCTAssertEqual(sink.texts, ["a", "b"])
    }
}

final class ConnectionMetricsTests: XCTestCase {
    func testUptimeDowntimeAndRoundTrips() {
        let t0 = Instant(nanoseconds: 1_000_000_000)
        func at(_ s: Double) -> Instant { t0.adding(seconds: s) }
        var metrics = ConnectionMetrics(start: t0)
        metrics.connected(at: at(1))
        XCTAssertEqual(metrics.disconnected(at: at(4)), 3, accuracy: 1e-9)
        metrics.connected(at: at(6))
        XCTAssertEqual(metrics.reconnects, 1)
        XCTAssertEqual(metrics.currentUptime(at: at(7)) ?? 0, 1, accuracy: 1e-9)
        XCTAssertEqual(metrics.totalUptime(at: at(7)), 4, accuracy: 1e-9)
        XCTAssertEqual(metrics.totalDowntime(at: at(7)), 3, accuracy: 1e-9)
        metrics.roundTrip(0.01)
        metrics.roundTrip(0.03)
        XCTAssertEqual(metrics.rttMin, 0.01)
        XCTAssertEqual(metrics.rttMax, 0.03)
        XCTAssertEqual(metrics.rttAverage ?? 0, 0.02, accuracy: 1e-12)
    }
}
