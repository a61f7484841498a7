import Glibc

/// A small file read whole (a token, a password, --send-file): at most 1 MiB, so a path
/// given by mistake (a device, a log) is refused instead of read without end.
public enum SmallFile {
    public static let limit = 1 << 20

    /// The whole file at `path`, or nil if it cannot be read or is larger than `limit`.
    public static func contents(of path: String) -> [UInt8]? {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 4096)
        while true {
            let n = chunk.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            if n < 0 && errno == EINTR { continue }
            if n < 0 { return nil }
            if n == 0 { return bytes }
            bytes += chunk[0..<n]
            if bytes.count > limit { return nil }
        }
    }

    /// Why `contents(of:)` gave nothing for `path`, in words (for the error message).
    public static func whyUnreadable(_ path: String) -> String {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return String(cString: strerror(errno)) }
        defer { close(fd) }
        var info = stat()
        if fstat(fd, &info) == 0 {
            if info.st_mode & S_IFMT == S_IFDIR { return "it is a directory" }
            if info.st_size > limit { return "it is larger than 1 MiB" }
        }
        return "read error"
    }
}
