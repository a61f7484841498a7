@testable import WebSocketEngine
import XCTest

/// TokenBucket and RateLimit (pure, a fake clock) and AddressTable/AddressKey (pure).
final class RateLimitTests: XCTestCase {
    // MARK: Token bucket

    func testABucketAdmitsItsBurstThenTheRate() {
        var bucket = TokenBucket(RateLimit(perSecond: 10, burst: 3), now: 100)
        XCTAssertTrue(bucket.takeIfAvailable(1, now: 100))
        XCTAssertTrue(bucket.takeIfAvailable(1, now: 100))
        XCTAssertTrue(bucket.takeIfAvailable(1, now: 100))
        XCTAssertFalse(bucket.takeIfAvailable(1, now: 100), "the burst is spent")
        XCTAssertEqual(bucket.wait(until: 1, now: 100), 0.1, accuracy: 1e-9)
        XCTAssertFalse(bucket.takeIfAvailable(1, now: 100.05))
        XCTAssertTrue(bucket.takeIfAvailable(1, now: 100.1), "one token per 1/10 s")
        XCTAssertFalse(bucket.isFull(now: 100.2))
        XCTAssertTrue(bucket.isFull(now: 100.4), "refilled to the burst, never beyond")
        XCTAssertEqual(bucket.wait(until: 3, now: 1000), 0)
    }

    func testADebtIsPaidBackAtTheRate() {
        var bucket = TokenBucket(RateLimit(perSecond: 1000, burst: 1000), now: 0)
        bucket.take(5000, now: 0)  // one message larger than the burst
        XCTAssertEqual(bucket.tokens, -4000)
        XCTAssertEqual(bucket.wait(until: 0, now: 0), 4, accuracy: 1e-9)
        XCTAssertEqual(bucket.wait(until: 0, now: 3), 1, accuracy: 1e-9)
        bucket.refill(now: 2)
        XCTAssertEqual(bucket.tokens, -2000, accuracy: 1e-9)
        bucket.refill(now: 1)  // a clock that went back adds nothing
        XCTAssertEqual(bucket.tokens, -2000, accuracy: 1e-9)
    }

    func testTheDefaultBurstIsOneSecondsWorth() {
        XCTAssertEqual(RateLimit(perSecond: 1000).burst, 1000)
        XCTAssertEqual(RateLimit(perSecond: 0.5).burst, 1, "at least one")
    }

    func testRateSyntax() throws {
        let count: (Substring) -> Double? = { Double($0) }
        XCTAssertEqual(try RateLimit.parse("1000/s", amount: count), RateLimit(perSecond: 1000, burst: 1000))
        XCTAssertEqual(try RateLimit.parse("5/s:20", amount: count), RateLimit(perSecond: 5, burst: 20))
        XCTAssertEqual(try RateLimit.parse("0.5/s", amount: count).perSecond, 0.5)
        for bad in ["1000", "1000/m", "/s", "0/s", "-3/s", "5/s:", "5/s:0", "x/s", "5/s:y", "inf/s",
                    "1e3/s", "0x10/s", "1./s", "+5/s", "5/s:1e2", "1e-300/s", "0.0009/s"] {
            XCTAssertThrowsError(try RateLimit.parse(bad, amount: count), bad)
        }
        XCTAssertEqual(try RateLimit.parse("0.001/s", amount: count).perSecond, 0.001, "the slowest")
        XCTAssertThrowsError(try RateLimit.parse("0.0001/s", amount: count)) { error in
            XCTAssertEqual("\(error)", "is slower than 0.001/s")
        }
    }

    // MARK: Address keys

    private func key(_ text: String, _ bits: Int = 64) -> AddressKey? { AddressKey(text, ipv6PrefixBits: bits) }

    func testAMappedIPv4AddressIsItsIPv4Address() {
        XCTAssertNotNil(key("127.0.0.2:5000"))
        XCTAssertEqual(key("127.0.0.2:5000"), key("[::ffff:127.0.0.2]:6000"))
        XCTAssertEqual(key("127.0.0.2:1"), key("127.0.0.2:2"), "the port is no part of it")
        XCTAssertNotEqual(key("127.0.0.2:1"), key("127.0.0.3:1"))
        XCTAssertNotEqual(key("127.0.0.2:1"), key("[::7f00:2]:1"), "an IPv4-compatible address is IPv6")
    }

