import CWSPipeShims
import Glibc
import WebSocketTransport

/// Connects to a `StreamTarget` on an `EventLoop` without blocking it: an IP literal or a
/// Unix path is dialled at once (non-blocking connect, the loop watches the socket); a name
/// is looked up on a helper thread first (getaddrinfo has no timeout and blocks), each
/// dial anew, so the target's DNS is current. The addresses are tried in turn (IPv6 and
/// IPv4 interleaved), all within one timeout. `completion` is called exactly once on the
/// loop, unless `cancel` comes first.
public final class TargetDial {
    /// Why a dial failed.
    public enum Failure: Error, Equatable, Sendable {
        /// The name did not resolve (getaddrinfo's reason).
        case resolve(String)
        /// Every address refused or was unreachable; the last one's errno and address.
        case refused(errno: Int32, address: String)
        /// Nothing answered within the timeout.
        case timedOut(seconds: Double)

        /// The HTTP status a gateway answers with: 504 for a timeout, 503 when this server
        /// is out of descriptors (the target is not at fault: try again), else 502.
        public var status: Int {
            if case .timedOut = self { return 504 }
            return isOutOfDescriptors ? 503 : 502
        }

        /// The socket could not be made: this process or the system is out of descriptors.
        public var isOutOfDescriptors: Bool {
            if case .refused(let code, _) = self { return code == EMFILE || code == ENFILE }
            return false
        }

        public var description: String {
            switch self {
            case .resolve(let reason): return "cannot resolve the target: \(reason)"
            case .refused(let code, let address): return "cannot connect to \(address): \(errnoText(code))"
            case .timedOut(let seconds): return "the target did not answer within \(seconds.secondsText)s"
            }
        }
    }

    public let loop: EventLoop
    public let target: StreamTarget
    public let timeout: Double
    private var completion: ((Result<TCPStream, Failure>) -> Void)?
    private var addresses: [TCPConnector.Address] = []
    private var next = 0
    private var pending: (fd: Int32, watch: EventLoop.Watch, address: String)?
    private var timer: EventLoop.Timer?
    private var lookup: (job: LookupThread, watch: EventLoop.Watch)?
    private var lastFailure: Failure?
    /// The dial keeps itself until it completes or is cancelled (its owner need not).
    private var keepAlive: TargetDial?

    public init(loop: EventLoop, target: StreamTarget, timeout: Double,
                completion: @escaping (Result<TCPStream, Failure>) -> Void) {
        self.loop = loop
        self.target = target
        self.timeout = timeout
        self.completion = completion
    }

    /// Starts dialling (the completion may come before this returns, for a quick failure).
    public func start() {
        keepAlive = self
        let seconds = timeout
        let timer = loop.timer { [weak self] in self?.complete(.failure(.timedOut(seconds: seconds))) }
        self.timer = timer
        loop.arm(timer, at: Instant.now().adding(seconds: timeout))
        switch target {
        case .unix(let path):
            attempt(NonBlockingConnect.start(unixPath: path), address: "unix:\(path)")
        case .tcp(let hostPort):
            if !hostPort.host.contains("%"), let literal = IPAddress(hostPort.host) {
                addresses = [TCPConnector.Address(literal, port: hostPort.port)]
                tryNext()
            } else {
                resolveOffLoop(hostPort)
            }
        }
    }

    /// Stops: no completion comes, the socket (if any) is closed.
    public func cancel() {
        completion = nil
        cleanUp()
    }

    private func resolveOffLoop(_ hostPort: HostPort) {
        let job = LookupThread(host: hostPort.host, port: hostPort.port, seconds: timeout)
        guard job.doneFD >= 0 else { return complete(.failure(.resolve(errnoText(errno)))) }
        let watch = loop.watch(job.doneFD) { [weak self] _ in self?.resolved() }
        lookup = (job, watch)
        loop.setInterest(watch, .readable)
        if !job.start() {
            // No thread: look it up here (a rare fallback; the loop waits for it).
            job.run()
        }
    }

