import CWSPipeShims
import Glibc
import Synchronization
import WebSocketEngine
import WebSocketTransport

/// The client's openings (its connection, and each of --reconnect's attempts): DNS, TCP,
/// TLS, the handshake and redirects (`Opener`) run on a thread of their own, and the result
/// comes back on the loop (through an eventfd the loop watches). The loop goes on
/// meanwhile: stdin flows into the offline queue, --timeout and the other timers fire,
/// signals are heard. A run that ends while opening cancels the dial (`cancel`) and waits
/// for its result, so the process never exits under a thread in the middle of TLS.
///
/// One opening at a time, so this is a single slot rather than the engine's `BlockingJobs`
/// (--forward-listen's many): a generic type's metadata is made at run time on first use,
/// and `BlockingJobs<...>` with its arrays and dictionary cost 300,000 instructions a run
/// (scripts/profile's download workload: 5 % of it); this slot costs none of that.
final class ClientOpening {
    /// A connection opened, and the buffer its handshake's answer was read into (the
    /// driver's first receive buffer: bytes after the answer are in it).
    struct Opened {
        let opened: Opener.Opened
        let buffer: ByteBuffer
    }

    /// How an opening ended.
    enum Result {
        case opened(Opened)
        case failed(OpenError)
    }

    /// An opening's result, made on its thread and handed to the loop whole.
    private final class Delivery: @unchecked Sendable {
        let result: Result
        init(_ result: Result) { self.result = result }
    }

    /// Where an opening's thread leaves its `Delivery` (retained, as an address; releasing),
    /// for the loop to take (acquiring); 0: none. No optional of `Result` anywhere: its
    /// metadata would be made at run time on first use.
    private final class Mailbox: Sendable {
        let delivery = Atomic<UInt>(0)
    }

    private let loop: EventLoop
    /// Signalled by the opening's thread when its result is in the slot.
    private let wakeFD: Int32
    private var watch: EventLoop.Watch?
    private let mailbox = Mailbox()
    private var done: ((Result) -> Void)?
    /// One for every opening (the first cancel is the run's end, after which none starts):
    /// a pipe per attempt made --reconnect's descriptor count move with each dial.
    private let cancellation = ConnectCancellation()

    /// An opening has started and its result is not back yet.
    var isOpening: Bool { done != nil }

    init(loop: EventLoop) throws(Failure) {
        let fd = wsp_eventfd()
        guard fd >= 0 else { throw .local(call: "eventfd", errno: errno) }
        self.loop = loop
        wakeFD = fd
        watch = loop.watch(fd) { [unowned self] _ in deliver() }
        if let watch { loop.setInterest(watch, .readable) }
    }

    deinit {
        if let watch { loop.remove(watch) }
        // A thread still opening signals the eventfd when it ends: its number must not be
        // reused by then, so it stays open (until exit, which is what comes next).
        if done == nil { Glibc.close(wakeFD) }
    }

    /// Opens with `opener` before its --connect-timeout (or `limit`, --timeout, if earlier);
    /// `done` gets the result on the loop. With no thread to be had, it opens on the loop
    /// (blocking it, as every opening once did) and `done` is called before this returns.
    func start(_ opener: Opener, notAfter limit: Instant?, then done: @escaping (Result) -> Void) {
        let cancellation = self.cancellation
        let deadline = { () -> Deadline in
            var deadline = Deadline(seconds: opener.config.client.connectTimeout).notAfter(limit)
            deadline.cancellation = cancellation
            return deadline
        }()
        let log = opener.log
        let job: @Sendable () -> Result = {
            let buffer = ByteBuffer(capacity: Session.receiveBufferSize)
            do throws(OpenError) {
                return .opened(Opened(opened: try opener.open(into: buffer, deadline: deadline, log: log), buffer: buffer))
            } catch {
                return .failed(error)
            }
        }
        let mailbox = self.mailbox
        let wakeFD = self.wakeFD
        self.done = done
        let status = startDetachedThread {
            let delivery = Unmanaged.passRetained(Delivery(job())).toOpaque()
            mailbox.delivery.store(UInt(bitPattern: delivery), ordering: .releasing)
            wsp_eventfd_signal(wakeFD)
        }
        guard status != 0 else { return }
        self.done = nil
        done(job())
    }

    /// The opening's result is back: its `done`, on the loop.
    private func deliver() {
        _ = wsp_eventfd_drain(wakeFD)
        guard let raw = UnsafeMutableRawPointer(bitPattern: mailbox.delivery.exchange(0, ordering: .acquiring)) else { return }
        let delivery = Unmanaged<Delivery>.fromOpaque(raw).takeRetainedValue()
        guard let done else { return }
        self.done = nil
        done(delivery.result)
    }

    /// Ends the dial under way early (it fails, as at its deadline), and any later one: the
    /// run is ending.
    func cancel() { cancellation?.cancel() }
}
