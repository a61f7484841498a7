/// Points in the outbound stream that an owner waits to see written
/// (`ConnectionDriver.reportWhenWritten`), in the order asked. A mark behind messages that
/// still wait unframed gets its end once they are framed: until then it counts how many
/// more waiting entries must be framed (after those of the marks ahead of it).
///
/// Its lists live in a box made at the first mark: a connection whose owner never asks
/// (every server connection, most clients) carries one word, not the lists' 56 bytes.
struct WrittenMarks {
    private final class Box {
        var list: WrittenMarkList
        init(_ list: WrittenMarkList) { self.list = list }
    }
    private var box: Box?

    /// The end of the first mark whose end is known (one load per flush when nobody waits).
    var firstEnd: UInt64? { box?.list.firstEnd }
    var waitsForFraming: Bool { box?.list.waitsForFraming ?? false }

    private mutating func withList<R>(_ change: (inout WrittenMarkList) -> R) -> R {
        if box == nil {
            box = Box(WrittenMarkList())
        } else if !isKnownUniquelyReferenced(&box) {
            box = Box(box!.list)  // a copy of the marks changes alone
        }
        return change(&box!.list)
    }

    mutating func add(token: UInt64, end: UInt64) { withList { $0.add(token: token, end: end) } }
    mutating func add(token: UInt64, afterWaiting entries: Int) { withList { $0.add(token: token, afterWaiting: entries) } }
    mutating func framedOne(total: UInt64) {
        guard waitsForFraming else { return }
        withList { $0.framedOne(total: total) }
    }
    mutating func takeReached(written: UInt64) -> UInt64? {
        guard box != nil else { return nil }
        return withList { $0.takeReached(written: written) }
    }
}

/// `WrittenMarks`' lists, once there is a mark.
private struct WrittenMarkList {
    private var ends: [(end: UInt64, token: UInt64)] = []
    private var endsHead = 0
    private var unframed: [(entries: Int, token: UInt64)] = []
    private var unframedHead = 0
    /// The waiting entries all unframed marks wait for.
    private var unframedEntries = 0

    /// The end of the first mark whose end is known (one load per flush when nobody waits).
    private(set) var firstEnd: UInt64?
    var waitsForFraming: Bool { unframedHead < unframed.count }

    /// A mark at `end`: everything sent so far is framed, `end` is the stream's total after it.
    mutating func add(token: UInt64, end: UInt64) {
        if waitsForFraming { return add(token: token, afterWaiting: unframedEntries) }
        if firstEnd == nil { firstEnd = end }
        ends.append((end, token))
    }

    /// A mark behind the `entries` messages waiting unframed now.
    mutating func add(token: UInt64, afterWaiting entries: Int) {
        let more = max(entries - unframedEntries, 0)
        unframedEntries += more
        unframed.append((more, token))
    }

    /// One waiting entry was framed; the stream's total is now `total`.
    mutating func framedOne(total: UInt64) {
        guard waitsForFraming else { return }
        unframedEntries -= 1
        unframed[unframedHead].entries -= 1
        while unframedHead < unframed.count, unframed[unframedHead].entries <= 0 {
            if firstEnd == nil { firstEnd = total }
            ends.append((total, unframed[unframedHead].token))
            unframedHead += 1
        }
        if unframedHead == unframed.count {
            unframed.removeAll(keepingCapacity: true)
            unframedHead = 0
        }
    }

    /// The last token whose mark `written` has reached (those marks are dropped), or nil.
    mutating func takeReached(written: UInt64) -> UInt64? {
        var reached: UInt64?
        while endsHead < ends.count, ends[endsHead].end <= written {
            reached = ends[endsHead].token
            endsHead += 1
        }
        if endsHead == ends.count {
            ends.removeAll(keepingCapacity: true)
            endsHead = 0
        } else if endsHead >= 1024 {
            ends.removeFirst(endsHead)
            endsHead = 0
        }
        firstEnd = endsHead < ends.count ? ends[endsHead].end : nil
        return reached
    }
}
