import CWSPipeShims
import Glibc

/// How names are resolved and connections raced.
public struct ConnectOptions: Sendable, Equatable {
    /// `-4` / `-6`.
    public var family: AddressFamily = .any
    /// `--resolve HOST:PORT:ADDR[,ADDR...]`: addresses to use instead of asking DNS.
    public var overrides: [ResolveOverride] = []
    /// Happy Eyeballs' delay between attempts.
    public var attemptDelay: Double = HappyEyeballs.attemptDelay

    public init(family: AddressFamily = .any, overrides: [ResolveOverride] = []) {
        self.family = family
        self.overrides = overrides
    }
}

/// `--resolve HOST:PORT:ADDR[,ADDR...]` (curl's syntax): connections to HOST on PORT use
/// these addresses, in this order, instead of DNS.
public struct ResolveOverride: Sendable, Equatable {
    public var host: String
    public var port: UInt16
    public var addresses: [IPAddress]

    public init?(parsing text: String) {
        let parts = text.split(separator: ":", maxSplits: 2, omittingEmptySubsequences: false)
        guard parts.count == 3, !parts[0].isEmpty, let port = UInt16(parts[1]), port > 0 else { return nil }
        var host = String(parts[0])
        if host.hasPrefix("[") && host.hasSuffix("]") { host = String(host.dropFirst().dropLast()) }
        let addresses = parts[2].split(separator: ",").map { IPAddress($0) }
        guard !addresses.isEmpty, addresses.allSatisfy({ $0 != nil }) else { return nil }
        self.host = host.lowercased()
        self.port = port
        self.addresses = addresses.compactMap { $0 }
    }

    func matches(host other: String, port otherPort: UInt16) -> Bool {
        port == otherPort && host == other.lowercased()
    }
}

/// Opens TCP connections: resolves the host (getaddrinfo, IPv4 and IPv6) and races the
/// addresses with Happy Eyeballs (RFC 8305) until one connects, all within one deadline.
public enum TCPConnector {
    /// A resolved address, with its text form for messages.
    public struct Address: Sendable, CustomStringConvertible {
        public var family: Int32
        public var storage: [UInt8]  // a sockaddr of `storage.count` bytes
        public var description: String

        init(family: Int32, storage: [UInt8], description: String) {
            self.family = family
            self.storage = storage
            self.description = description
        }

        /// `ip` on `port`.
        public init(_ ip: IPAddress, port: UInt16) {
            if ip.isIPv6 {
                var address = sockaddr_in6()
                address.sin6_family = sa_family_t(AF_INET6)
                address.sin6_port = port.bigEndian
                withUnsafeMutableBytes(of: &address.sin6_addr) { $0.copyBytes(from: ip.bytes) }
                storage = withUnsafeBytes(of: address) { Array($0) }
                family = AF_INET6
            } else {
                var address = sockaddr_in()
                address.sin_family = sa_family_t(AF_INET)
                address.sin_port = port.bigEndian
                withUnsafeMutableBytes(of: &address.sin_addr) { $0.copyBytes(from: ip.bytes) }
                storage = withUnsafeBytes(of: address) { Array($0) }
                family = AF_INET
            }
            description = HostPort(host: ip.description, port: port).description
        }

        public var isIPv6: Bool { family == AF_INET6 }

        /// The IP address alone.
        public var ip: IPAddress? {
            storage.withUnsafeBytes { raw -> IPAddress? in
                if family == AF_INET6, raw.count >= MemoryLayout<sockaddr_in6>.size {
                    let address = raw.loadUnaligned(as: sockaddr_in6.self)
                    return IPAddress(bytes: withUnsafeBytes(of: address.sin6_addr) { Array($0) })
                }
                if family == AF_INET, raw.count >= MemoryLayout<sockaddr_in>.size {
                    let address = raw.loadUnaligned(as: sockaddr_in.self)
                    return IPAddress(bytes: withUnsafeBytes(of: address.sin_addr) { Array($0) })
                }
                return nil
            }
        }
    }

    /// Connects to `host`:`port` before `deadline`. `log` receives one line per attempt.
    /// Throws `.resolve`, `.noAddress`, `.connect` (with the last address's errno) or `.timedOut`.
    public static func connect(host: String, port: UInt16, options: ConnectOptions = ConnectOptions(),
                               deadline: Deadline, log: (String) -> Void = { _ in }) throws(TransportError) -> TCPStream {
        let addresses = try resolve(host: host, port: port, options: options, deadline: deadline)
        let ordered = HappyEyeballs.interleave(addresses) { $0.isIPv6 }
        if ordered.count > 1 {
            log("\(host) has \(ordered.count) addresses; trying in this order: \(ordered.map(\.description).joined(separator: ", "))")
        }
        return try race(ordered, host: host, port: port, delay: options.attemptDelay, deadline: deadline, log: log)
    }

