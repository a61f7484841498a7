import WebSocketEngine
import WebSocketTransport

/// The client's openings (its connection, and each of --reconnect's attempts): DNS, TCP,
/// TLS, the handshake and redirects (`Opener`) run on a thread of their own
/// (`BlockingJobs`), and the result comes back on the loop. The loop goes on meanwhile:
/// stdin flows into the offline queue, --timeout and the other timers fire, signals are
/// heard. A run that ends while opening cancels the dial (`cancel`) and waits for its
/// result, so the process never exits under a thread still in the middle of TLS.
final class ClientOpening {
    /// A connection opened, and the buffer its handshake's answer was read into (the
    /// driver's first receive buffer: bytes after the answer are in it).
    struct Opened {
        let opened: Opener.Opened
        let buffer: ByteBuffer
    }

    typealias Result = Swift.Result<Opened, OpenError>

    private let jobs: BlockingJobs<Result>
    /// One for every opening (the first cancel is the run's end, after which none starts):
    /// a pipe per attempt made --reconnect's descriptor count move with each dial.
    private let cancellation = ConnectCancellation()

    /// An opening has started and its result is not back yet.
    var isOpening: Bool { jobs.running > 0 }

    init(loop: EventLoop) throws(Failure) {
        do {
            jobs = try BlockingJobs(loop: loop, limit: 1)
        } catch {
            guard case .cannotCreate(let what, let code) = error else { throw .local(call: "eventfd", errno: 0) }
            throw .local(call: what, errno: code)
        }
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
                return .success(Opened(opened: try opener.open(into: buffer, deadline: deadline, log: log), buffer: buffer))
            } catch {
                return .failure(error)
            }
        }
        if !jobs.run(job, then: done) { done(job()) }
    }

    /// Ends the dial under way early (it fails, as at its deadline), and any later one: the
    /// run is ending.
    func cancel() { cancellation?.cancel() }
}
