import CWSPipeShims
import Glibc

/// Reads stdin on its own thread with plain blocking reads, so stdin is never switched to
/// non-blocking mode (that flag is shared with the shell and other processes on the same
/// terminal or pipe). At most `maxQueued` filled buffers wait for the network thread: a
/// slow server stops stdin reads.
final class StdinReader: @unchecked Sendable {
    enum Item {
        case data(ByteBuffer)
        case endOfInput
        case failed(String)
    }

    private let condition = Condition()
    private var items: [Item] = []    // guarded by condition
    private var dataQueued = 0        // guarded: .data items in `items`
    private var stopped = false       // guarded
    private let maxQueued: Int
    private let bufferSize: Int
    private let fd: Int32
    private let wakeup: Wakeup

    init(fd: Int32 = 0, bufferSize: Int, maxQueued: Int = 4, wakeup: Wakeup) {
        self.fd = fd
        self.bufferSize = bufferSize
        self.maxQueued = maxQueued
        self.wakeup = wakeup
    }

    func start() -> Bool { startThread { [self] in run() } }

    /// The oldest item, if any, without waiting.
    func next() -> Item? {
        condition.lock()
        defer { condition.unlock() }
        guard !items.isEmpty else { return nil }
        let item = items.removeFirst()
        if case .data = item {
            dataQueued -= 1
            if dataQueued == maxQueued - 1 { condition.broadcast() }
        }
        return item
    }

    /// Whether an item is waiting.
    var hasItems: Bool { condition.withLock { !items.isEmpty } }

    /// Asks the thread to stop reading; it ends after its current read returns.
    func stop() {
        condition.withLock {
            stopped = true
            items.removeAll()
            condition.broadcast()
        }
    }

    private func push(_ item: Item) {
        condition.lock()
        if stopped {
            condition.unlock()
            return
        }
        items.append(item)
        if case .data = item { dataQueued += 1 }
        condition.unlock()
        wakeup.signal()
    }

    private func run() {
        while true {
            condition.lock()
            while dataQueued >= maxQueued && !stopped { condition.wait() }
            let stop = stopped
            condition.unlock()
            if stop { return }

            let buffer = ByteBuffer(capacity: bufferSize)
            let n = Glibc.read(fd, buffer.base, buffer.capacity)
            if n > 0 {
                buffer.count = n
                push(.data(buffer))
                continue
            }
            if n == 0 {
                push(.endOfInput)
                return
            }
            let code = errno
            switch code {
            case EINTR:
                continue
            case EAGAIN:
                // Someone handed us a non-blocking stdin: wait for it instead of spinning.
                var entry = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
                _ = poll(&entry, 1, -1)
            case EBADF:
                // stdin is closed (`<&-`): no input at all.
                push(.endOfInput)
                return
            default:
                push(.failed("cannot read stdin: \(String(cString: strerror(code)))"))
                return
            }
        }
    }
}
