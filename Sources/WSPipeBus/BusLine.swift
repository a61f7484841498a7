import CWSPipeShims
import Glibc
import WebSocketEngine
import WebSocketTransport

/// Where and how a bus connection dials: TCP to the address, then TLS when asked.
public struct BusDial: Sendable {
    public var host: String
    public var port: UInt16
    /// nil: plain TCP (redis://).
    public var tls: TLSOptions?
    /// Seconds for DNS, TCP and TLS together.
    public var timeout: Double = 10
    /// How the face names the TLS settings in error sentences.
    public var names: SettingNames
    /// NATS: the server's INFO line comes in the clear; TLS starts after it (the line is
    /// read and set aside by the dial).
    public var lineBeforeTLS = false

    public init(host: String, port: UInt16, tls: TLSOptions?, names: SettingNames) {
        self.host = host
        self.port = port
        self.tls = tls
        self.names = names
    }
}

/// Why a bus connection ended (or never opened).
public enum BusLineEnd: Equatable, Sendable {
    /// Dialing failed (DNS, refused, timeout, TLS).
    case dial(TransportError)
    /// The bus closed the connection.
    case endOfStream
    case failed(StreamFailure)
    /// More than the line's `outboundLimit` waited to be written: the bus is too slow.
    case tooSlow(Int)
    /// Nothing came for this many seconds, not even an answer to the keepalive's PING.
    case silent(Double)
}

/// One connection to the bus on the engine's loop. The blocking part, dialing (DNS, Happy
/// Eyeballs, the TLS handshake), runs on a thread of its own and hands the stream to the
/// loop through an eventfd, so the loop never waits for the bus; after that every read and
/// write is non-blocking. Bytes written wait in `outbound` (at most `outboundLimit`).
final class BusLine {
    private let loop: EventLoop
    private var stream: ByteStream?
    private var watch: EventLoop.Watch?
    /// Watches the dial thread's eventfd while a dial is under way.
    private var dialWatch: EventLoop.Watch?
    private var outbound: [UInt8] = []
    private var written = 0
    private let buffer = UnsafeMutableRawPointer.allocate(byteCount: 64 * 1024, alignment: 16)
    /// The wait that a blocked read or write asked for (TLS may want the other direction).
    private var readWants: IOEvents = .readable
    private var writeWants: IOEvents = []
    private(set) var isOpen = false
    /// Stops reading (the local clients are behind); writes go on. The time paused is not
    /// silence for the keepalive.
    var readingPaused = false {
        didSet {
            guard readingPaused != oldValue else { return }
            refresh()
            if !readingPaused {
                keepalive?.heard(at: .now())
                resumeSoon()
            }
        }
    }
    let outboundLimit: Int
    /// 64 KiB reads in one turn of the loop before the others get theirs.
    var readsPerTurn = 16

    var onOpen: (() -> Void)?
    var onBytes: ((UnsafeRawBufferPointer) -> Void)?
    var onEnd: ((BusLineEnd) -> Void)?
    /// Bytes waiting went below a quarter of the limit.
    var onRoom: (() -> Void)?
    /// --bus-ping: seconds of silence before a PING, and as many for anything to come
    /// after it; nil: no keepalive. Read when the line opens.
    var keepaliveInterval: Double?
    /// The line was silent for the interval: the protocol writes its PING (or, mid-handshake
    /// with replies due, nothing: the silence counts on).
    var onQuiet: (() -> Void)?
    private var keepalive: BusKeepalive?
    private lazy var keepaliveTimer = loop.timer { [weak self] in self?.keepaliveDue() }

    init(loop: EventLoop, outboundLimit: Int) {
        self.loop = loop
        self.outboundLimit = outboundLimit
    }

    deinit {
        close()
        buffer.deallocate()
    }

    var queuedBytes: Int { outbound.count - written }