    private func resolved() {
        guard let (job, watch) = lookup else { return }
        loop.remove(watch)
        lookup = nil
        switch job.takeResult() {
        case .success(let found):
            addresses = HappyEyeballs.interleave(found) { $0.isIPv6 }
            tryNext()
        case .failure(let error):
            if case .timedOut = error { return complete(.failure(.timedOut(seconds: timeout))) }
            if case .resolve(_, let reason, _, _, _) = error { return complete(.failure(.resolve(reason))) }
            complete(.failure(.resolve("\(error)")))
        }
    }

    private func tryNext() {
        guard next < addresses.count else {
            return complete(.failure(lastFailure ?? .resolve("no address")))
        }
        let address = addresses[next]
        next += 1
        attempt(NonBlockingConnect.start(address), address: address.description)
    }

    private func attempt(_ started: NonBlockingConnect.Started, address: String) {
        switch started {
        case .connected(let stream):
            complete(.success(stream))
        case .failed(let code):
            failedAttempt(.refused(errno: code, address: address))
        case .inProgress(let fd):
            let watch = loop.watch(fd) { [weak self] _ in self?.connectReady() }
            pending = (fd, watch, address)
            loop.setInterest(watch, .writable)
        }
    }

    private func connectReady() {
        guard let (fd, watch, address) = pending else { return }
        loop.remove(watch)
        pending = nil
        switch NonBlockingConnect.finish(fd, remoteAddress: address) {
        case .success(let stream):
            complete(.success(stream))
        case .failure(let failure):
            failedAttempt(.refused(errno: failure.errno, address: address))
        }
    }

    /// A Unix socket has one address: its failure is the dial's. A name may have more.
    private func failedAttempt(_ failure: Failure) {
        lastFailure = failure
        if case .unix = target { return complete(.failure(failure)) }
        tryNext()
    }

    private func complete(_ result: Result<TCPStream, Failure>) {
        guard let done = completion else {
            if case .success(let stream) = result { stream.close() }
            return
        }
        completion = nil
        cleanUp()
        done(result)
    }

    private func cleanUp() {
        defer { keepAlive = nil }
        if let timer { loop.arm(timer, at: nil) }
        timer = nil
        if let (fd, watch, _) = pending {
            loop.remove(watch)
            Glibc.close(fd)
        }
        pending = nil
        if let (_, watch) = lookup { loop.remove(watch) }
        lookup = nil  // the thread finishes on its own and frees the job
    }
}

extension Double {
    /// "2", "0.5": seconds as a user wrote them.
    var secondsText: String { self == rounded() && abs(self) < 1e15 ? String(Int(self)) : String(self) }
}

/// One getaddrinfo on its own thread; the loop watches `doneFD` for its end.
final class LookupThread: @unchecked Sendable {
    let host: String
    let port: UInt16
    let seconds: Double
    let doneFD = wsp_eventfd()
    // Written by the lookup thread before it signals `doneFD`, read only after that.
    private var result: Result<[TCPConnector.Address], TransportError> = .success([])

    init(host: String, port: UInt16, seconds: Double) {
        self.host = host
        self.port = port
        self.seconds = seconds
    }

    deinit { if doneFD >= 0 { Glibc.close(doneFD) } }

    func start() -> Bool {
        var thread = pthread_t()
        let context = Unmanaged.passRetained(self).toOpaque()
        let status = pthread_create(&thread, nil, { raw in
            Unmanaged<LookupThread>.fromOpaque(raw!).takeRetainedValue().run()
            return nil
        }, context)
        if status != 0 {
            Unmanaged<LookupThread>.fromOpaque(context).release()
            return false
        }
        pthread_detach(thread)
        return true
    }

    func run() {
        result = Result { () throws(TransportError) in
            try TCPConnector.resolve(host: host, port: port, deadline: Deadline(seconds: seconds))
        }
        wsp_eventfd_signal(doneFD)
    }

    func takeResult() -> Result<[TCPConnector.Address], TransportError> { result }
}
