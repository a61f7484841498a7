import Glibc

/// The process's descriptor limit (RLIMIT_NOFILE). A server and a forwarding listener
/// need one descriptor per client, two per forwarded pair: the soft limit most systems
/// start a process with (1024) would cap a gateway at 500 pairs, while the hard one
/// (often 524288) is what the administrator allows.
public enum DescriptorLimit {
    /// The soft and hard limits now.
    public static var current: (soft: UInt64, hard: UInt64)? {
        var limit = rlimit()
        guard getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0 else { return nil }
        return (UInt64(limit.rlim_cur), UInt64(limit.rlim_max))
    }

    /// Raises the soft limit to the hard one. Returns the soft limit before and after, or
    /// nil when it was already there or could not be changed (the old limit then stays:
    /// nothing to report beyond what accept's EMFILE handling does anyway).
    @discardableResult
    public static func raiseToHard() -> (before: UInt64, after: UInt64)? {
        var limit = rlimit()
        guard getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0, limit.rlim_cur < limit.rlim_max else { return nil }
        let before = UInt64(limit.rlim_cur)
        // An unlimited hard limit is above what the kernel allows a soft one (fs.nr_open).
        limit.rlim_cur = limit.rlim_max == rlim_t.max ? rlim_t(DescriptorLimit.kernelMaximum) : limit.rlim_max
        guard limit.rlim_cur > before, setrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0 else { return nil }
        return (before, UInt64(limit.rlim_cur))
    }

    /// fs.nr_open, the most descriptors a process may have (1,048,576 unless changed).
    private static var kernelMaximum: UInt64 {
        let fd = open("/proc/sys/fs/nr_open", O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return 1 << 20 }
        defer { close(fd) }
        var bytes = [UInt8](repeating: 0, count: 32)
        let count = read(fd, &bytes, bytes.count)
        guard count > 0 else { return 1 << 20 }
        let digits = bytes[..<count].prefix { $0 >= 0x30 && $0 <= 0x39 }
        return UInt64(String(decoding: digits, as: UTF8.self)) ?? 1 << 20
    }
}
