import CWSPipeShims
import Glibc

/// A program to run for each connection and its arguments.
public struct ChildCommand: Sendable, Equatable {
    /// The program as given: a path (with a `/`) or a name looked up in `PATH`.
    public var program: String
    /// The arguments after the program name (`argv[1...]`).
    public var arguments: [String]

    public init(program: String, arguments: [String] = []) {
        self.program = program
        self.arguments = arguments
    }

    /// `/bin/sh -c command`.
    public static func shell(_ command: String) -> ChildCommand {
        ChildCommand(program: "/bin/sh", arguments: ["-c", command])
    }

    /// The executable file `program` names: itself when it has a `/`, else the first
    /// executable `directory/program` of `searchPath` (colon-separated; an empty entry is
    /// the current directory).
    ///
    /// Throws `ChildError.missingProgram` (errno ENOENT when nothing is found, EACCES when
    /// the file is not executable or is a directory) so a server can refuse to start before
    /// it listens.
    public func executablePath(searchPath: String?) throws(ChildError) -> String {
        guard !program.isEmpty else { throw .missingProgram(path: program, errno: ENOENT) }
        if program.contains("/") {
            try ChildCommand.checkExecutable(program)
            return program
        }
        var firstRefusal: Int32?
        for entry in (searchPath ?? "/usr/local/bin:/usr/bin:/bin").split(separator: ":", omittingEmptySubsequences: false) {
            let candidate = entry.isEmpty ? program : "\(entry)/\(program)"
            do throws(ChildError) {
                try ChildCommand.checkExecutable(candidate)
                return candidate
            } catch {
                if case .missingProgram(_, let code) = error, code != ENOENT { firstRefusal = firstRefusal ?? code }
            }
        }
        throw .missingProgram(path: program, errno: firstRefusal ?? ENOENT)
    }

    private static func checkExecutable(_ path: String) throws(ChildError) {
        var info = stat()
        guard stat(path, &info) == 0 else { throw .missingProgram(path: path, errno: errno) }
        guard (info.st_mode & S_IFMT) != S_IFDIR else { throw .missingProgram(path: path, errno: EISDIR) }
        guard access(path, X_OK) == 0 else { throw .missingProgram(path: path, errno: errno) }
    }
}

/// Why a child could not be started, as facts (the CLI words them).
public enum ChildError: Error, Equatable, Sendable {
    /// The program does not exist or cannot be executed (`errno`: ENOENT, EACCES, EISDIR).
    case missingProgram(path: String, errno: Int32)
    /// `limit` children are already running (the pool is full; refuse with 503).
    case tooManyChildren(limit: Int)
    /// posix_spawn failed with this errno (EAGAIN: process limit; ENOMEM...).
    case cannotSpawn(path: String, errno: Int32)
    /// A pipe or the pidfd could not be made (EMFILE...).
    case cannotCreate(what: String, errno: Int32)
}

/// How a child ended.
public enum ChildTermination: Equatable, Sendable, CustomStringConvertible {
    /// exit(status).
    case exited(Int32)
    /// Killed by this signal.
    case signaled(Int32)

    /// "exit status 3", "killed by signal 9": the reason of the 1011 Close.
    public var description: String {
        switch self {
        case .exited(let status): return "exit status \(status)"
        case .signaled(let number): return "killed by signal \(number)"
        }
    }

    public var isSuccess: Bool { self == .exited(0) }
}

/// Counts running children (spawned, not yet reaped) against a limit shared by every
/// connection of one server.
public final class ChildPool {
    /// Most children at once (1,024 by default, as websocketd's `--maxforks`).
    public let limit: Int
    /// Children spawned and not yet reaped.
    public private(set) var running = 0

    /// Whether orphans of our children are reaped here (see `init`).
    public let adoptsOrphans: Bool

    /// - Parameters:
    ///   - limit: most children at once.
    ///   - adoptsOrphans: make this process a child subreaper (prctl
    ///     PR_SET_CHILD_SUBREAPER, process-wide), so that a child's killed grandchildren
    ///     come back to us and are reaped with their group, instead of waiting on an init
    ///     that may be slow to reap (or, in a container, not reap at all). Only members of
    ///     our children's groups are ever reaped; other orphans that come to a process
    ///     with this set are its own business, so the wspipe server sets it and a library
    ///     host chooses.
    public init(limit: Int = 1024, adoptsOrphans: Bool = false) {
        self.limit = limit
        self.adoptsOrphans = adoptsOrphans && wsp_become_subreaper() == 0
    }

    /// Whether one more child may start now: check it at the handshake and answer 503
    /// when false, instead of forking.
    public var hasRoom: Bool { running < limit }

    func take() throws(ChildError) {
        guard hasRoom else { throw .tooManyChildren(limit: limit) }
        running += 1
    }

    func giveBack() { running -= 1 }
}