    /// Dials on a helper thread; `onOpen` or `onEnd(.dial)` follows on the loop.
    func open(_ dial: BusDial) {
        let job = DialJob(dial)
        guard job.doneFD >= 0 else { return end(.dial(.system(call: "eventfd", errno: errno))) }
        let doneWatch = loop.watch(job.doneFD) { [weak self, job] _ in
            if let self { self.dialed(job) } else { job.stream?.close() }
        }
        dialWatch = doneWatch
        loop.setInterest(doneWatch, .readable)
        if !job.start() {
            loop.remove(doneWatch)
            dialWatch = nil
            end(.dial(.system(call: "pthread_create", errno: errno)))
        }
    }

    private func dialed(_ job: DialJob) {
        guard let doneWatch = dialWatch else {
            job.stream?.close()
            return
        }
        loop.remove(doneWatch)
        dialWatch = nil
        switch job.result {
        case .success(let stream): opened(stream)
        case .failure(let error): end(.dial(error))
        }
    }

    private func opened(_ stream: ByteStream) {
        self.stream = stream
        isOpen = true
        watch = loop.watch(stream.fileDescriptor) { [weak self] events in self?.ready(events) }
        if let keepaliveInterval {
            let keepalive = BusKeepalive(interval: keepaliveInterval, timeout: keepaliveInterval, openedAt: .now())
            self.keepalive = keepalive
            loop.arm(keepaliveTimer, at: keepalive.deadline)
        }
        onOpen?()
        if isOpen { flush(); refresh(); resumeSoon() }
    }

    /// Queues `bytes` and writes what the socket takes now. Past `outboundLimit` the line ends.
    func send(_ bytes: [UInt8]) {
        guard isOpen else { return }
        if written > 0 && written * 2 >= outbound.count {
            outbound.removeFirst(written)
            written = 0
        }
        outbound += bytes
        if queuedBytes > outboundLimit { return end(.tooSlow(queuedBytes)) }
        if writeWants.isEmpty { flush() }
        refresh()
    }

    func close() {
        isOpen = false
        if let dialWatch { loop.remove(dialWatch) }
        dialWatch = nil
        if let watch { loop.remove(watch) }
        watch = nil
        stream?.close()
        stream = nil
        if keepalive != nil { loop.arm(keepaliveTimer, at: nil) }
        keepalive = nil
        outbound = []
        written = 0
    }

    private func end(_ why: BusLineEnd) {
        close()
        onEnd?(why)
    }

    /// Bytes wait for the socket: queued, or in a TLS record not yet written.
    private var hasOutput: Bool { written < outbound.count || stream?.hasPendingOutput == true }

    private func ready(_ events: IOEvents) {
        guard isOpen else { return }
        let wanted = writeWants.isEmpty ? IOEvents.writable : writeWants
        if hasOutput && !events.intersection(wanted.union([.error, .hangUp])).isEmpty {
            writeWants = []
            flush()
            guard isOpen else { return }
        }
        if !readingPaused { read() }
        if isOpen { refresh() }
    }

    /// A TLS stream may hold decrypted bytes poll cannot see; a paused line resumed has
    /// bytes waiting in the socket that no new event announces.
    private func resumeSoon() {
        loop.later { [weak self] in
            guard let self, isOpen, !readingPaused else { return }
            read()
            if isOpen { refresh() }
        }
    }

    /// The keepalive's timer: usually early (bytes came since it was armed), so it is armed
    /// again; a PING when the line was silent for the interval; the end when still silent.
    private func keepaliveDue() {
        guard isOpen, var keepalive else { return }
        let now = Instant.now()
        if readingPaused { keepalive.heard(at: now) }  // bytes wait for us, not us for them
        let step = keepalive.step(at: now)
        self.keepalive = keepalive
        switch step {
        case .wait(let until):
            loop.arm(keepaliveTimer, at: until)
        case .ping(let next):
            loop.arm(keepaliveTimer, at: next)
            onQuiet?()
        case .dead(let seconds):
            end(.silent(seconds))
        }
    }

    private func read() {
        guard let stream else { return }
        for _ in 0..<readsPerTurn {
            switch stream.read(into: buffer, count: 64 * 1024) {
            case .done(let n):
                keepalive?.heard(at: .now())
                onBytes?(UnsafeRawBufferPointer(start: buffer, count: n))
                guard isOpen, !readingPaused else { return }
            case .wouldBlock(let wanted):
                readWants = IOEvents(wanted)
                return
            case .endOfStream: return end(.endOfStream)
            case .failed(let why): return end(.failed(why))
            }
        }
        resumeSoon()  // take turns with the clients
    }