    func testIPv6AddressesGroupByPrefix() {
        XCTAssertEqual(key("[2001:db8:1:2:aaaa::1]:1"), key("[2001:db8:1:2:bbbb::9]:2"), "one /64")
        XCTAssertNotEqual(key("[2001:db8:1:2::1]:1"), key("[2001:db8:1:3::1]:1"))
        XCTAssertEqual(key("[2001:db8:1:2::1]:1", 48), key("[2001:db8:1:3::1]:1", 48))
        XCTAssertNotEqual(key("[2001:db8:1:2::1]:1", 128), key("[2001:db8:1:2::2]:1", 128))
        XCTAssertEqual(key("[2001:db8:ffff::]:1", 33), key("[2001:db8:8000::]:1", 33), "a prefix inside a byte")
        XCTAssertNotEqual(key("[2001:db8:ffff::]:1", 33), key("[2001:db8:7fff::]:1", 33))
    }

    func testASocketPathHasNoKey() {
        XCTAssertNil(key("/run/wspipe.sock"))
        XCTAssertNil(key(""))
    }

    // MARK: Address table

    private func table(clients: Int? = 2, rate: RateLimit? = nil, entries: Int = 100) -> AddressTable {
        var settings = AddressLimitSettings(maximumClients: clients, requestRate: rate)
        settings.maximumEntries = entries
        return AddressTable(settings)
    }

    private func ip(_ n: Int) -> AddressKey { AddressKey("10.0.\(n / 256).\(n % 256):1", ipv6PrefixBits: 64)! }

    func testClientsAreCountedAndTheEntryFreedAtZero() {
        var table = table()
        table.connected(ip(1), now: 0)
        table.connected(ip(1), now: 0)
        table.connected(ip(2), now: 0)
        XCTAssertEqual(table.clients(ip(1)), 2)
        XCTAssertEqual(table.entries.count, 2)
        table.disconnected(ip(1), now: 1)
        XCTAssertEqual(table.clients(ip(1)), 1)
        table.disconnected(ip(1), now: 1)
        XCTAssertEqual(table.clients(ip(1)), 0)
        XCTAssertNil(table.entries[ip(1)], "no client and no bucket: freed")
        table.disconnected(ip(1), now: 1)  // an entry already gone is not made again
        XCTAssertNil(table.entries[ip(1)])
    }

    func testARequestRateEntryIsFreedOnceItsBucketIsFull() {
        var table = table(clients: nil, rate: RateLimit(perSecond: 1, burst: 2))
        XCTAssertNil(table.request(ip(1), now: 0))
        XCTAssertNil(table.request(ip(1), now: 0))
        let wait = table.request(ip(1), now: 0)
        XCTAssertEqual(wait ?? 0, 1, accuracy: 1e-9, "a third request waits a second")
        XCTAssertNil(table.request(ip(2), now: 0), "another address has its own bucket")
        XCTAssertEqual(table.entries.count, 2)
        // Later requests sweep the oldest entries whose buckets are full again.
        XCTAssertNil(table.request(ip(3), now: 10))
        XCTAssertNil(table.entries[ip(1)])
        XCTAssertNil(table.entries[ip(2)])
        XCTAssertEqual(table.entries.count, 1)
    }

    func testTheOldestEntryGoesWhenTheTableIsFull() {
        var table = table(clients: 5, entries: 3)
        for n in 1...3 { table.connected(ip(n), now: 0) }
        table.connected(ip(4), now: 0)
        XCTAssertEqual(table.entries.count, 3)
        XCTAssertNil(table.entries[ip(1)], "the oldest is forgotten")
        XCTAssertEqual(table.evictions, 1)
        XCTAssertEqual(table.clients(ip(4)), 1)
        table.disconnected(ip(1), now: 0)  // its client leaving later changes nothing
        XCTAssertEqual(table.entries.count, 3)
    }

    func testAFloodOfAddressesKeepsTheTableAndItsOrderBounded() {
        var table = table(clients: nil, rate: RateLimit(perSecond: 1, burst: 1), entries: 1000)
        for n in 0..<50_000 { _ = table.request(ip(n), now: Double(n) / 100_000) }
        XCTAssertLessThanOrEqual(table.entries.count, 1000)
        XCTAssertLessThanOrEqual(table.orderCount, 2 * 1000 + 64 + 1)
        // Connecting and leaving, over and over, frees as it goes.
        var churn = self.table(clients: 3, entries: 1000)
        for n in 0..<50_000 {
            churn.connected(ip(n), now: 0)
            churn.disconnected(ip(n), now: 0)
        }
        XCTAssertEqual(churn.entries.count, 0)
        XCTAssertLessThanOrEqual(churn.orderCount, 64 + 1)
    }
}