    /// Happy Eyeballs over `addresses` (already in order).
    static func race(_ addresses: [Address], host: String, port: UInt16, delay: Double, deadline: Deadline,
                     log: (String) -> Void) throws(TransportError) -> TCPStream {
        var schedule = HappyEyeballs.Schedule(count: addresses.count, delay: delay)
        var pending: [(index: Int, fd: Int32)] = []
        var lastError: Int32 = EADDRNOTAVAIL
        defer { for attempt in pending { Glibc.close(attempt.fd) } }

        func won(_ index: Int, _ fd: Int32) -> TCPStream {
            var one: Int32 = 1
            _ = setsockopt(fd, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
            let others = pending.filter { $0.index != index }.map { addresses[$0.index].description }
            pending.removeAll { $0.index == index }
            log("connected to \(addresses[index])")
            if schedule.started > 1 {
                log("happy eyeballs: \(addresses[index]) (\(addresses[index].isIPv6 ? "IPv6" : "IPv4")) won, attempt "
                    + "\(index + 1) of \(addresses.count)" + (others.isEmpty ? "" : "; abandoning \(others.joined(separator: ", "))"))
            }
            return TCPStream(fileDescriptor: fd, remoteAddress: addresses[index].description)
        }

        while true {
            let now = Instant.now()
            for index in schedule.attemptsToStart(at: now) {
                log("connecting to \(addresses[index])")
                switch start(addresses[index]) {
                case .success(let (fd, connected)):
                    pending.append((index, fd))
                    if connected { return won(index, fd) }
                case .failure(let failure):
                    lastError = failure.errno
                    log("\(addresses[index]): \(errnoText(failure.errno))")
                    schedule.attemptFailed(index, at: now)
                }
            }
            if schedule.isExhausted {
                let target = addresses.count == 1 ? addresses[0].description
                    : "\(host) port \(port) (\(addresses.count) addresses tried)"
                throw .connect(target: target, errno: lastError)
            }
            if pending.isEmpty { continue }
            if deadline.hasPassed {
                let target = pending.count == 1 ? addresses[pending[0].index].description : "\(host) port \(port)"
                throw .timedOut(.connecting(target: target), seconds: deadline.seconds)
            }
            var entries = pending.map { pollfd(fd: $0.fd, events: Int16(POLLOUT), revents: 0) }
            // A cancellation wakes the poll; the check above then ends the attempts.
            if let cancellation = deadline.cancellation {
                entries.append(pollfd(fd: cancellation.fileDescriptor, events: Int16(POLLIN), revents: 0))
            }
            let wake = schedule.wakeTime.map { min($0, deadline.instant) } ?? deadline.instant
            let ready = poll(&entries, nfds_t(entries.count), wake.pollTimeout())
            if ready < 0 && errno != EINTR {
                throw .system(call: "poll", errno: errno)
            }
            // Cancelled: the check above ends the attempts, even when a connect completed in
            // the same poll (a connection the caller gave up on is not used).
            guard ready > 0, !(deadline.cancellation?.isCancelled ?? false) else { continue }
            let failedAt = Instant.now()
            for (slot, entry) in entries.prefix(pending.count).enumerated().reversed() where entry.revents != 0 {
                let attempt = pending[slot]
                var error: Int32 = 0
                var length = socklen_t(MemoryLayout<Int32>.size)
                getsockopt(attempt.fd, SOL_SOCKET, SO_ERROR, &error, &length)
                if error == 0 { return won(attempt.index, attempt.fd) }
                lastError = error
                log("\(addresses[attempt.index]): \(errnoText(error))")
                Glibc.close(attempt.fd)
                pending.remove(at: slot)
                schedule.attemptFailed(attempt.index, at: failedAt)
            }
        }
    }

    /// Starts a non-blocking connect: the socket and whether it is already connected.
    private static func start(_ address: Address) -> Result<(Int32, Bool), ConnectFailure> {
        let fd = socket(address.family, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_NONBLOCK.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        if fd < 0 { return .failure(ConnectFailure(errno: errno)) }
        let started = address.storage.withUnsafeBytes { raw in
            Glibc.connect(fd, raw.baseAddress!.assumingMemoryBound(to: sockaddr.self), socklen_t(raw.count))
        }
        if started == 0 { return .success((fd, true)) }
        let code = errno
        guard code == EINPROGRESS || code == EINTR else {
            Glibc.close(fd)
            return .failure(ConnectFailure(errno: code))
        }
        return .success((fd, false))
    }

    private struct ConnectFailure: Error {
        let errno: Int32
    }

    /// Resolves `host` to addresses: a `--resolve` override, an IP literal (no DNS), or
    /// getaddrinfo(3), limited to `options.family`. getaddrinfo has no timeout of its own,
    /// so a name lookup runs on a helper thread and is abandoned when the deadline passes.
    /// Throws `.resolve`, `.noAddress` or `.timedOut`.
    public static func resolve(host: String, port: UInt16, options: ConnectOptions = ConnectOptions(),
                               deadline: Deadline) throws(TransportError) -> [Address] {
        let all: [Address]
        if let override = options.overrides.first(where: { $0.matches(host: host, port: port) }) {
            all = override.addresses.map { Address($0, port: port) }
        } else if !host.contains("%"), let literal = IPAddress(host) {
            all = [Address(literal, port: port)]
        } else {
            let job = LookupJob(host: host, port: port, family: options.family)
            if job.start() {
                guard try deadline.wait(fd: job.doneFD, events: Int16(POLLIN)) else {
                    throw .timedOut(.resolving(host: host), seconds: deadline.seconds)
                }
                all = try job.result.mapError { TCPConnector.noteFamily($0, options.family) }.get()
            } else {
                do {
                    all = try lookup(host: host, port: port, family: options.family)
                } catch {
                    throw noteFamily(error, options.family)
                }
            }
        }
        let kept: [Address]
        switch options.family {
        case .any: kept = all
        case .ipv4: kept = all.filter { !$0.isIPv6 }
        case .ipv6: kept = all.filter { $0.isIPv6 }
        }
        guard !kept.isEmpty else {
            throw .noAddress(host: host, family: options.family, available: all.map(\.description))
        }
        return kept
    }

    /// A failed lookup limited to one family says so.
    static func noteFamily(_ error: TransportError, _ family: AddressFamily) -> TransportError {
        guard case .resolve(let host, let reason, _, let via, let connectTo) = error else { return error }
        return .resolve(host: host, reason: reason, family: family, via: via, connectTo: connectTo)
    }

    fileprivate static func lookup(host: String, port: UInt16, family: AddressFamily) throws(TransportError) -> [Address] {
        var hints = addrinfo()
        switch family {
        case .any: hints.ai_family = AF_UNSPEC
        case .ipv4: hints.ai_family = AF_INET
        case .ipv6: hints.ai_family = AF_INET6
        }
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        hints.ai_protocol = Int32(IPPROTO_TCP)
        hints.ai_flags = AI_NUMERICSERV | AI_ADDRCONFIG
        var list: UnsafeMutablePointer<addrinfo>?
        let status = getaddrinfo(host, String(port), &hints, &list)
        guard status == 0, let first = list else {
            let reason = status == EAI_SYSTEM ? errnoText(errno) : String(cString: gai_strerror(status))
            throw .resolve(host: host, reason: reason)
        }
        defer { freeaddrinfo(list) }
        var addresses: [Address] = []
        var cursor: UnsafeMutablePointer<addrinfo>? = first
        while let entry = cursor {
            if let sa = entry.pointee.ai_addr {
                let bytes = Array(UnsafeRawBufferPointer(start: sa, count: Int(entry.pointee.ai_addrlen)))
                addresses.append(Address(family: entry.pointee.ai_family, storage: bytes,
                                         description: describe(sa, family: entry.pointee.ai_family)))
            }
            cursor = entry.pointee.ai_next
        }
        return addresses
    }

    static func describe(_ sa: UnsafePointer<sockaddr>, family: Int32) -> String {
        var text = [CChar](repeating: 0, count: Int(INET6_ADDRSTRLEN) + 1)
        if family == AF_INET6 {
            return sa.withMemoryRebound(to: sockaddr_in6.self, capacity: 1) { p in
                var addr = p.pointee.sin6_addr
                inet_ntop(AF_INET6, &addr, &text, socklen_t(text.count))
                return "[\(cString(text))]:\(UInt16(bigEndian: p.pointee.sin6_port))"
            }
        }
        return sa.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { p in
            var addr = p.pointee.sin_addr
            inet_ntop(AF_INET, &addr, &text, socklen_t(text.count))
            return "\(cString(text)):\(UInt16(bigEndian: p.pointee.sin_port))"
        }
    }
}

/// A getaddrinfo call on its own thread, so that the caller can stop waiting for it.
private final class LookupJob: @unchecked Sendable {
    let host: String
    let port: UInt16
    let family: AddressFamily
    let doneFD = wsp_eventfd()
    // Written by the lookup thread before it signals `doneFD`, read only after that.
    var result: Result<[TCPConnector.Address], TransportError> = .success([])

    init(host: String, port: UInt16, family: AddressFamily) {
        self.host = host
        self.port = port
        self.family = family
    }

    deinit { if doneFD >= 0 { Glibc.close(doneFD) } }

    func start() -> Bool {
        guard doneFD >= 0 else { return false }
        var thread = pthread_t()
        let context = Unmanaged.passRetained(self).toOpaque()
        let status = pthread_create(&thread, nil, { raw in
            let job = Unmanaged<LookupJob>.fromOpaque(raw!).takeRetainedValue()
            job.result = Result { () throws(TransportError) in
                try TCPConnector.lookup(host: job.host, port: job.port, family: job.family)
            }
            wsp_eventfd_signal(job.doneFD)
            return nil
        }, context)
        if status != 0 {
            Unmanaged<LookupJob>.fromOpaque(context).release()
            return false
        }
        pthread_detach(thread)
        return true
    }
}

/// The text of a NUL-terminated C string held in an array.
func cString(_ chars: [CChar]) -> String {
    String(decoding: chars.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
}
