import XCTest
@testable import WSKit

/// The queue of received messages and of sends (`BlockQueue`), without sockets.
final class BlockQueueTests: XCTestCase {
    /// In order across blocks of every size (16, 32, ... 4,096, then more of 4,096), with
    /// removals between appends.
    func testElementsLeaveInTheOrderTheyCame() {
        var queue = BlockQueue<Int>()
        var next = 0, expected = 0
        for round in 0..<40 {
            for _ in 0..<(round * 517 % 9000) {
                queue.append(next)
                next += 1
            }
            for _ in 0..<(round * 311 % 7000) {
                guard let element = queue.removeFirst() else { break }
                XCTAssertEqual(element, expected)
                expected += 1
            }
        }
        while let element = queue.removeFirst() {
            XCTAssertEqual(element, expected)
            expected += 1
        }
        XCTAssertEqual(expected, next)
        XCTAssertTrue(queue.isEmpty)
        XCTAssertNil(queue.removeFirst())
    }

    /// `append(taking:)` links the other queue's blocks behind; `prepend(taking:)` before.
    /// The other queue is left empty and keeps nothing of them.
    func testWholeQueuesJoinAtEitherEnd() {
        var queue = BlockQueue<Int>()
        var other = BlockQueue<Int>()
        for i in 100..<200 { queue.append(i) }
        for i in 200..<5000 { other.append(i) }
        queue.append(taking: &other)
        XCTAssertTrue(other.isEmpty)
        for i in 0..<100 { other.append(i) }
        queue.prepend(taking: &other)
        XCTAssertTrue(other.isEmpty)
        other.append(5000)  // the emptied queue is usable again
        queue.append(taking: &other)
        queue.append(taking: &other)  // nothing: no change
        XCTAssertEqual(queue.removeAll(), Array(0...5000))

        // What the outbox's drain does: take the chain, give some, put the rest back before
        // what was sent meanwhile (or into an empty outbox, whose later sends then fill the
        // partly emptied last block).
        for sentMeanwhile in [50, 0] {
            var outbox = BlockQueue<Int>()
            for i in 0..<100 { outbox.append(i) }
            var taken = BlockQueue<Int>()
            taken.append(taking: &outbox)
            XCTAssertTrue(outbox.isEmpty)
            for i in 0..<30 { XCTAssertEqual(taken.removeFirst(), i) }
            for i in 100..<(100 + sentMeanwhile) { outbox.append(i) }
            outbox.prepend(taking: &taken)
            XCTAssertTrue(taken.isEmpty)
            XCTAssertNil(taken.removeFirst())
            for i in (100 + sentMeanwhile)..<5000 { outbox.append(i) }
            XCTAssertEqual(outbox.removeAll(), Array(30..<5000))
        }

        var empty = BlockQueue<Int>()
        var some = BlockQueue<Int>()
        some.append(1)
        empty.prepend(taking: &some)
        empty.append(2)
        XCTAssertEqual(empty.removeAll(), [1, 2])
    }

    /// An emptied block becomes the spare (the largest allowed); the filling side takes it
    /// over and fills it before it makes a new one. Blocks over 64 elements are kept only
    /// when asked (`keepsBuffersWhenIdle`): an idle connection holds little.
    func testAnEmptiedBlockGoesBackToTheFillingSide() {
        var filling = BlockQueue<Int>()
        var inbox = BlockQueue<Int>()
        filling.append(1)
        inbox.append(taking: &filling)
        XCTAssertEqual(inbox.removeFirst(), 1)
        XCTAssertEqual(inbox.spareCapacity, 16)
        filling.takeSpare(from: &inbox)
        XCTAssertEqual(filling.spareCapacity, 16)
        XCTAssertNil(inbox.spareCapacity)
        filling.append(2)
        XCTAssertNil(filling.spareCapacity, "the spare was filled")

        for keepsLarge in [false, true] {
            var queue = BlockQueue<Int>(keepsLargeSpare: keepsLarge)
            for i in 0..<20000 { queue.append(i) }  // blocks of 16, 32, ... 4,096
            while queue.removeFirst() != nil {}
            XCTAssertEqual(queue.spareCapacity, keepsLarge ? 4096 : 64)
        }
    }

    /// An element is moved through, not copied or retained: once out of the queue the
    /// caller holds the only reference; what a dropped queue still holds is released.
    func testElementsAreMovedAndReleased() {
        weak var seen: Tracked?
        var queue = BlockQueue<Tracked>()
        do {
            let element = Tracked()
            seen = element
            queue.append(element)
        }
        XCTAssertNotNil(seen, "the queue holds it")
        var taken = queue.removeFirst()
        XCTAssertTrue(isKnownUniquelyReferenced(&taken), "moved out: the queue keeps no reference")
        taken = nil
        XCTAssertNil(seen)

        do {
            var dropped = BlockQueue<Tracked>()
            for _ in 0..<100 { dropped.append(Tracked()) }
            _ = dropped.removeFirst()
            XCTAssertEqual(Tracked.alive, 99)
        }
        XCTAssertEqual(Tracked.alive, 0, "a dropped queue releases what it held")
    }

    /// A chain of many blocks (a queue of queues of one message each) is let go without a
    /// deinit per block nested in the last one's (which would overflow the stack).
    func testALongChainIsReleasedWithoutRecursion() {
        var queue = BlockQueue<Int>()
        for i in 0..<300_000 {
            var one = BlockQueue<Int>()
            one.append(i)
            queue.append(taking: &one)
        }
        XCTAssertEqual(queue.removeFirst(), 0)
        queue = BlockQueue()
        XCTAssertTrue(queue.isEmpty)
    }
}

/// Counts its live instances (the tests run one at a time).
private final class Tracked {
    nonisolated(unsafe) static var alive = 0
    init() { Tracked.alive += 1 }
    deinit { Tracked.alive -= 1 }
}

extension BlockQueue {
    /// Every element left, oldest first.
    mutating func removeAll() -> [Element] {
        var elements: [Element] = []
        while let element = removeFirst() { elements.append(element) }
        return elements
    }
}
