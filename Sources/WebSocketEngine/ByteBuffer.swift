import Glibc
import Synchronization

/// A fixed-capacity block of bytes, recycled through `BufferPool` when released.
///
/// Buffers carry data without copying: a stdin read lands in one and is masked in place
/// and written to the socket from it; a socket read lands in one and payload ranges of it
/// are written to stdout. A `Segment` keeps its buffer alive until the bytes are written;
/// bytes already queued for writing are never changed again.
public final class ByteBuffer: @unchecked Sendable {
    public let base: UnsafeMutableRawPointer
    public let capacity: Int
    /// Bytes in use, from `base`. Only the thread that fills the buffer touches it.
    public var count = 0
    private let pooled: Bool

    public init(capacity: Int) {
        self.capacity = capacity
        pooled = capacity <= BufferPool.largestPooled
        base = pooled ? BufferPool.take(capacity: capacity)
                      : UnsafeMutableRawPointer.allocate(byteCount: capacity, alignment: 64)
    }

    /// A buffer over static bytes that are never freed (separators).
    public init(constant bytes: [UInt8]) {
        capacity = bytes.count
        let storage = UnsafeMutableRawPointer.allocate(byteCount: max(bytes.count, 1), alignment: 16)
        bytes.withUnsafeBytes { storage.copyMemory(from: $0.baseAddress!, byteCount: bytes.count) }
        base = storage
        count = bytes.count
        pooled = false
    }

    deinit {
        if pooled { BufferPool.give(base, capacity: capacity) } else { base.deallocate() }
    }

    public var free: Int { capacity - count }

    /// `buffer` emptied for reuse if nothing else holds it (all its bytes were written) and
    /// it has exactly `capacity` bytes (an outsized one is let go, not kept for the rest of
    /// the session), else a new buffer of `capacity` bytes. The session runs on one thread,
    /// so "nothing else holds it" cannot change while we look.
    public static func reuse(_ buffer: inout ByteBuffer, orMake capacity: Int) {
        if isKnownUniquelyReferenced(&buffer) && buffer.capacity == capacity {
            buffer.count = 0
        } else {
            buffer = ByteBuffer(capacity: capacity)
        }
    }
    public var end: UnsafeMutableRawPointer { base + count }

    public static let newline = ByteBuffer(constant: [0x0A])
    /// Stands in for the buffer of a segment already written.
    public static let released = ByteBuffer(constant: [])
    public static let nul = ByteBuffer(constant: [0x00])
}

/// Free buffers by size, so steady streaming does not mmap/munmap and page-fault a fresh
/// block for every read. Holds at most `limit` idle buffers of each size, and only sizes up
/// to `largestPooled` (the session's read and arena sizes); larger, rarer buffers (a long
/// stdin line) are freed at once instead of being kept forever.
enum BufferPool {
    static let largestPooled = 1 << 20
    /// The idle buffers of one size. A list of shelves, not a Dictionary keyed by size: a
    /// session uses two or three sizes, and a Dictionary's metadata, made at run time on
    /// first use, checks Int's Hashable conformance against every conformance record of the
    /// binary (155,000 instructions at each start, callgrind).
    private struct Shelf {
        let capacity: Int
        // Addresses as integers: raw pointers are not Sendable.
        var addresses: [UInt]
    }
    private static let idle = Mutex<[Shelf]>([])
    private static let limit = 4
    /// Sizes kept at most: outsized buffers of ever new sizes (long lines, large messages)
    /// must not grow the pool, or its linear search, without bound.
    private static let sizeLimit = 8

    static func take(capacity: Int) -> UnsafeMutableRawPointer {
        let reused = idle.withLock { shelves -> UInt? in
            for i in shelves.indices where shelves[i].capacity == capacity { return shelves[i].addresses.popLast() }
            return nil
        }
        if let reused, let pointer = UnsafeMutableRawPointer(bitPattern: reused) { return pointer }
        return UnsafeMutableRawPointer.allocate(byteCount: capacity, alignment: 64)
    }

    static func give(_ pointer: UnsafeMutableRawPointer, capacity: Int) {
        let address = UInt(bitPattern: pointer)
        let kept = idle.withLock { shelves -> Bool in
            for i in shelves.indices where shelves[i].capacity == capacity {
                if shelves[i].addresses.count >= limit { return false }
                shelves[i].addresses.append(address)
                return true
            }
            guard shelves.count < sizeLimit else { return false }
            shelves.append(Shelf(capacity: capacity, addresses: [address]))
            return true
        }
        if !kept { pointer.deallocate() }
    }
}

/// A run of bytes inside a buffer that keeps the buffer alive.
public struct Segment: @unchecked Sendable {
    public var owner: ByteBuffer
    public var start: UnsafeMutableRawPointer
    public var count: Int

    public init(owner: ByteBuffer, start: UnsafeMutableRawPointer, count: Int) {
        self.owner = owner
        self.start = start
        self.count = count
    }
}

/// An ordered list of segments; appending bytes that continue the last segment in the
/// same buffer extends it, so runs of small copies become one iovec.
public struct SegmentList {
    public private(set) var segments: [Segment] = []
    private var head = 0
    public private(set) var byteCount = 0

    public init() {}

    public var isEmpty: Bool { head == segments.count }

    public mutating func append(_ owner: ByteBuffer, _ start: UnsafeMutableRawPointer, _ count: Int) {
        guard count > 0 else { return }
        byteCount += count
        let last = segments.count - 1
        // Extended in place: `segments.last` copied the segment (a retain and release of its
        // owner for every small message written to stdout).
        if last >= head, segments.withUnsafeMutableBufferPointer({ list in
            guard list[last].owner === owner, list[last].start + list[last].count == start else { return false }
            list[last].count += count
            return true
        }) {
            return
        }
        segments.append(Segment(owner: owner, start: start, count: count))
    }

    public mutating func append(contentsOf other: SegmentList) {
        for segment in other.segments[other.head...] { append(segment.owner, segment.start, segment.count) }
    }

    /// Fills `vectors` with up to `vectors.count` iovecs from the front; returns how many.
    public func fill(_ vectors: UnsafeMutableBufferPointer<iovec>) -> Int {
        var n = 0
        var i = head
        while i < segments.count && n < vectors.count {
            vectors[n] = iovec(iov_base: segments[i].start, iov_len: segments[i].count)
            n += 1
            i += 1
        }
        return n
    }

    /// Drops `bytes` from the front (they were written).
    public mutating func consume(_ bytes: Int) {
        var left = bytes
        byteCount -= bytes
        while left > 0 {
            let first = segments[head].count
            if left >= first {
                left -= first
                // Written: let go of its buffer now, not when the whole queue is empty (a
                // queue that never quite empties would keep every buffer it ever held).
                segments[head].owner = ByteBuffer.released
                head += 1
            } else {
                segments[head].start += left
                segments[head].count -= left
                left = 0
            }
        }
        if head == segments.count {
            segments.removeAll(keepingCapacity: true)
            head = 0
        } else if head > 256 && head * 2 > segments.count {
            segments.removeFirst(head)
            head = 0
        }
    }

    public mutating func removeAll() {
        segments.removeAll(keepingCapacity: true)
        head = 0
        byteCount = 0
    }

    /// Takes the whole list, leaving this one empty.
    public mutating func take() -> SegmentList {
        let taken = self
        self = SegmentList()
        return taken
    }
}