    private func flush() {
        guard let stream else { return }
        while written < outbound.count || stream.hasPendingOutput {
            let before = queuedBytes
            let result: IOResult
            if written < outbound.count {
                result = outbound.withUnsafeMutableBytes { raw in
                    var vector = iovec(iov_base: raw.baseAddress! + written, iov_len: raw.count - written)
                    return stream.write(&vector, count: 1)
                }
            } else {
                result = stream.flush()
            }
            switch result {
            case .done(let n):
                written += n
                if n == 0 && written >= outbound.count && !stream.hasPendingOutput { break }
                if before >= outboundLimit / 4 && queuedBytes < outboundLimit / 4 { onRoom?() }
                guard isOpen else { return }
                if n == 0 { return }
            case .wouldBlock(let wanted):
                writeWants = IOEvents(wanted)
                return
            case .endOfStream: return end(.endOfStream)
            case .failed(let why): return end(.failed(why))
            }
        }
        if written == outbound.count {
            outbound.removeAll(keepingCapacity: outbound.capacity <= 1 << 20)
            written = 0
        }
    }

    private func refresh() {
        guard let watch, isOpen else { return }
        var interest = writeWants
        if !readingPaused { interest.formUnion(readWants.isEmpty ? .readable : readWants) }
        if hasOutput && writeWants.isEmpty { interest.insert(.writable) }
        if !loop.setInterest(watch, interest) { end(.failed(.system(errno: EBADF))) }
    }
}

/// Reads up to and including the first LF (NATS's INFO, before its TLS handshake).
private func skipLine(_ stream: ByteStream, until deadline: Deadline) throws(TransportError) {
    var byte: UInt8 = 0
    for _ in 0..<(64 * 1024) {
        switch stream.read(into: &byte, count: 1) {
        case .done: if byte == 0x0A { return }
        case .wouldBlock(let interest): try stream.wait(for: interest, until: deadline, stage: .tlsHandshake(proxy: nil))
        case .endOfStream, .failed: throw .tls(.closedDuringHandshake(hint: ""))
        }
    }
    throw .tls(.closedDuringHandshake(hint: " (no INFO line from the NATS server)"))
}

/// A dial on its own thread: TCP (DNS and Happy Eyeballs within the deadline), then TLS.
/// The thread writes `result` before it signals `doneFD`; the loop reads it after.
final class DialJob: @unchecked Sendable {
    let dial: BusDial
    let doneFD = wsp_eventfd()
    var result: Result<ByteStream, TransportError> = .failure(.system(call: "dial", errno: 0))
    var stream: ByteStream? { if case .success(let stream) = result { return stream } else { return nil } }

    init(_ dial: BusDial) { self.dial = dial }

    deinit { if doneFD >= 0 { Glibc.close(doneFD) } }

    func start() -> Bool {
        var thread = pthread_t()
        let context = Unmanaged.passRetained(self).toOpaque()
        let status = pthread_create(&thread, nil, { raw in
            let job = Unmanaged<DialJob>.fromOpaque(raw!).takeRetainedValue()
            job.result = Result { () throws(TransportError) -> ByteStream in
                let deadline = Deadline(seconds: job.dial.timeout)
                let tcp = try TCPConnector.connect(host: job.dial.host, port: job.dial.port, deadline: deadline)
                guard let tls = job.dial.tls else { return tcp }
                if job.dial.lineBeforeTLS { try skipLine(tcp, until: deadline) }
                return try TLSStream.connect(over: tcp, options: tls, deadline: deadline, names: job.dial.names)
            }
            wsp_eventfd_signal(job.doneFD)
            return nil
        }, context)
        if status != 0 {
            Unmanaged<DialJob>.fromOpaque(context).release()
            return false
        }
        pthread_detach(thread)
        return true
    }
}
