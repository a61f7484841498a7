import WebSocketCore

/// What an `OfflineQueue` does with a message that does not fit.
public enum QueuePolicy: String, Sendable, CaseIterable {
    /// Take it, and tell the producer to stop (`acceptsMore` is false): lossless.
    case block
    /// Make room by dropping the oldest whole messages (counted).
    case dropOldest = "drop-oldest"
    /// Drop the new message (counted).
    case dropNewest = "drop-newest"
    /// Drop it and mark the queue `overflowed`: the owner gives up.
    case fail
}

/// Whole messages kept while there is no connection, sent in order to the next one.
///
/// A `MessageSink`, so the producer writes to it as it writes to a connection. Frames of
/// one message (`fin` false until its last) stay together: dropping is per whole message.
/// Payloads are copied (the queue outlives the producer's buffers).
public final class OfflineQueue: MessageSink {
    /// Messages held at most.
    public let messageLimit: Int
    /// Payload bytes held at most.
    public let byteLimit: Int
    public let policy: QueuePolicy

    private struct Message {
        var frames: [(opcode: Opcode, fin: Bool, bytes: [UInt8])] = []
        var byteCount = 0
        var complete = false
    }
    private var messages: [Message] = []
    private var head = 0
    /// The message being received is being dropped (decided at its first frame).
    private var droppingCurrent = false

    public private(set) var byteCount = 0
    /// Messages dropped since the last `takeDropped()`, and in all.
    public private(set) var droppedSinceReport = 0
    public private(set) var droppedTotal: UInt64 = 0
    /// Messages that went through the queue, in all.
    public private(set) var queuedTotal: UInt64 = 0
    /// Messages and payload bytes given to the queue (kept or dropped), and those passed on
    /// by `drain`: the difference never reached a connection (dropped, or still held).
    public private(set) var offered = (messages: UInt64(0), bytes: UInt64(0))
    public private(set) var passedOn = (messages: UInt64(0), bytes: UInt64(0))
    /// A message did not fit under `.fail`.
    public private(set) var overflowed = false

    /// - Parameters: `messageLimit` messages and `byteLimit` payload bytes, both at least 1.
    public init(messageLimit: Int, byteLimit: Int, policy: QueuePolicy) {
        self.messageLimit = max(1, messageLimit)
        self.byteLimit = max(1, byteLimit)
        self.policy = policy
    }

    /// Messages held (a message still receiving frames counts).
    public var count: Int { messages.count - head }
    public var isEmpty: Bool { count == 0 }
    private var isFull: Bool { count >= messageLimit || byteCount >= byteLimit }

    /// Whether the producer should go on: false under `.block` once full, and once
    /// `.fail` overflowed.
    public var acceptsMore: Bool {
        switch policy {
        case .block: return !isFull
        case .fail: return !overflowed
        case .dropOldest, .dropNewest: return true
        }
    }

    public func send(_ opcode: Opcode, fin: Bool, _ payload: UnsafeMutableRawPointer?, count: Int, in owner: ByteBuffer?) {
        let bytes = payload.map { Array(UnsafeRawBufferPointer(start: $0, count: count)) } ?? []
        send(opcode, fin: fin, bytes: bytes)
    }

    public func send(_ opcode: Opcode, fin: Bool, bytes: [UInt8]) {
        let continuing = count > 0 && !messages[messages.count - 1].complete
        if !continuing && !droppingCurrent { offered.messages += 1 }
        offered.bytes += UInt64(bytes.count)
        if !continuing && !droppingCurrent {
            if !admit(bytes.count) {
                droppingCurrent = !fin
                return
            }
            messages.append(Message())
            queuedTotal += 1
        } else if droppingCurrent {
            if fin { droppingCurrent = false }
            return
        }
        let last = messages.count - 1
        messages[last].frames.append((opcode, fin, bytes))
        messages[last].byteCount += bytes.count
        messages[last].complete = fin
        byteCount += bytes.count
    }

    /// Room for a new message of `size` bytes under the policy; false: it is dropped.
    private func admit(_ size: Int) -> Bool {
        let fits = { self.count < self.messageLimit && self.byteCount + size <= self.byteLimit }
        if fits() || (isEmpty && size > byteLimit && policy == .block) { return true }
        switch policy {
        case .block:
            return true  // the producer stops reading once full; nothing is dropped
        case .dropOldest:
            while !fits() && head < messages.count && messages[head].complete {
                byteCount -= messages[head].byteCount
                head += 1
                countDrop()
            }
            compact()
            if fits() || isEmpty { return true }
            countDrop()
            return false
        case .dropNewest:
            countDrop()
            return false
        case .fail:
            overflowed = true
            return false
        }
    }

    private func countDrop() {
        droppedSinceReport += 1
        droppedTotal += 1
    }

    private func compact() {
        if head > 64 && head * 2 > messages.count {
            messages.removeFirst(head)
            head = 0
        }
    }

    /// The drops since the last call (for an event), and starts counting again.
    public func takeDropped() -> Int {
        defer { droppedSinceReport = 0 }
        return droppedSinceReport
    }

    /// Sends every complete message to `sink` in order and empties the queue of them; a
    /// message still receiving frames stays (its remaining frames go to the queue).
    /// - Returns: the number of messages sent.
    @discardableResult
    public func drain(into sink: some MessageSink) -> Int {
        var sent = 0
        while head < messages.count && messages[head].complete {
            for frame in messages[head].frames { sink.send(frame.opcode, fin: frame.fin, bytes: frame.bytes) }
            passedOn.messages += 1
            passedOn.bytes += UInt64(messages[head].byteCount)
            byteCount -= messages[head].byteCount
            head += 1
            sent += 1
        }
        messages.removeFirst(head)
        head = 0
        return sent
    }
}
