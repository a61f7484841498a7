import Glibc

/// Writes received messages to stdout on its own thread with blocking writev(2), so a slow
/// reader never stalls pongs, pings or timers on the network thread, and stdout is never
/// switched to non-blocking mode. The network thread submits one batch per socket read;
/// the writer takes everything queued and writes it with as few writev calls as iovecs
/// allow (at most 1024 per call).
final class StdoutWriter: @unchecked Sendable {
    enum Failure: Equatable {
        /// The reader went away (EPIPE): not an error for a pipeline like `| head -n1`.
        case readerGone
        case failed(String)
    }

    private let condition = Condition()
    private var queue = SegmentList()      // guarded
    private var queued = 0                 // guarded: bytes submitted, not yet written
    private var finishing = false          // guarded
    private var finished = false           // guarded
    private var failure: Failure?          // guarded
    private let fd: Int32
    private let wakeup: Wakeup
    /// Below this many queued bytes the network thread reads the socket again.
    let lowWater: Int

    init(fd: Int32 = 1, lowWater: Int, wakeup: Wakeup) {
        self.fd = fd
        self.lowWater = lowWater
        self.wakeup = wakeup
    }

    func start() -> Bool { startThread { [self] in run() } }

    /// Queues a batch of bytes to write in order.
    func submit(_ batch: SegmentList) {
        guard !batch.isEmpty else { return }
        condition.lock()
        if failure == nil {
            queue.append(contentsOf: batch)
            queued += batch.byteCount
        }
        condition.unlock()
        condition.broadcast()
    }

    /// Bytes submitted and not yet written.
    var pendingBytes: Int { condition.withLock { queued } }

    var currentFailure: Failure? { condition.withLock { failure } }

    /// Waits until everything submitted is written (or writing failed).
    func finish() {
        condition.lock()
        finishing = true
        condition.broadcast()
        while !finished { condition.wait() }
        condition.unlock()
    }

    private func run() {
        let vectors = UnsafeMutableBufferPointer<iovec>.allocate(capacity: 1024)
        defer { vectors.deallocate() }
        while true {
            condition.lock()
            while queue.isEmpty && !finishing { condition.wait() }
            if queue.isEmpty {
                finished = true
                condition.broadcast()
                condition.unlock()
                return
            }
            var batch = queue.take()
            condition.unlock()

            while !batch.isEmpty {
                let count = batch.fill(vectors)
                let n = Glibc.writev(fd, vectors.baseAddress, Int32(count))
                if n >= 0 {
                    batch.consume(n)
                    markWritten(n)
                    continue
                }
                let code = errno
                if code == EINTR { continue }
                if code == EAGAIN {
                    var entry = pollfd(fd: fd, events: Int16(POLLOUT), revents: 0)
                    _ = poll(&entry, 1, -1)
                    continue
                }
                condition.lock()
                switch code {
                case EPIPE: failure = .readerGone
                case EBADF: failure = .failed("cannot write to stdout: it is closed")
                default: failure = .failed("cannot write to stdout: \(String(cString: strerror(code)))")
                }
                queue.removeAll()
                queued = 0
                finished = true
                condition.broadcast()
                condition.unlock()
                wakeup.signal()
                return
            }
        }
    }

    private func markWritten(_ n: Int) {
        condition.lock()
        let before = queued
        queued -= n
        let crossed = before >= lowWater && queued < lowWater
        condition.unlock()
        if crossed { wakeup.signal() }
    }
}
