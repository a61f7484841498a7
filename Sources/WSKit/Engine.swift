import CWSPipeShims
import Glibc
import Synchronization
import WebSocketEngine

/// The one engine thread of the process: an `EventLoop` that runs every connection's
/// driver. Other threads hand it work with `submit`, which wakes it (eventfd) only when
/// its inbox was empty, so a burst of sends costs one wake-up.
final class EngineThread: Sendable {
    /// Started on first use; lives as long as the process.
    static let shared = EngineThread()

    /// Only touched on the engine thread (inside submitted work).
    nonisolated(unsafe) let loop: EventLoop
    private let inbox = Mutex<(work: [@Sendable () -> Void], woken: Bool)>(([], false))

    private init() {
        // An eventfd and an epoll instance: failing to make them means the process is out of
        // descriptors; the library cannot work at all then.
        guard let loop = try? EventLoop() else { fatalError("WSKit: cannot create the engine's event loop (out of file descriptors?)") }
        self.loop = loop
        // A received message's array is allocated on the engine thread and freed by the
        // consumer: with glibc's thresholds at their start values (128 KiB), the engine
        // thread's heap gave back its pages each time the consumer caught up and faulted
        // them in again for the next messages (a 64 KiB download: 230,000 page faults per
        // 2 GiB, a quarter of the samples). Past a receive limit's worth (1 MiB by default)
        // freed memory stays with malloc, as it does in a program that has once freed a
        // message of that size.
        wsp_raise_malloc_thresholds(1 << 20)
        loop.onWake = { [unowned self] in self.runInbox() }
        startThread(name: "wskit-engine") { [self] in self.loop.run() }
    }

    /// Runs `work` on the engine thread, soon.
    func submit(_ work: @escaping @Sendable () -> Void) {
        let wake = inbox.withLock { state -> Bool in
            state.work.append(work)
            if state.woken { return false }
            state.woken = true
            return true
        }
        if wake { loop.wake() }
    }

    private func runInbox() {
        let work = inbox.withLock { state -> [@Sendable () -> Void] in
            state.woken = false
            defer { state.work = [] }
            return state.work
        }
        for item in work { item() }
    }
}

/// Threads that perform blocking connects (DNS on its own helper thread, happy eyeballs,
/// proxies, TLS and the opening handshake, all under the connect deadline), so that neither
/// the engine thread nor Swift's cooperative pool ever waits on the network. At most
/// `maximumThreads` connects run at once; more wait their turn in order.
final class ConnectPool: Sendable {
    static let shared = ConnectPool()
    static let maximumThreads = 8

    private struct State {
        var jobs: [@Sendable () -> Void] = []
        var head = 0
        var idle = 0
        var threads = 0
    }
    private let state = Mutex(State())
    // A condition variable needs a pthread mutex of its own (Mutex has none).
    nonisolated(unsafe) private let lock = UnsafeMutablePointer<pthread_mutex_t>.allocate(capacity: 1)
    nonisolated(unsafe) private let ready = UnsafeMutablePointer<pthread_cond_t>.allocate(capacity: 1)

    private init() {
        pthread_mutex_init(lock, nil)
        pthread_cond_init(ready, nil)
    }

    func run(_ job: @escaping @Sendable () -> Void) {
        pthread_mutex_lock(lock)
        let spawn = state.withLock { state -> Bool in
            state.jobs.append(job)
            guard state.idle == 0, state.threads < ConnectPool.maximumThreads else { return false }
            state.threads += 1
            return true
        }
        pthread_cond_signal(ready)
        pthread_mutex_unlock(lock)
        if spawn { startThread(name: "wskit-connect") { [self] in work() } }
    }

    private func work() {
        while true {
            pthread_mutex_lock(lock)
            var job: (@Sendable () -> Void)?
            while job == nil {
                job = state.withLock { state -> (@Sendable () -> Void)? in
                    guard state.head < state.jobs.count else { return nil }
                    let next = state.jobs[state.head]
                    state.head += 1
                    if state.head == state.jobs.count {
                        state.jobs.removeAll(keepingCapacity: true)
                        state.head = 0
                    }
                    return next
                }
                if job == nil {
                    state.withLock { $0.idle += 1 }
                    pthread_cond_wait(ready, lock)
                    state.withLock { $0.idle -= 1 }
                }
            }
            pthread_mutex_unlock(lock)
            job?()
        }
    }
}

/// Starts a detached thread running `body`; the library cannot work without it.
private func startThread(name: String, _ body: @escaping @Sendable () -> Void) {
    let status = startDetachedThread(body)
    guard status == 0 else { fatalError("WSKit: cannot start the \(name) thread: \(String(cString: strerror(status)))") }
}
