import CWSPipeShims
import Glibc
import Synchronization

/// Runs blocking jobs (a client connection's opening: DNS, TCP, TLS, the handshake), each
/// on a thread of its own, and hands each result back on the loop's thread: one slow or
/// unreachable peer holds up neither the loop nor the other jobs. At most `limit` run at
/// once; the owner checks `isFull` before taking more work (a listener pauses accepting,
/// and what waits stays in the kernel's backlog).
///
/// Results come back through an eventfd of its own that the loop watches, so the loop's
/// `onWake` stays its owner's (signals).
public final class BlockingJobs<Output> {
    /// A result crossing from a job's thread to the loop's (it is touched by one at a time).
    private struct Finished: @unchecked Sendable {
        let id: UInt64
        let output: Output
    }

    private let loop: EventLoop
    public let limit: Int
    private let wakeFD: Int32
    private var watch: EventLoop.Watch?
    /// Where jobs' threads leave their results (shared with them, not this object).
    private final class Mailbox: Sendable {
        let results = Mutex<[Finished]>([])
    }
    private let finished = Mailbox()
    private var waiting: [UInt64: (Output) -> Void] = [:]
    private var nextID: UInt64 = 0

    /// Jobs started whose result has not been handed back yet.
    public var running: Int { waiting.count }
    public var isFull: Bool { waiting.count >= limit }
    /// Called on the loop after each result is handed back (the owner may take work again).
    public var onResult: (() -> Void)?

    public init(loop: EventLoop, limit: Int) throws(EventLoopError) {
        let fd = wsp_eventfd()
        guard fd >= 0 else { throw .cannotCreate(what: "an eventfd", errno: errno) }
        self.loop = loop
        self.limit = limit
        wakeFD = fd
        watch = loop.watch(fd) { [weak self] _ in self?.deliver() }
        if let watch { loop.setInterest(watch, .readable) }
    }

    deinit {
        if let watch { loop.remove(watch) }
        // A job still running signals this eventfd when it ends: its number must not be
        // reused by then, so it stays open (until exit, which is what comes next).
        if waiting.isEmpty { Glibc.close(wakeFD) }
    }

    /// Starts `job` on a thread of its own; `done` gets its output on the loop's thread.
    /// Returns false (and runs nothing) when no thread can be started.
    @discardableResult
    public func run(_ job: @escaping @Sendable () -> Output, then done: @escaping (Output) -> Void) -> Bool {
        nextID += 1
        let id = nextID
        let finished = self.finished
        let wakeFD = self.wakeFD
        // The job's thread keeps the mailbox and the eventfd's number, not this object: a
        // result that ends after the owner is gone is dropped.
        let status = startDetachedThread {
            let output = job()
            finished.results.withLock { $0.append(Finished(id: id, output: output)) }
            wsp_eventfd_signal(wakeFD)
        }
        guard status == 0 else { return false }
        waiting[id] = done
        return true
    }

    private func deliver() {
        _ = wsp_eventfd_drain(wakeFD)
        let results = finished.results.withLock { list -> [Finished] in
            defer { list = [] }
            return list
        }
        for result in results {
            guard let done = waiting.removeValue(forKey: result.id) else { continue }
            done(result.output)
            onResult?()
        }
    }
}

/// Starts a detached thread running `body`. Returns pthread_create's status: 0, or the
/// error (EAGAIN: out of threads or memory).
@discardableResult
public func startDetachedThread(_ body: @escaping @Sendable () -> Void) -> Int32 {
    final class Box: Sendable {
        let body: @Sendable () -> Void
        init(_ body: @escaping @Sendable () -> Void) { self.body = body }
    }
    let context = Unmanaged.passRetained(Box(body)).toOpaque()
    var thread = pthread_t()
    let status = pthread_create(&thread, nil, { raw in
        guard let raw else { return nil }
        Unmanaged<Box>.fromOpaque(raw).takeRetainedValue().body()
        return nil
    }, context)
    guard status == 0 else {
        Unmanaged<Box>.fromOpaque(context).release()
        return status
    }
    pthread_detach(thread)
    return 0
}
