import CWSPipeShims
import Glibc
import WebSocketCore

/// O_PATH as the open flags type (the shim's enum imports as Int).
private let oPath = Int32(WSP_O_PATH)

/// Opens a `RequestPath`'s segments beneath one directory and nowhere else, race-free: every
/// lookup starts from a descriptor of the directory (or of a directory opened beneath it),
/// never from a path string the file system could change under us.
///
/// Symbolic links are refused everywhere below the directory (the directory itself may be
/// one: it is opened once, by its path, at init), including links that point back inside:
/// both mechanisms then give the same answer, and a link's target is not what the tree's
/// owner saw when they put a file there. Mechanisms: `openat2(2)` with `RESOLVE_BENEATH |
/// RESOLVE_NO_MAGICLINKS | RESOLVE_NO_SYMLINKS` (Linux 5.6), or, where that is missing
/// (ENOSYS, or EPERM from a seccomp filter), a walk of one `openat(O_NOFOLLOW)` per segment.
/// The segments themselves are never "." or ".." and hold no "/" (`RequestPath`).
public final class BeneathResolver {
    public enum Mechanism: String, Sendable {
        case openat2 = "openat2(RESOLVE_BENEATH)"
        case noFollowWalk = "an O_NOFOLLOW walk"
    }

    /// The directory (O_PATH, close-on-exec), open for the resolver's life.
    public let root: Int32
    public let mechanism: Mechanism

    /// Opens `directory`; `mechanism` nil: openat2 when the kernel has it. Throws
    /// `.failed(errno:)` with open(2)'s errno (ENOTDIR, ENOENT...).
    public init(directory: String, mechanism: Mechanism? = nil) throws(ResolveFailure) {
        let fd = Glibc.open(directory, oPath | O_DIRECTORY | O_CLOEXEC)
        guard fd >= 0 else { throw .failed(errno: errno) }
        root = fd
        if let mechanism {
            self.mechanism = mechanism
        } else {
            let probe = wsp_openat2_beneath(fd, ".", oPath)
            let code = errno
            if probe >= 0 { Glibc.close(probe) }
            self.mechanism = probe >= 0 || (code != ENOSYS && code != EPERM) ? .openat2 : .noFollowWalk
        }
    }

    deinit { Glibc.close(root) }

    /// `segments` opened: a regular file for reading (O_RDONLY | O_NONBLOCK, so a FIFO swapped
    /// in cannot block us) or a directory (O_PATH | O_DIRECTORY: the caller may look for
    /// its index.html with `open(_:in:)`, which needs search permission there, not read, as
    /// nginx's does). Anything else, a symlink or a missing segment is a `ResolveFailure`
    /// (`.denied` for EACCES: a file we may not read, a directory on the way we may not search).
    public func open(segments: [[UInt8]]) throws(ResolveFailure) -> OpenedEntry {
        guard let leaf = segments.last else {
            return try reopen(root, name: ".", facts: try Self.facts(root))
        }
        let parent = try directory(segments.dropLast())
        defer { if parent != root { Glibc.close(parent) } }
        return try open(leaf, inDescriptor: parent)
    }

    /// `name` (one segment) beneath an opened directory, as `open(segments:)`.
    public func open(_ name: [UInt8], in directory: OpenedEntry) throws(ResolveFailure) -> OpenedEntry {
        guard directory.facts.kind == .directory else { throw .notADirectory }
        return try open(name, inDescriptor: directory.fd)
    }

    /// websocketd's program for `path`: the longest prefix of its segments that exists,
    /// walking directories, ends at a regular file, which must be executable by us. The
    /// entry is an O_PATH descriptor of that file (exec it through /proc/self/fd, so what
    /// runs is what was checked); `programSegments` of the path name it (SCRIPT_NAME), the
    /// rest is PATH_INFO.
    public func program(for path: RequestPath) throws(ResolveFailure) -> (entry: OpenedEntry, programSegments: Int) {
        var current = root
        defer { if current != root { Glibc.close(current) } }
        for (index, segment) in path.segments.enumerated() {
            let fd = try step(current, segment)
            let facts: EntryFacts
            do throws(ResolveFailure) { facts = try Self.facts(fd) } catch { Glibc.close(fd); throw error }
            switch facts.kind {
            case .directory:
                if current != root { Glibc.close(current) }
                current = fd
            case .regular:
                guard Self.isExecutable(fd, facts) else { Glibc.close(fd); throw .notExecutable }
                return (OpenedEntry(fd: fd, facts: facts), index + 1)
            case .symlink:
                Glibc.close(fd)
                throw .symlink
            case .other:
                Glibc.close(fd)
                throw .notRegular
            }
        }
        throw .isDirectory
    }

