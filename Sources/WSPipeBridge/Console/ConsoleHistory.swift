import Glibc

/// The console's saved history: one entry per line in `$XDG_STATE_HOME/wspipe/history`
/// (`~/.local/state/wspipe/history` by default), newlines and backslashes escaped.
///
/// The file holds what was typed, tokens included, so it is private and never followed
/// elsewhere: the directory is made 0700, the file 0600, opened with O_NOFOLLOW, and not
/// used (one warning, the console goes on without saving) when it is a symbolic link, not a
/// regular file, someone else's, or writable by group or others. Two consoles append under
/// an exclusive flock, so their lines never interleave. It stays bounded: loading keeps the
/// last `maximumEntries`; when appends have grown the file half as much again, the next
/// append rewrites it with the last `maximumEntries` (under the lock); lines over
/// `maximumLineBytes` are not saved, nor lines beginning with a space (the shells'
/// convention for "keep this out of history").
///
/// Problems come back as warning strings for the face to print (once: after a warning the
/// file is left alone for the rest of the run).
package struct ConsoleHistory: Sendable {
    package static let defaultMaximumEntries = 1000
    package static let defaultMaximumLineBytes = 4096

    /// nil: no history (no HOME).
    package let path: String?
    package let maximumEntries: Int
    package let maximumLineBytes: Int
    /// After a warning: the file is not touched again.
    package private(set) var isDisabled: Bool
    private var pendingWarnings: [String] = []
    /// Lines the file holds as far as this console knows (others may have added more).
    private var knownLines = 0

    /// The history at `path`.
    package init(path: String, maximumEntries: Int = defaultMaximumEntries, maximumLineBytes: Int = defaultMaximumLineBytes) {
        self.init(path: Optional(path), maximumEntries: maximumEntries, maximumLineBytes: maximumLineBytes)
    }

    /// The history where the environment puts it: `$XDG_STATE_HOME/wspipe/history` when
    /// XDG_STATE_HOME is an absolute path, else `$HOME/.local/state/wspipe/history`; with
    /// neither, none (and `load` returns a warning).
    package init(environment: [String: String], maximumEntries: Int = defaultMaximumEntries,
                 maximumLineBytes: Int = defaultMaximumLineBytes) {
        self.init(path: Self.defaultPath(environment: environment), maximumEntries: maximumEntries, maximumLineBytes: maximumLineBytes)
        if path == nil {
            isDisabled = true
            pendingWarnings = ["neither XDG_STATE_HOME nor HOME is set: the console keeps no history"]
        }
    }

    private init(path: String?, maximumEntries: Int, maximumLineBytes: Int) {
        self.path = path
        self.maximumEntries = max(1, maximumEntries)
        self.maximumLineBytes = max(1, maximumLineBytes)
        isDisabled = false
    }

    package static func defaultPath(environment: [String: String]) -> String? {
        if let state = environment["XDG_STATE_HOME"], state.hasPrefix("/") {
            return (state.hasSuffix("/") ? state : state + "/") + "wspipe/history"
        }
        guard let home = environment["HOME"], home.hasPrefix("/") else { return nil }
        return (home.hasSuffix("/") ? home : home + "/") + ".local/state/wspipe/history"
    }

    /// Whether `line` goes into the history: not empty, not beginning with a space, not over
    /// the length limit.
    package func shouldSave(_ line: String) -> Bool {
        !line.isEmpty && line.first != " " && line.utf8.count <= maximumLineBytes
    }

    /// The saved entries, oldest first (the last `maximumEntries`; whatever the file holds,
    /// garbage included, it never fails: unreadable lines come back as U+FFFD text).
    package mutating func load() -> (entries: [String], warnings: [String]) {
        var warnings = pendingWarnings
        pendingWarnings = []
        guard let fd = open(warnings: &warnings) else { return ([], warnings) }
        defer { close(fd) }
        lock(fd, LOCK_SH)
        let lines = readLines(fd)
        knownLines = lines.count
        let entries = lines.compactMap { line -> String? in
            let entry = Self.unescape(line)
            return entry.isEmpty || entry.utf8.count > maximumLineBytes ? nil : entry
        }
        return (Array(entries.suffix(maximumEntries)), warnings)
    }

    /// Appends `line` if `shouldSave` says so.
    package mutating func append(_ line: String) -> [String] {
        var warnings = pendingWarnings
        pendingWarnings = []
        guard shouldSave(line), let fd = open(warnings: &warnings) else { return warnings }
        defer { close(fd) }
        lock(fd, LOCK_EX)
        if !writeFully(fd, Array((Self.escape(line) + "\n").utf8)) {
            return warnings + [disable("cannot write the history file \(shown): \(String(cString: strerror(errno)))")]
        }
        knownLines += 1
        if knownLines > maximumEntries + maximumEntries / 2 { trim(fd) }
        return warnings
    }

    // MARK: The file

    private var shown: String { TerminalText.safe(path ?? "") }

    private mutating func disable(_ warning: String) -> String {
        isDisabled = true
        return warning
    }

    /// The file opened for reading and appending, checked; nil after a warning.
    private mutating func open(warnings: inout [String]) -> Int32? {
        guard !isDisabled, let path, let slash = path.lastIndex(of: "/") else { return nil }
        let directory = String(path[..<slash])
        let name = String(path[path.index(after: slash)...])
        if let problem = Self.makeDirectory(directory) {
            warnings.append(disable("cannot use the history directory \(TerminalText.safe(directory)): \(problem); the console keeps no history"))
            return nil
        }
        let directoryFD = Glibc.open(directory.isEmpty ? "/" : directory, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard directoryFD >= 0 else {
            warnings.append(disable("cannot open the history directory \(TerminalText.safe(directory)): \(String(cString: strerror(errno)))"))
            return nil
        }
        defer { close(directoryFD) }
        if let problem = Self.ownershipProblem(directoryFD) {
            warnings.append(disable("the history directory \(TerminalText.safe(directory)) \(problem): the console keeps no history"))
            return nil
        }
        let fd = openat(directoryFD, name, O_RDWR | O_APPEND | O_CREAT | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK | O_NOCTTY, 0o600)
        guard fd >= 0 else {
            let problem = errno == ELOOP ? "is a symbolic link" : "cannot be opened (\(String(cString: strerror(errno))))"
            warnings.append(disable("the history file \(shown) \(problem): the console keeps no history"))
            return nil
        }
        var status = stat()
        if fstat(fd, &status) != 0 || status.st_mode & S_IFMT != S_IFREG {
            close(fd)
            warnings.append(disable("the history file \(shown) is not a regular file: the console keeps no history"))
            return nil
        }
        if let problem = Self.ownershipProblem(fd) {
            close(fd)
            warnings.append(disable("the history file \(shown) \(problem): the console keeps no history"))
            return nil
        }
        return fd
    }

    /// Why a file or directory (open as `fd`) is not ours alone: another owner, or writable
    /// by group or others. nil when it is fine.
    private static func ownershipProblem(_ fd: Int32) -> String? {
        var status = stat()
        guard fstat(fd, &status) == 0 else { return "cannot be examined (\(String(cString: strerror(errno))))" }
        if status.st_uid != geteuid() { return "belongs to uid \(status.st_uid), not to uid \(geteuid())" }
        if status.st_mode & 0o022 != 0 {
            return "is writable by group or others (mode \(String(status.st_mode & 0o777, radix: 8)))"
        }
        return nil
    }

    /// Creates `directory` and its missing parents, each 0700; the reason when it cannot.
    private static func makeDirectory(_ directory: String) -> String? {
        var prefix = ""
        for component in directory.split(separator: "/") {
            prefix += "/" + component
            if mkdir(prefix, 0o700) != 0 && errno != EEXIST { return String(cString: strerror(errno)) }
        }
        return nil
    }

    private func lock(_ fd: Int32, _ operation: Int32) {
        while flock(fd, operation) != 0 && errno == EINTR {}
    }

    /// The file's last lines: at most what `maximumEntries` escaped lines of the longest
    /// saved length take (a longer file is garbage or another program's; its tail is read).
    private func readLines(_ fd: Int32) -> [String] {
        var status = stat()
        guard fstat(fd, &status) == 0, status.st_size > 0 else { return [] }
        let limit = maximumEntries * (2 * maximumLineBytes + 1)
        let size = Int(status.st_size)
        let start = max(0, size - limit)
        var bytes = [UInt8](repeating: 0, count: size - start)
        var done = 0
        while done < bytes.count {
            let n = bytes.withUnsafeMutableBytes { pread(fd, $0.baseAddress! + done, $0.count - done, off_t(start + done)) }
            if n > 0 { done += n } else if n < 0 && errno == EINTR { continue } else { break }
        }
        var lines = bytes[..<done].split(separator: 0x0A, omittingEmptySubsequences: true)
        if start > 0 && !lines.isEmpty { lines.removeFirst() }  // cut by the tail's start
        return lines.map { String(decoding: $0, as: UTF8.self) }
    }

    /// Rewrites the file (locked by the caller) with its last `maximumEntries` entries.
    private mutating func trim(_ fd: Int32) {
        let lines = readLines(fd).filter { Self.unescape($0).utf8.count <= maximumLineBytes }
        let kept = lines.suffix(maximumEntries)
        guard ftruncate(fd, 0) == 0 else { return }
        _ = writeFully(fd, Array(kept.map { $0 + "\n" }.joined().utf8))
        knownLines = kept.count
    }

    private func writeFully(_ fd: Int32, _ bytes: [UInt8]) -> Bool {
        bytes.withUnsafeBytes { raw in
            var offset = 0
            while offset < raw.count {
                let n = write(fd, raw.baseAddress! + offset, raw.count - offset)
                if n > 0 { offset += n } else if n < 0 && errno == EINTR { continue } else { return false }
            }
            return true
        }
    }

    // MARK: One entry per line

    /// `\` as `\\`, LF as `\n`, CR as `\r`: an entry with line breaks (a pasted block recalled
    /// and sent as one message) stays one line of the file.
    package static func escape(_ entry: String) -> String {
        guard entry.utf8.contains(where: { $0 == 0x5C || $0 == 0x0A || $0 == 0x0D }) else { return entry }
        var out = ""
        for scalar in entry.unicodeScalars {
            switch scalar {
            case "\\": out += "\\\\"
            case "\n": out += "\\n"
            case "\r": out += "\\r"
            default: out.unicodeScalars.append(scalar)
            }
        }
        return out
    }

    /// The inverse of `escape`; any other backslash is kept as it is.
    package static func unescape(_ line: String) -> String {
        guard line.utf8.contains(0x5C) else { return line }
        var out = ""
        var scalars = line.unicodeScalars.makeIterator()
        while let scalar = scalars.next() {
            guard scalar == "\\" else { out.unicodeScalars.append(scalar); continue }
            switch scalars.next() {
            case "n": out += "\n"
            case "r": out += "\r"
            case "\\": out += "\\"
            case let other?: out.unicodeScalars.append(scalar); out.unicodeScalars.append(other)
            case nil: out.unicodeScalars.append(scalar)
            }
        }
        return out
    }
}
