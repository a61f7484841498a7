import Glibc
import WebSocketTransport

/// The token file on disk: checked with stat(2) at each lookup and read again when its
/// inode, size or modification time changed. A file that no longer parses keeps the last
/// good table (and says so once per change through `onMistake`).
public final class TokenFile {
    public let path: String
    public private(set) var table: TokenTable
    /// A changed file that could not be read or parsed: the path, the line (0: the whole
    /// file) and the problem. The last good table stays.
    public var onMistake: (_ path: String, _ line: Int, _ problem: String) -> Void = { _, _, _ in }
    /// A changed file was read: its entry count.
    public var onReload: (_ entries: Int) -> Void = { _ in }
    private var seen: FileIdentity?

    /// Why the file cannot be used at start-up.
    public enum OpenError: Error, Equatable, Sendable, CustomStringConvertible {
        case unreadable(path: String, errno: Int32)
        /// Group- or world-writable: someone else could point tokens anywhere.
        case writableByOthers(path: String, mode: UInt32)
        case mistake(path: String, TokenTable.Mistake)

        public var description: String {
            switch self {
            case .unreadable(let path, let code): return "cannot read the token file '\(path)': \(errnoText(code))"
            case .writableByOthers(let path, let mode):
                return "the token file '\(path)' is writable by \(mode & UInt32(S_IWOTH) != 0 ? "everyone" : "its group") "
                    + "(mode \(String(mode & 0o7777, radix: 8))): anyone who can write it chooses where clients go; chmod go-w it"
            case .mistake(let path, let mistake): return "\(path):\(mistake.line): \(mistake.problem)"
            }
        }
    }

    /// Reads and checks the file. Throws `OpenError`.
    public init(path: String) throws(OpenError) {
        self.path = path
        guard let identity = FileIdentity(path: path) else { throw .unreadable(path: path, errno: errno) }
        if identity.mode & UInt32(S_IWGRP | S_IWOTH) != 0 { throw .writableByOthers(path: path, mode: identity.mode) }
        guard let bytes = TokenFile.readFile(path) else { throw .unreadable(path: path, errno: errno) }
        switch TokenTable.parse(bytes) {
        case .success(let table): self.table = table
        case .failure(let mistake): throw .mistake(path: path, mistake)
        }
        seen = identity
    }

    /// The target of `token` in the current file.
    public func target(for token: String) -> StreamTarget? {
        refresh()
        return table.targets[token]
    }

    /// Reads the file again if it changed since last seen.
    public func refresh() {
        guard let identity = FileIdentity(path: path) else {
            if seen != nil { onMistake(path, 0, errnoText(errno) + "; keeping the last good table") }
            seen = nil
            return
        }
        guard identity != seen else { return }
        seen = identity
        if identity.mode & UInt32(S_IWGRP | S_IWOTH) != 0 {
            return onMistake(path, 0, "it became writable by others; keeping the last good table")
        }
        guard let bytes = TokenFile.readFile(path) else { return onMistake(path, 0, errnoText(errno) + "; keeping the last good table") }
        switch TokenTable.parse(bytes) {
        case .success(let fresh):
            table = fresh
            onReload(fresh.targets.count)
        case .failure(let mistake):
            onMistake(path, mistake.line, mistake.problem + "; keeping the last good table")
        }
    }

    /// At most 1 MiB: a token file is small; a huge one is a mistake, not a table.
    static func readFile(_ path: String) -> [UInt8]? {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 16384)
        while bytes.count <= 1 << 20 {
            let n = Glibc.read(fd, &chunk, chunk.count)
            if n < 0 && errno == EINTR { continue }
            if n < 0 { return nil }
            if n == 0 { return bytes }
            bytes += chunk[..<n]
        }
        errno = EFBIG
        return nil
    }
}

/// What says a file changed: its inode, size, modification time and mode.
struct FileIdentity: Equatable {
    let device: UInt64
    let inode: UInt64
    let size: Int64
    let modified: Int64
    let modifiedNanoseconds: Int
    let mode: UInt32

    init?(path: String) {
        var info = stat()
        guard stat(path, &info) == 0 else { return nil }
        device = UInt64(info.st_dev)
        inode = UInt64(info.st_ino)
        size = Int64(info.st_size)
        modified = Int64(info.st_mtim.tv_sec)
        modifiedNanoseconds = info.st_mtim.tv_nsec
        mode = UInt32(info.st_mode)
    }
}