    // MARK: - Steps

    /// The directory `segments` name, as an O_PATH descriptor (the root itself for none).
    private func directory(_ segments: ArraySlice<[UInt8]>) throws(ResolveFailure) -> Int32 {
        guard !segments.isEmpty else { return root }
        if mechanism == .openat2 {
            var joined: [UInt8] = []
            for segment in segments { if !joined.isEmpty { joined.append(UInt8(ascii: "/")) }; joined += segment }
            let fd = Self.withCString(joined) { wsp_openat2_beneath(root, $0, oPath | O_DIRECTORY) }
            guard fd >= 0 else { throw ResolveFailure(errno: errno) }
            return fd
        }
        var current = root
        for segment in segments {
            let fd = try step(current, segment)
            if current != root { Glibc.close(current) }
            current = fd
            let facts: EntryFacts
            do throws(ResolveFailure) { facts = try Self.facts(fd) } catch { Glibc.close(fd); throw error }
            guard facts.kind == .directory else {
                Glibc.close(fd)
                throw facts.kind == .symlink ? .symlink : .notFound
            }
        }
        return current
    }

    /// One segment beneath `directory`: O_PATH | O_NOFOLLOW, so a symlink comes back as
    /// itself (the caller's fstat sees it) and is never followed.
    private func step(_ directory: Int32, _ segment: [UInt8]) throws(ResolveFailure) -> Int32 {
        let fd = Self.withCString(segment) { name in
            mechanism == .openat2 ? wsp_openat2_beneath(directory, name, oPath | O_NOFOLLOW)
                                  : openat(directory, name, oPath | O_NOFOLLOW | O_CLOEXEC)
        }
        guard fd >= 0 else { throw ResolveFailure(errno: errno) }
        return fd
    }

    private func open(_ name: [UInt8], inDescriptor parent: Int32) throws(ResolveFailure) -> OpenedEntry {
        guard !name.isEmpty, name != Array(".".utf8), name != Array("..".utf8),
              !name.contains(where: { $0 == UInt8(ascii: "/") || $0 == 0 }) else { throw .notFound }
        let fd = try step(parent, name)
        defer { Glibc.close(fd) }
        let facts = try Self.facts(fd)
        switch facts.kind {
        case .symlink: throw .symlink
        case .other: throw .notRegular
        case .regular, .directory:
            let opened = Self.withCString(name) { reopen(parent, name: $0, facts: facts) }
            return try opened.get()
        }
    }

    /// `name` beneath `parent` opened for reading (a directory: O_PATH, nothing is read from
    /// it), which must still be the entry `facts` describe (a swap between the two opens is
    /// `.changed`).
    private func reopen(_ parent: Int32, name: UnsafePointer<CChar>, facts: EntryFacts) -> Result<OpenedEntry, ResolveFailure> {
        let flags = facts.kind == .directory ? oPath | O_DIRECTORY : O_RDONLY | O_NONBLOCK | O_NOCTTY
        let fd = openat(parent, name, flags | O_NOFOLLOW | O_CLOEXEC)
        guard fd >= 0 else { return .failure(ResolveFailure(errno: errno)) }
        guard let now = try? Self.facts(fd), now.device == facts.device, now.inode == facts.inode else {
            Glibc.close(fd)
            return .failure(.changed)
        }
        return .success(OpenedEntry(fd: fd, facts: now))
    }

    private func reopen(_ parent: Int32, name: String, facts: EntryFacts) throws(ResolveFailure) -> OpenedEntry {
        try name.withCString { reopen(parent, name: $0, facts: facts) }.get()
    }

    static func facts(_ fd: Int32) throws(ResolveFailure) -> EntryFacts {
        var info = stat()
        guard fstat(fd, &info) == 0 else { throw ResolveFailure(errno: errno) }
        return EntryFacts(info)
    }

