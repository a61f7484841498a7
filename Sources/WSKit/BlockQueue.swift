/// A first-in first-out queue between two threads, in blocks: one side fills blocks, the
/// queue under the connection's lock links whole blocks to its end (whatever their count),
/// and the other side moves elements out one at a time. An element is moved in and moved
/// out: nothing is copied or retained on the way, and nothing grows under the lock. The
/// received messages (`Shared.inbox`) and the caller's sends (`Shared.outbox`) go this way.
///
/// (The inbox was an array: a read that arrived before the consumer had caught up copied
/// every waiting message into a larger array, with a retain, a release and fresh pages for
/// each. 2 million 15-byte messages: 2,979 page faults, against 556 for the CLI.)
struct BlockQueue<Element>: ~Copyable {
    private var first: Block?
    private var last: Block?
    /// An emptied block, for the side that fills (`takeSpare(from:)`): one block fewer to
    /// allocate per socket read or drain. A large one only with `keepsLargeSpare`
    /// (`WebSocketOptions.keepsBuffersWhenIdle`): otherwise an idle connection holds at
    /// most 1.5 KiB per queue.
    private var spare: Block?
    static var spareLargest: Int { 64 }
    /// Whether an emptied block of any size becomes the spare.
    private let keepsLargeSpare: Bool
    /// The capacity of the next block made: doubles (up to `Block.largest`) each time a
    /// block fills, and stays when the blocks are handed over, so a steady stream fills
    /// blocks of the size its reads need rather than starting small at each read.
    private var nextCapacity = 16

    init(keepsLargeSpare: Bool = false) {
        self.keepsLargeSpare = keepsLargeSpare
    }

    /// A block is in the chain only while it holds elements: it joins with its first and
    /// leaves with its last. (Header and elements in one `ManagedBuffer` allocation made
    /// every access slower: 15-byte download 0.135 s against 0.125 s.)
    final class Block {
        /// The largest block: 4,096 elements (96 KiB of messages), under malloc's mmap
        /// threshold, so a block freed and another made reuse memory instead of faulting
        /// in fresh pages.
        static var largest: Int { 4096 }
        private let storage: UnsafeMutablePointer<Element>
        let capacity: Int
        /// Elements `head..<tail` are there; those before `head` were moved out.
        private var head = 0
        private var tail = 0
        var next: Block?

        init(capacity: Int) {
            self.capacity = capacity
            storage = .allocate(capacity: capacity)
        }

        deinit {
            (storage + head).deinitialize(count: tail - head)
            storage.deallocate()
            // A long chain is let go one block at a time, not by nested deinits.
            var rest = next.take()
            while isKnownUniquelyReferenced(&rest) { rest = rest?.next.take() }
        }

        var isEmpty: Bool { head == tail }
        var isFull: Bool { tail == capacity }

        func append(_ element: consuming Element) {
            assert(tail < capacity)
            (storage + tail).initialize(to: element)
            tail += 1
        }

        /// The first element, moved out; the block must not be empty.
        func removeFirst() -> Element {
            assert(head < tail)
            defer { head += 1 }
            return (storage + head).move()
        }

        /// Makes an emptied block ready to be filled again.
        func reset() {
            head = 0
            tail = 0
            next = nil
        }
    }

    var isEmpty: Bool { first == nil }
    /// The capacity of the emptied block waiting to be filled again, if any.
    var spareCapacity: Int? { spare?.capacity }

    /// Appends `element`, in a new block when the last is full (the spare, if any).
    mutating func append(_ element: consuming Element) {
        if let last, !last.isFull {
            last.append(element)
            return
        }
        if last != nil { nextCapacity = min(nextCapacity * 2, Block.largest) }
        let block = spare.take() ?? Block(capacity: nextCapacity)
        block.append(element)
        if let last { last.next = block } else { first = block }
        last = block
    }

    /// Appends all of `other`'s elements, leaving it empty (its spare stays): its blocks
    /// are linked, not copied.
    mutating func append(taking other: inout BlockQueue) {
        guard let head = other.first.take(), let tail = other.last.take() else { return }
        if let last { last.next = head } else { first = head }
        last = tail
    }

    /// Puts all of `other`'s elements before this queue's, leaving it empty (its spare
    /// stays).
    mutating func prepend(taking other: inout BlockQueue) {
        guard let head = other.first.take(), let tail = other.last.take() else { return }
        tail.next = first.take()
        if last == nil { last = tail }
        first = head
    }

    /// The oldest element, moved out; nil when there is none. An emptied block may become
    /// the spare.
    mutating func removeFirst() -> Element? {
        guard let block = first else { return nil }
        let element = block.removeFirst()
        if block.isEmpty {
            first = block.next
            if first == nil { last = nil }
            // The largest allowed is kept: in a stream, the filling side's first block of
            // each read is the spare, and the rest of the read fills blocks of 4,096.
            if keepsLargeSpare || block.capacity <= BlockQueue.spareLargest, block.capacity > spare?.capacity ?? 0 {
                block.reset()
                spare = block
            }
        }
        return element
    }

    /// Takes `other`'s spare block if this queue has none: the block the emptying side
    /// retired goes back to the filling side.
    mutating func takeSpare(from other: inout BlockQueue) {
        if spare == nil { spare = other.spare.take() }
    }
}

/// The received messages waiting for a consumer.
typealias MessageQueue = BlockQueue<Message>

/// A block belongs to one queue at a time (the queue cannot be copied) and crosses threads
/// only as part of a queue moved under the connection's lock.
extension BlockQueue: @unchecked Sendable where Element: Sendable {}
