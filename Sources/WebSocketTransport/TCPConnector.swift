import CWSPipeShims
import Glibc

/// Opens TCP connections: resolves the host (getaddrinfo, IPv4 and IPv6) and tries every
/// address in the order the resolver returns them until one connects, all within one
/// deadline.
public enum TCPConnector {
    /// A resolved address, with its text form for messages.
    public struct Address: Sendable, CustomStringConvertible {
        public var family: Int32
        public var storage: [UInt8]  // a sockaddr of `storage.count` bytes
        public var description: String
    }

    /// Connects to `host`:`port` before `deadline`. `log` receives one line per attempt.
    /// Throws `.resolve`, `.connect` (with the last address's error) or `.timedOut`.
    public static func connect(host: String, port: UInt16, deadline: Instant, timeoutSeconds: Double,
                               log: (String) -> Void = { _ in }) throws(TransportError) -> TCPStream {
        let addresses = try resolve(host: host, port: port, deadline: deadline, timeoutSeconds: timeoutSeconds)
        var lastError = "no address"
        for address in addresses {
            if Instant.now() >= deadline { throw .timedOut(stage: "connecting to \(address)", seconds: timeoutSeconds) }
            log("connecting to \(address)")
            switch attempt(address, deadline: deadline) {
            case .success(let fd):
                var one: Int32 = 1
                _ = setsockopt(fd, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
                log("connected to \(address)")
                return TCPStream(fileDescriptor: fd, remoteAddress: address.description)
            case .failure(let error):
                if case .timedOut = error {
                    throw .timedOut(stage: "connecting to \(address)", seconds: timeoutSeconds)
                }
                if case .connect(_, let reason) = error { lastError = reason }
                log("\(address): \(lastError)")
            }
        }
        let target = addresses.count == 1 ? addresses[0].description : "\(host) port \(port) (\(addresses.count) addresses tried)"
        throw .connect(target: target, reason: lastError)
    }

    private static func attempt(_ address: Address, deadline: Instant) -> Result<Int32, TransportError> {
        let fd = socket(address.family, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_NONBLOCK.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        if fd < 0 { return .failure(.connect(target: address.description, reason: errnoText(errno))) }
        let started = address.storage.withUnsafeBytes { raw in
            Glibc.connect(fd, raw.baseAddress!.assumingMemoryBound(to: sockaddr.self), socklen_t(raw.count))
        }
        if started == 0 { return .success(fd) }
        let code = errno
        guard code == EINPROGRESS || code == EINTR else {
            Glibc.close(fd)
            return .failure(.connect(target: address.description, reason: errnoText(code)))
        }
        var entry = pollfd(fd: fd, events: Int16(POLLOUT), revents: 0)
        while true {
            let ready = poll(&entry, 1, deadline.pollTimeout())
            if ready < 0 && errno == EINTR { continue }
            if ready == 0 {
                Glibc.close(fd)
                return .failure(.timedOut(stage: "connecting", seconds: 0))
            }
            break
        }
        var error: Int32 = 0
        var length = socklen_t(MemoryLayout<Int32>.size)
        getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &length)
        if error != 0 {
            Glibc.close(fd)
            return .failure(.connect(target: address.description, reason: errnoText(error)))
        }
        return .success(fd)
    }

    /// Resolves `host` to addresses (an IP literal without asking DNS). getaddrinfo(3)
    /// has no timeout of its own, so a name lookup runs on a helper thread and is abandoned
    /// when the deadline passes.
    public static func resolve(host: String, port: UInt16, deadline: Instant,
                               timeoutSeconds: Double) throws(TransportError) -> [Address] {
        if let numeric = try? lookup(host: host, port: port, numericOnly: true), !numeric.isEmpty {
            return numeric
        }
        let job = LookupJob(host: host, port: port)
        guard job.start() else {
            return try lookup(host: host, port: port, numericOnly: false)
        }
        guard job.wait(until: deadline) else {
            throw .timedOut(stage: "resolving '\(host)'", seconds: timeoutSeconds)
        }
        return try job.result.get()
    }

    fileprivate static func lookup(host: String, port: UInt16, numericOnly: Bool) throws(TransportError) -> [Address] {
        var hints = addrinfo()
        hints.ai_family = AF_UNSPEC
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        hints.ai_protocol = Int32(IPPROTO_TCP)
        hints.ai_flags = numericOnly ? AI_NUMERICHOST | AI_NUMERICSERV : AI_NUMERICSERV | AI_ADDRCONFIG
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
    let doneFD = wsp_eventfd()
    // Written by the lookup thread before it signals `doneFD`, read only after that.
    var result: Result<[TCPConnector.Address], TransportError> = .success([])

    init(host: String, port: UInt16) {
        self.host = host
        self.port = port
    }

    deinit { if doneFD >= 0 { Glibc.close(doneFD) } }

    func start() -> Bool {
        guard doneFD >= 0 else { return false }
        var thread = pthread_t()
        let context = Unmanaged.passRetained(self).toOpaque()
        let status = pthread_create(&thread, nil, { raw in
            let job = Unmanaged<LookupJob>.fromOpaque(raw!).takeRetainedValue()
            job.result = Result { () throws(TransportError) in
                try TCPConnector.lookup(host: job.host, port: job.port, numericOnly: false)
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

    /// True when the lookup finished before `deadline`.
    func wait(until deadline: Instant) -> Bool {
        var entry = pollfd(fd: doneFD, events: Int16(POLLIN), revents: 0)
        while true {
            let ready = poll(&entry, 1, deadline.pollTimeout())
            if ready < 0 && errno == EINTR { continue }
            return ready > 0
        }
    }
}

/// The text of a NUL-terminated C string held in an array.
func cString(_ chars: [CChar]) -> String {
    String(decoding: chars.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
}