    /// Executable by us: access(2) through /proc/self/fd (our uid, groups and ACLs); without
    /// /proc, any execute bit.
    static func isExecutable(_ fd: Int32, _ facts: EntryFacts) -> Bool {
        let verdict = access("/proc/self/fd/\(fd)", X_OK)
        if verdict == 0 { return true }
        return errno == ENOENT && facts.mode & 0o111 != 0
    }

    static func withCString<T>(_ bytes: [UInt8], _ body: (UnsafePointer<CChar>) -> T) -> T {
        (bytes + [0]).withUnsafeBufferPointer { buffer in
            buffer.baseAddress!.withMemoryRebound(to: CChar.self, capacity: buffer.count) { body($0) }
        }
    }
}

/// An entry opened beneath a `BeneathResolver`'s directory: its descriptor (closed when this
/// goes, unless taken) and what fstat said of it.
public final class OpenedEntry {
    public private(set) var fd: Int32
    public let facts: EntryFacts

    init(fd: Int32, facts: EntryFacts) {
        self.fd = fd
        self.facts = facts
    }

    /// The descriptor, now the caller's to close.
    public func take() -> Int32 {
        let taken = fd
        fd = -1
        return taken
    }

    deinit { if fd >= 0 { Glibc.close(fd) } }
}

/// What fstat(2) says of an opened entry.
public struct EntryFacts: Sendable, Equatable {
    public enum Kind: Sendable, Equatable { case regular, directory, symlink, other }
    public var kind: Kind
    public var size: Int64
    /// Last modification: seconds and nanoseconds since the epoch.
    public var modifiedSeconds: Int64
    public var modifiedNanoseconds: Int64
    public var device: UInt64
    public var inode: UInt64
    /// The permission bits (st_mode & 0o7777).
    public var mode: UInt32

    init(_ info: stat) {
        switch info.st_mode & S_IFMT {
        case S_IFREG: kind = .regular
        case S_IFDIR: kind = .directory
        case S_IFLNK: kind = .symlink
        default: kind = .other
        }
        size = Int64(info.st_size)
        modifiedSeconds = Int64(info.st_mtim.tv_sec)
        modifiedNanoseconds = Int64(info.st_mtim.tv_nsec)
        device = UInt64(info.st_dev)
        inode = UInt64(info.st_ino)
        mode = UInt32(info.st_mode & 0o7777)
    }
}

/// Why a path could not be opened beneath the directory (a server answers 404; `-v` says this).
public enum ResolveFailure: Error, Equatable, Sendable, CustomStringConvertible {
    case notFound
    /// A segment is a symbolic link (refused even when it points inside).
    case symlink
    /// The path would resolve outside the directory (openat2's EXDEV).
    case outsideRoot
    /// The path ends at a directory where a file was wanted.
    case isDirectory
    /// A directory was wanted and this is not one.
    case notADirectory
    /// A device, FIFO or socket.
    case notRegular
    /// A regular file we may not execute.
    case notExecutable
    /// The entry changed between our two opens of it.
    case changed
    /// Permission denied (EACCES) on the way.
    case denied
    /// Another errno.
    case failed(errno: Int32)

    init(errno code: Int32) {
        switch code {
        case ENOENT, ENOTDIR, ENAMETOOLONG: self = .notFound
        case ELOOP: self = .symlink
        case EXDEV: self = .outsideRoot
        case EACCES, EPERM: self = .denied
        default: self = .failed(errno: code)
        }
    }

    /// The process or system ran out of descriptors (EMFILE, ENFILE) on the way: the entry
    /// may well exist, so a server answers 503, not 404.
    public var isOutOfDescriptors: Bool {
        if case .failed(let code) = self { return code == EMFILE || code == ENFILE }
        return false
    }

    public var description: String {
        switch self {
        case .notFound: return "no such file"
        case .symlink: return "a symbolic link is on the path"
        case .outsideRoot: return "the path resolves outside the directory"
        case .isDirectory: return "it is a directory"
        case .notADirectory: return "it is not a directory"
        case .notRegular: return "it is not a regular file"
        case .notExecutable: return "the file is not executable"
        case .changed: return "the file changed while it was opened"
        case .denied: return "permission denied"
        case .failed(let code): return String(cString: strerror(code))
        }
    }
}
